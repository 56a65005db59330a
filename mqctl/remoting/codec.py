"""RocketMQ remoting wire format (reference section 9), fastjson-style bodies and properties bodies.

A frame is ``int32 totalLen`` (excluding itself) + ``int32 (serializeType << 24) | headerLen`` +
header + body, big-endian. The header is fastjson JSON (serialize type 0) or RocketMQ's binary
layout (1). Pure functions and one dataclass: no sockets here, so every byte is testable.

Decoders raise ``FrameError`` (the frame is malformed: the connection must be closed) or
``BodyError`` (the frame is fine but its body is not what the request code needs).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

JSON = 0
ROCKETMQ = 1
SERIALIZE_TYPES = {JSON: "JSON", ROCKETMQ: "ROCKETMQ"}
SERIALIZE_TYPE_BY_NAME = {v: k for k, v in SERIALIZE_TYPES.items()}

# com.rocketmq.remoting.frameMaxLength: the whole frame, its 4-byte length field included
# (Netty's LengthFieldBasedFrameDecoder counts it).
MAX_FRAME = 16777216
MAX_HEADER = 0xFFFFFF

FLAG_RESPONSE = 1  # RPC_TYPE bit
FLAG_ONEWAY = 2  # RPC_ONEWAY bit

LANGUAGES = (
    "JAVA",
    "CPP",
    "DOTNET",
    "PYTHON",
    "DELPHI",
    "ERLANG",
    "RUBY",
    "OTHER",
    "HTTP",
    "GO",
    "PHP",
    "OMS",
    "RUST",
    "NODE_JS",
)
LANGUAGE_CODES = {name: i for i, name in enumerate(LANGUAGES)}

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


class FrameError(ValueError):
    """The bytes are not a RocketMQ remoting frame (close the connection)."""


class BodyError(ValueError):
    """A well-formed frame whose body cannot be read as the request code requires."""


@dataclass
class RemotingCommand:
    """One request or response. ``remark``/``ext_fields`` None = absent (fastjson omits nulls)."""

    code: int
    language: str = "PYTHON"
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes = b""
    serialize_type: int = JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)


# ---------------------------------------------------------------------------------------------
# Frame


def mark_protocol_type(header_length: int, serialize_type: int) -> bytes:
    """RemotingCommand.markProtocolType: the serialize type in the top byte, the length below."""
    return bytes(
        [
            serialize_type & 0xFF,
            (header_length >> 16) & 0xFF,
            (header_length >> 8) & 0xFF,
            header_length & 0xFF,
        ]
    )


def parse_protocol_type(value: bytes) -> tuple[int, int]:
    """The 4 bytes after the length field -> (serialize type, header length)."""
    raw = struct.unpack(">I", value)[0]
    return raw >> 24, raw & MAX_HEADER


def frame_length(prefix: bytes) -> int:
    """Validate the 4-byte length field; returns how many bytes follow it."""
    total: int = struct.unpack(">i", prefix)[0]
    if total < 4:
        raise FrameError(f"bad frame length {total} (at least 4 needed for the header length field)")
    if total + 4 > MAX_FRAME:
        raise FrameError(f"frame of {total + 4} bytes is over the maximum of {MAX_FRAME}")
    return total


def encode_header(cmd: RemotingCommand) -> bytes:
    if cmd.serialize_type == ROCKETMQ:
        return encode_rocketmq_header(cmd)
    if cmd.serialize_type == JSON:
        return encode_json_header(cmd)
    raise ValueError(f"unknown serialize type {cmd.serialize_type}")


def encode_frame(cmd: RemotingCommand) -> bytes:
    header = encode_header(cmd)
    if len(header) > MAX_HEADER:
        raise ValueError(f"header of {len(header)} bytes does not fit in 24 bits")
    total = 4 + len(header) + len(cmd.body)
    if total + 4 > MAX_FRAME:
        raise ValueError(f"frame of {total + 4} bytes is over the maximum of {MAX_FRAME}")
    return struct.pack(">i", total) + mark_protocol_type(len(header), cmd.serialize_type) + header + cmd.body


def decode_frame(payload: bytes) -> RemotingCommand:
    """Decode what follows the length field (``frame_length`` bytes)."""
    if len(payload) < 4:
        raise FrameError(f"frame of {len(payload)} bytes has no header length field")
    stype, hlen = parse_protocol_type(payload[:4])
    if hlen > len(payload) - 4:
        raise FrameError(f"header length {hlen} is longer than the frame ({len(payload) - 4} bytes left)")
    header = payload[4 : 4 + hlen]
    if stype == JSON:
        cmd = decode_json_header(header)
    elif stype == ROCKETMQ:
        cmd = decode_rocketmq_header(header)
    else:
        raise FrameError(f"unknown serialize type {stype}")
    cmd.body = bytes(payload[4 + hlen :])
    return cmd


# ---------------------------------------------------------------------------------------------
# JSON header (fastjson: getters in alphabetical order, nulls omitted)

try:
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover - a dependency; json alone decodes the same headers
    _orjson_loads = None  # type: ignore[assignment]


def _language_name(language: str | int) -> str:
    if isinstance(language, int):
        return LANGUAGES[language] if 0 <= language < len(LANGUAGES) else "OTHER"
    return language


_HEADER_TEMPLATES: dict[tuple[int, int, str, str | None, int], tuple[bytes, bytes]] = {}


def encode_json_header(cmd: RemotingCommand) -> bytes:
    if cmd.ext_fields is None and isinstance(cmd.opaque, int):
        # an answer without extFields (every heartbeat's): the same bytes but for the opaque, so
        # its two halves are made once (a few per code) and joined around the opaque
        key = (cmd.code, cmd.flag, _language_name(cmd.language), cmd.remark, cmd.version)
        halves = _HEADER_TEMPLATES.get(key)
        if halves is None:
            template = RemotingCommand(cmd.code, cmd.language, cmd.version, 0, cmd.flag, cmd.remark)
            full = _encode_json_doc(template)
            cut = full.index(b'"opaque":0') + len(b'"opaque":')
            halves = (full[:cut], full[cut + 1 :])
            if len(_HEADER_TEMPLATES) < 1024:
                _HEADER_TEMPLATES[key] = halves
        return b"%s%d%s" % (halves[0], cmd.opaque, halves[1])
    return _encode_json_doc(cmd)


def _encode_json_doc(cmd: RemotingCommand) -> bytes:
    doc: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields is not None:
        doc["extFields"] = {k: cmd.ext_fields[k] for k in sorted(cmd.ext_fields)}
    doc["flag"] = cmd.flag
    doc["language"] = _language_name(cmd.language)
    doc["opaque"] = cmd.opaque
    if cmd.remark is not None:
        doc["remark"] = cmd.remark
    doc["serializeTypeCurrentRPC"] = SERIALIZE_TYPES[JSON]
    doc["version"] = cmd.version
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _int32(doc: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not INT32_MIN <= value <= INT32_MAX:
        raise FrameError(f"JSON header field {key} is not a 32-bit integer: {value!r}")
    return value


def decode_json_header(header: bytes) -> RemotingCommand:
    try:
        # orjson first (a heartbeat's header in a fifth of the time); what it refuses (a lone
        # surrogate, NaN, a number past 64 bits) goes to json, so both accept the same headers
        doc = _orjson_loads(header) if _orjson_loads is not None else json.loads(header.decode("utf-8"))
    except ValueError:
        try:
            doc = json.loads(header.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise FrameError(f"undecodable JSON header: {exc}") from None
    except RecursionError as exc:
        raise FrameError(f"undecodable JSON header: {exc}") from None
    if not isinstance(doc, dict):
        raise FrameError(f"JSON header is a {type(doc).__name__}, not an object")
    if "code" not in doc:
        raise FrameError("JSON header has no code")
    language = doc.get("language", "JAVA")
    if isinstance(language, int) and not isinstance(language, bool):
        language = _language_name(language)
    if not isinstance(language, str):
        raise FrameError(f"JSON header field language is not a name: {language!r}")
    remark = doc.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise FrameError(f"JSON header field remark is not a string: {remark!r}")
    ext = doc.get("extFields")
    ext_fields: dict[str, str] | None = None
    if ext is not None:
        if not isinstance(ext, dict):
            raise FrameError("JSON header field extFields is not an object")
        # what RocketMQ sends: strings only, kept as they are
        ext_fields = ext if all(type(v) is str for v in ext.values()) else _ext_strings(ext)
    return RemotingCommand(
        code=_int32(doc, "code"),
        language=language,
        version=_int32(doc, "version"),
        opaque=_int32(doc, "opaque"),
        flag=_int32(doc, "flag"),
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=JSON,
    )


def _ext_strings(ext: dict[str, Any]) -> dict[str, str]:
    """extFields values as fastjson reads them into a Map<String, String>: nulls left out, numbers
    and booleans as their text."""
    ext_fields: dict[str, str] = {}
    for k, v in ext.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        elif isinstance(v, int | float):
            v = str(v)
        elif not isinstance(v, str):
            raise FrameError(f"JSON header extFields value of {k!r} is not a string")
        ext_fields[k] = v
    return ext_fields


# ---------------------------------------------------------------------------------------------
# ROCKETMQ binary header (RocketMQSerializable)

_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag


def _short(value: int) -> int:
    """Java's (short) cast."""
    value &= 0xFFFF
    return value - 0x10000 if value >= 0x8000 else value


