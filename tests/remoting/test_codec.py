"""The wire format byte by byte (reference section 9 and test 31), fastjson bodies, properties bodies."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqctl.remoting import codec
from mqctl.remoting.codec import (
    JSON,
    MAX_FRAME,
    ROCKETMQ,
    BodyError,
    FrameError,
    IntKeys,
    RemotingCommand,
    decode_frame,
    encode_frame,
    fastjson_dumps,
    fastjson_loads,
    frame_length,
    mark_protocol_type,
    parse_protocol_type,
    properties_dumps,
    properties_loads,
)

# ----------------------------------------------------------------------------------------------
# Frame layout


def test_mark_protocol_type_reference_test_31() -> None:
    assert mark_protocol_type(261, JSON) == bytes.fromhex("00000105")
    assert mark_protocol_type(16777215, ROCKETMQ) == bytes.fromhex("01FFFFFF")
    assert parse_protocol_type(bytes.fromhex("00000105")) == (JSON, 261)
    assert parse_protocol_type(bytes.fromhex("01FFFFFF")) == (ROCKETMQ, 16777215)


# A RocketMQ 4.9.5 broker's response as captured on the wire (published with a CVE-2023-33246 checker).
CAPTURED_RESPONSE = (
    b"\x00\x00\x00c\x00\x00\x00_"
    b'{"code":0,"flag":1,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":403}'
)


def test_json_frame_matches_a_captured_rocketmq_response() -> None:
    cmd = RemotingCommand(code=0, language="JAVA", version=403, opaque=0, flag=1)
    assert encode_frame(cmd) == CAPTURED_RESPONSE
    decoded = decode_frame(CAPTURED_RESPONSE[4:])
    assert decoded == RemotingCommand(
        code=0, language="JAVA", version=403, opaque=0, flag=1, serialize_type=JSON
    )
    assert decoded.is_response and not decoded.is_oneway


def test_json_header_key_order_and_null_omission() -> None:
    cmd = RemotingCommand(
        code=1012,
        language="JAVA",
        opaque=5,
        flag=2,
        remark="r",
        ext_fields={"clusterName": "c", "brokerName": "b"},
    )
    header = codec.encode_json_header(cmd)
    assert header == (
        b'{"code":1012,"extFields":{"brokerName":"b","clusterName":"c"},"flag":2,'
        b'"language":"JAVA","opaque":5,"remark":"r","serializeTypeCurrentRPC":"JSON","version":0}'
    )
    assert codec.decode_json_header(header) == cmd
    assert cmd.is_oneway and not cmd.is_response


def test_rocketmq_binary_header_layout() -> None:
    cmd = RemotingCommand(
        code=1001,
        language="PYTHON",
        version=0,
        opaque=7,
        flag=0,
        remark="hi",
        ext_fields={"b": "2", "a": "1"},
        body=b"xx",
        serialize_type=ROCKETMQ,
    )
    header = (
        "03e9"
        "03"
        "0000"
        "00000007"
        "00000000"  # code, language, version, opaque, flag
        "00000002"
        "6869"  # remark "hi"
        "00000010"
        "0001"
        "61"
        "00000001"
        "31"
        "0001"
        "62"
        "00000001"
        "32"  # {a: 1, b: 2}
    )
    frame = encode_frame(cmd)
    assert frame.hex() == f"{4 + 39 + 2:08x}" + "01" + f"{39:06x}" + header + "7878"
    assert decode_frame(frame[4:]) == cmd


def test_rocketmq_header_null_remark_and_ext_and_java_casts() -> None:
    cmd = RemotingCommand(code=2104, language="JAVA", opaque=-1, flag=1, serialize_type=ROCKETMQ)
    header = codec.encode_rocketmq_header(cmd)
    assert header.hex() == "0838000000ffffffff000000010000000000000000"
    back = codec.decode_rocketmq_header(header)
    assert (back.code, back.remark, back.ext_fields, back.opaque) == (2104, None, None, -1)
    # Java's (short) cast of a code over 32767, as RocketMQSerializable does
    assert (
        codec.decode_rocketmq_header(
            codec.encode_rocketmq_header(RemotingCommand(code=40000, serialize_type=ROCKETMQ))
        ).code
        == 40000 - 65536
    )


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
def test_utf8_text_survives(stype: int) -> None:
    cmd = RemotingCommand(
        code=1, remark="état ✓", ext_fields={"brokerName": "代理-a"}, body=b"\x00\xff", serialize_type=stype
    )
    assert decode_frame(encode_frame(cmd)[4:]) == cmd


# ----------------------------------------------------------------------------------------------
# Malformed frames


def test_bad_lengths() -> None:
    with pytest.raises(FrameError, match="bad frame length"):
        frame_length(struct.pack(">i", 3))
    with pytest.raises(FrameError, match="bad frame length"):
        frame_length(struct.pack(">i", -1))
    assert frame_length(struct.pack(">i", MAX_FRAME - 4)) == MAX_FRAME - 4
    with pytest.raises(FrameError, match="over the maximum"):
        frame_length(struct.pack(">i", MAX_FRAME - 3))


def test_header_longer_than_frame() -> None:
    with pytest.raises(FrameError, match="longer than the frame"):
        decode_frame(mark_protocol_type(10, JSON) + b"{}")


@pytest.mark.parametrize(
    "header, reason",
    [
        (b"{not json", "undecodable JSON"),
        (b"\xff\xfe", "undecodable JSON"),
        (b"[1,2]", "not an object"),
        (b'{"flag":0}', "no code"),
        (b'{"code":"1"}', "32-bit"),
        (b'{"code":4294967296}', "32-bit"),
        (b'{"code":1,"extFields":[1]}', "extFields"),
        (b'{"code":1,"remark":5}', "remark"),
    ],
)
def test_bad_json_headers(header: bytes, reason: str) -> None:
    with pytest.raises(FrameError, match=reason):
        decode_frame(mark_protocol_type(len(header), JSON) + header)


def test_bad_rocketmq_headers_and_serialize_type() -> None:
    with pytest.raises(FrameError, match="shorter"):
        decode_frame(mark_protocol_type(5, ROCKETMQ) + b"\x00" * 5)
    fixed = struct.pack(">hbhii", 1, 0, 0, 0, 0)
    for tail in (
        struct.pack(">i", 100) + b"x",
        struct.pack(">i", 0) + struct.pack(">i", 50),
        struct.pack(">i", 0) + struct.pack(">i", 3) + b"\x00\x05a",
        struct.pack(">i", 0) + struct.pack(">i", 7) + b"\x00\x01a\x00\x00\x00\x09",
    ):
        header = fixed + tail
        with pytest.raises(FrameError):
            decode_frame(mark_protocol_type(len(header), ROCKETMQ) + header)
    with pytest.raises(FrameError, match="serialize type"):
        decode_frame(bytes([2, 0, 0, 0]))


# ----------------------------------------------------------------------------------------------
# Round trips (hypothesis)

_text = st.text(max_size=20)
_int32 = st.integers(-(2**31), 2**31 - 1)
_commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    language=st.sampled_from(codec.LANGUAGES),
    version=st.integers(-(2**15), 2**15 - 1),
    opaque=_int32,
    flag=_int32,
    remark=st.none() | st.text(min_size=1, max_size=30),
    ext_fields=st.none() | st.dictionaries(_text, _text, min_size=1, max_size=5),
    body=st.binary(max_size=64),
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


@given(_commands)
@settings(max_examples=300, deadline=None)
def test_frames_round_trip(cmd: RemotingCommand) -> None:
    frame = encode_frame(cmd)
    assert frame_length(frame[:4]) == len(frame) - 4
    assert decode_frame(frame[4:]) == cmd


# ----------------------------------------------------------------------------------------------
# fastjson bodies


def test_fastjson_bare_numeric_keys_reference_example() -> None:
    raw = b'{"brokerAddrs":{1:"127.0.0.1:30911"}}'
    assert fastjson_loads(raw) == {"brokerAddrs": {"1": "127.0.0.1:30911"}}
    assert fastjson_dumps({"brokerAddrs": IntKeys({1: "127.0.0.1:30911"})}) == raw


def test_fastjson_writer_sorts_and_omits_nulls() -> None:
    doc = {
        "syncStateSetEpoch": 3,
        "syncStateSet": [1, 2],
        "absent": None,
        "m": IntKeys({10: "b", 2: "a", -1: "n"}),
        "t": True,
    }
    assert (
        fastjson_dumps(doc)
        == b'{"m":{-1:"n",2:"a",10:"b"},"syncStateSet":[1,2],"syncStateSetEpoch":3,"t":true}'
    )


def test_bare_key_reader_leaves_strings_and_arrays_alone() -> None:
    raw = '{ 12 : [1, 2, {3:"x,{4:5}"}], "k\\"1": {-7:"y"}, "z": "{8:9}"}'
    assert fastjson_loads(raw) == {"12": [1, 2, {"3": "x,{4:5}"}], 'k"1': {"-7": "y"}, "z": "{8:9}"}


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
        max_leaves=20,
    )
)
@settings(max_examples=300, deadline=None)
def test_bare_key_reader_is_identity_on_standard_json(value: object) -> None:
    text = json.dumps(value)
    assert codec.quote_bare_keys(text) == text


def test_fastjson_reader_errors() -> None:
    for raw in (b"{1:", b"\xff", b"{'a':1}"):
        with pytest.raises(BodyError):
            fastjson_loads(raw)


# ----------------------------------------------------------------------------------------------
# Properties bodies


def test_properties_writer_is_sorted_key_value_lines() -> None:
    assert properties_dumps({"b": "2", "a": "x=y", "n": None}) == b"a=x=y\nb=2\n"
    assert properties_dumps({}) == b""


def test_properties_reader_follows_java_properties_load() -> None:
    text = (
        b"# comment\n! also a comment\n\n  enableElectUncleanMaster = true\n"
        b"notifyBrokerRoleChanged:false\nscanNotActiveBrokerInterval 3000\n"
        b"multi=a\\\n    b\\\n c\r\nesc\\ key=\\u0041\\t\nempty=\nnovalue\n= x\n"
    )
    assert properties_loads(text) == {
        "enableElectUncleanMaster": "true",
        "notifyBrokerRoleChanged": "false",
        "scanNotActiveBrokerInterval": "3000",
        "multi": "abc",
        "esc key": "A\t",
        "empty": "",
        "novalue": "",
        "": "x",
    }


def test_properties_round_trip_and_errors() -> None:
    props = {"waitFor": "2", "heartbeatTimeoutMillis": "1500"}
    assert properties_loads(properties_dumps(props)) == props
    with pytest.raises(BodyError, match="string2Properties error"):
        properties_loads(b"k=\\u12")
    with pytest.raises(BodyError, match="string2Properties error"):
        properties_loads(b"k=\xff")


@settings(max_examples=300, deadline=None)
@given(
    code=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    version=st.integers(0, 2**15),
    opaque=st.integers(-(2**31), 2**31 - 1),
    language=st.sampled_from(["JAVA", "PYTHON", "GO", 3]),
    remark=st.none() | st.text(max_size=40) | st.just('x "opaque":0 y'),
)
def test_json_header_template_is_byte_for_byte_the_full_encoding(
    code: int, flag: int, version: int, opaque: int, language: str | int, remark: str | None
) -> None:
    """Answers without extFields are encoded from a template split at the opaque (the heartbeat's
    hot path): the bytes must be exactly those of the full encoding, the first time and after."""
    cmd = codec.RemotingCommand(
        code=code, language=language, version=version, opaque=opaque, flag=flag, remark=remark
    )
    assert codec.encode_json_header(cmd) == codec._encode_json_doc(cmd)
    assert codec.encode_json_header(cmd) == codec._encode_json_doc(cmd)