def _byte(value: int) -> int:
    value &= 0xFF
    return value - 0x100 if value >= 0x80 else value


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    language = cmd.language if isinstance(cmd.language, int) else LANGUAGE_CODES.get(cmd.language, 7)
    parts = [_FIXED.pack(_short(cmd.code), _byte(language), _short(cmd.version), cmd.opaque, cmd.flag)]
    remark = (cmd.remark or "").encode("utf-8")
    parts.append(struct.pack(">i", len(remark)) + remark)
    ext = b""
    for key in sorted(cmd.ext_fields or {}):
        value = (cmd.ext_fields or {})[key]
        if value is None:
            continue
        kb, vb = key.encode("utf-8"), str(value).encode("utf-8")
        ext += struct.pack(">h", len(kb)) + kb + struct.pack(">i", len(vb)) + vb
    parts.append(struct.pack(">i", len(ext)) + ext)
    return b"".join(parts)


def decode_rocketmq_header(header: bytes) -> RemotingCommand:
    need = _FIXED.size + 8
    if len(header) < need:
        raise FrameError(f"ROCKETMQ header of {len(header)} bytes is shorter than {need}")
    code, language, version, opaque, flag = _FIXED.unpack_from(header, 0)
    pos = _FIXED.size

    def take(n: int, what: str) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(header):
            raise FrameError(f"ROCKETMQ header: {what} of {n} bytes runs past the header ({len(header)})")
        chunk = header[pos : pos + n]
        pos += n
        return chunk

    def text(raw: bytes, what: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError(f"ROCKETMQ header: {what} is not UTF-8") from None

    (remark_len,) = struct.unpack(">i", take(4, "remark length"))
    remark = text(take(remark_len, "remark"), "remark") if remark_len > 0 else None
    (ext_len,) = struct.unpack(">i", take(4, "extFields length"))
    ext_fields: dict[str, str] | None = None
    if ext_len > 0:
        raw = take(ext_len, "extFields")
        ext_fields = {}
        i = 0
        while i < len(raw):
            if i + 2 > len(raw):
                raise FrameError("ROCKETMQ header: truncated extFields key length")
            (klen,) = struct.unpack_from(">h", raw, i)
            i += 2
            if klen < 0 or i + klen + 4 > len(raw):
                raise FrameError("ROCKETMQ header: extFields key runs past the map")
            key = text(raw[i : i + klen], "extFields key")
            i += klen
            (vlen,) = struct.unpack_from(">i", raw, i)
            i += 4
            if vlen < 0 or i + vlen > len(raw):
                raise FrameError("ROCKETMQ header: extFields value runs past the map")
            ext_fields[key] = text(raw[i : i + vlen], "extFields value")
            i += vlen
    return RemotingCommand(
        code=code,
        language=_language_name(language if language >= 0 else 7),
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext_fields,
        serialize_type=ROCKETMQ,
    )


# ---------------------------------------------------------------------------------------------
# fastjson bodies


class IntKeys(dict):  # type: ignore[type-arg]
    """Marks a Map<Long, ...>: fastjson writes its keys as bare numbers ({1:"a"})."""


def _fj(value: Any, out: list[str]) -> None:
    if isinstance(value, IntKeys):
        out.append("{")
        for i, key in enumerate(sorted(value, key=int)):
            if i:
                out.append(",")
            out.append(str(int(key)) + ":")
            _fj(value[key], out)
        out.append("}")
    elif isinstance(value, Mapping):
        out.append("{")
        first = True
        for key in sorted(value):
            if value[key] is None:
                continue
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(str(key), ensure_ascii=False) + ":")
            _fj(value[key], out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _fj(item, out)
        out.append("]")
    elif value is None:
        out.append("null")
    else:
        out.append(json.dumps(value, ensure_ascii=False))


def fastjson_dumps(value: Any) -> bytes:
    """JSON as fastjson 1.x writes it: keys sorted, null properties omitted, IntKeys maps unquoted."""
    out: list[str] = []
    _fj(value, out)
    return "".join(out).encode("utf-8")


_DIGITS = "0123456789"


def quote_bare_keys(text: str) -> str:
    """Quote the bare numeric object keys fastjson writes for Map<Long, ...> ({1:"a"} -> {"1":"a"})."""
    out: list[str] = []
    stack: list[str] = []
    expect_key = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
            expect_key = False
            continue
        if expect_key and (c in _DIGITS or c == "-"):
            j = i + 1
            while j < n and text[j] in _DIGITS:
                j += 1
            out.append('"' + text[i:j] + '"')
            i = j
            expect_key = False
            continue
        if c == "{":
            stack.append(c)
            expect_key = True
        elif c == "[":
            stack.append(c)
            expect_key = False
        elif c in "}]":
            if stack:
                stack.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(stack) and stack[-1] == "{"
        elif not c.isspace():
            expect_key = False
        out.append(c)
        i += 1
    return "".join(out)


def fastjson_loads(data: bytes | str) -> Any:
    """Read a fastjson body (bare numeric keys accepted). BodyError when it is not JSON."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        return json.loads(quote_bare_keys(text))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise BodyError(f"the body is not JSON: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Properties bodies (MixAll.properties2String / string2Properties)


def properties_dumps(props: Mapping[str, Any]) -> bytes:
    """``key=value\\n`` per entry, sorted by key, no escaping (MixAll.properties2String(p, true))."""
    return "".join(f"{k}={props[k]}\n" for k in sorted(props) if props[k] is not None).encode("utf-8")


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise BodyError("string2Properties error")  # Java: Malformed \\uxxxx encoding
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    out: list[str] = []
    buf: str | None = None
    for raw in lines:
        line = raw.lstrip(" \t\f") if buf is not None else raw
        if buf is None and (not line.strip(" \t\f") or line.lstrip(" \t\f")[:1] in ("#", "!")):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            buf = (buf or "") + line[:-1]
            continue
        out.append((buf or "") + line)
        buf = None
    if buf is not None:
        out.append(buf)
    return out


def properties_loads(data: bytes) -> dict[str, str]:
    """Java ``Properties.load`` for the config bodies: comments (#, !), ``=``/``:``/blank separators,
    line continuations and backslash escapes. BodyError("string2Properties error") when unreadable."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyError("string2Properties error") from None
    props: dict[str, str] = {}
    for line in _logical_lines(text):
        line = line.lstrip(" \t\f")
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t\f":
                break
            i += 1
        key = line[:i]
        j = i
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
        while j < n and line[j] in " \t\f":
            j += 1
        props[_unescape(key)] = _unescape(line[j:])
    return props
