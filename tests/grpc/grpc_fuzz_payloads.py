"""Hostile request payloads for every method of the gRPC door (tests/grpc/test_grpc_fuzz.py,
bench/bench_grpc_fuzz.py), and raw HTTP/2 frames for the garbage that is not even gRPC.

Seeded (``random.Random``) so that a failing run can be repeated. Pure protobuf: each payload is
classified by decoding it here with the request class, so that a test sends the methods that
change state only payloads that cannot be decoded (GetMetadata's state hash must not move).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from grpc_health.v1 import health_pb2

from mqctl import methods

HEALTH = "grpc.health.v1.Health"


@dataclass(frozen=True)
class Target:
    """One RPC of the port: its path, request class, whether it streams, and whether a decodable
    request may be sent (it changes no replicated state and needs no token)."""

    path: str
    request: Any
    streaming: bool
    reads_only: bool


def targets() -> list[Target]:
    out = []
    for row in methods.METHODS:
        request_cls, _ = row.types()
        reads_only = row.kind in (methods.Kind.FRESH_READ, methods.Kind.LOCAL_READ) or row.name in (
            "GetMetadata",
            "WatchRoleChanges",
        )
        out.append(Target(row.grpc_path, request_cls, row.streaming, reads_only))
    out += [
        Target(f"/{HEALTH}/Check", health_pb2.HealthCheckRequest, False, True),
        Target(f"/{HEALTH}/List", health_pb2.HealthListRequest, False, True),
        Target(f"/{HEALTH}/Watch", health_pb2.HealthCheckRequest, True, True),
    ]
    return out


def decodes(request_cls: Any, payload: bytes) -> bool:
    try:
        request_cls.FromString(payload)
    except Exception:
        return False
    return True


# -- protobuf wire format -----------------------------------------------------------------------


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefgh-_.:0123456789é😀") for _ in range(rng.randint(0, 12)))


def random_message(request_cls: Any, rng: random.Random) -> Any:
    """A valid message of ``request_cls`` with random field values (names never "broker-a")."""
    msg = request_cls()
    for field in msg.DESCRIPTOR.fields:
        if rng.random() < 0.4:
            continue
        name = field.name
        ct = field.cpp_type
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for _ in range(rng.randint(0, 3)):
                getattr(msg, name)[_random_text(rng)] = _random_text(rng)
        elif field.is_repeated and ct == FieldDescriptor.CPPTYPE_MESSAGE:  # HeartbeatStream's beats
            for _ in range(rng.randint(0, 3)):
                item = getattr(msg, name).add()
                item.CopyFrom(random_message(type(item), rng))
        elif field.is_repeated and ct == FieldDescriptor.CPPTYPE_STRING:
            getattr(msg, name).extend("fuzz-" + _random_text(rng) for _ in range(rng.randint(0, 4)))
        elif field.is_repeated:
            getattr(msg, name).extend(rng.randint(-5, 2**40) for _ in range(rng.randint(0, 4)))
        elif ct == FieldDescriptor.CPPTYPE_STRING:
            setattr(msg, name, "fuzz-" + _random_text(rng))
        elif ct == FieldDescriptor.CPPTYPE_BOOL:
            setattr(msg, name, rng.random() < 0.5)
        elif ct in (FieldDescriptor.CPPTYPE_INT32, FieldDescriptor.CPPTYPE_INT64):
            bits = 31 if ct == FieldDescriptor.CPPTYPE_INT32 else 63
            setattr(msg, name, rng.randint(-(2**bits), 2**bits - 1))
        elif ct == FieldDescriptor.CPPTYPE_ENUM:
            setattr(msg, name, rng.choice([v.number for v in field.enum_type.values]))
    return msg


def _field_numbers(request_cls: Any) -> list[int]:
    return [f.number for f in request_cls.DESCRIPTOR.fields] or [1, 2]


# Each kind returns bytes meant to be hostile; whether they decode is decided by ``decodes``.


def truncated(request_cls: Any, rng: random.Random) -> bytes:
    data = random_message(request_cls, rng).SerializeToString() + tag(1, 2) + varint(20) + b"x" * 20
    return data[: rng.randint(1, len(data) - 1)]


def bit_flipped(request_cls: Any, rng: random.Random) -> bytes:
    data = bytearray(random_message(request_cls, rng).SerializeToString() or b"\x08\x01")
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def wrong_wire_type(request_cls: Any, rng: random.Random) -> bytes:
    number = rng.choice(_field_numbers(request_cls))
    kind = rng.randrange(5)
    if kind == 0:  # wire types 6 and 7 do not exist
        return tag(number, rng.choice([6, 7])) + b"\x01\x02\x03"
    if kind == 1:  # an end-group tag that closes nothing
        return tag(number, 4)
    if kind == 2:  # a start-group never closed
        return tag(number, 3) + tag(number, 0) + b"\x01"
    if kind == 3:  # a length-delimited field longer than the message
        return tag(number, 2) + varint(rng.randint(10, 2**31)) + b"abc"
    return tag(0, rng.randrange(6)) + b"\x00"  # field number 0 is invalid


def varint_overflow(request_cls: Any, rng: random.Random) -> bytes:
    number = rng.choice(_field_numbers(request_cls))
    return tag(number, 0) + b"\xff" * rng.randint(10, 40) + b"\x01"


def deep_nesting(request_cls: Any, rng: random.Random) -> bytes:
    """Unknown groups nested deeper than protobuf's recursion limit (100), closed or not."""
    depth = rng.choice([101, 150, 1000, 20_000])
    number = 1000 + rng.randrange(100)
    closed = rng.random() < 0.5
    return tag(number, 3) * depth + (tag(number, 4) * depth if closed else b"")


def invalid_utf8(request_cls: Any, rng: random.Random) -> bytes:
    strings = [f.number for f in request_cls.DESCRIPTOR.fields if f.type == FieldDescriptor.TYPE_STRING]
    number = rng.choice(strings or [1])
    return tag(number, 2) + varint(3) + b"\xff\xfe\xc0"


def random_bytes(request_cls: Any, rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 200))


KINDS = {
    "truncated": truncated,
    "bit-flipped": bit_flipped,
    "wrong wire type": wrong_wire_type,
    "varint overflow": varint_overflow,
    "deep nesting": deep_nesting,
    "invalid utf-8": invalid_utf8,
    "random": random_bytes,
}

# Undecodable by every request class (the RSS measurement sends only these).
ALWAYS_UNDECODABLE = [
    b"\x08" + b"\xff" * 10 + b"\x01",  # varint overflow
    b"\x0f\x01",  # wire type 7
    b"\x00",  # field number 0
    b"\x0b" * 200,  # groups nested past the limit
    b"\x0a\x10ab",  # a length past the end
]


def undecodable(target: Target, rng: random.Random, tries: int = 50) -> tuple[str, bytes]:
    """(kind, payload) that ``target.request`` cannot decode."""
    for _ in range(tries):
        kind = rng.choice(list(KINDS))
        payload = KINDS[kind](target.request, rng)
        if not decodes(target.request, payload):
            return kind, payload
    return "varint overflow", rng.choice(ALWAYS_UNDECODABLE)


def fuzz_cases(rng: random.Random, oversized: int) -> Iterator[tuple[Target, str, bytes]]:
    """Endless (target, kind, payload): every target in turn; decodable payloads only for the
    targets that read; ``oversized`` (bytes) payloads now and then."""
    all_targets = targets()
    while True:
        for target in all_targets:
            if rng.random() < 0.002:
                yield target, "oversized", b"\x0a" + varint(oversized) + b"o" * oversized
                continue
            kind = rng.choice(list(KINDS))
            payload = KINDS[kind](target.request, rng)
            if decodes(target.request, payload) and not target.reads_only:
                kind, payload = undecodable(target, rng)
            yield target, kind, payload


# -- raw HTTP/2 ---------------------------------------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = (
    range(10)
)
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8


def frame(ftype: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def _literal(name: bytes, value: bytes) -> bytes:
    """HPACK literal header field without indexing, new name, no Huffman (lengths < 127)."""
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def grpc_headers(path: str, authority: str = "localhost") -> bytes:
    fields = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path.encode()),
        (b":authority", authority.encode()),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ]
    return b"".join(_literal(k, v) for k, v in fields)


def grpc_message(payload: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", len(payload)) + payload


def request_frames(path: str, payload: bytes, stream: int = 1) -> bytes:
    """A whole unary gRPC request as HTTP/2 frames (after the preface and SETTINGS)."""
    return frame(HEADERS, END_HEADERS, stream, grpc_headers(path)) + frame(
        DATA, END_STREAM, stream, grpc_message(payload)
    )


def http2_garbage(rng: random.Random) -> bytes:
    """Bytes for a fresh TCP connection to the gRPC port: random, a broken preface, or the preface
    followed by frames that break HTTP/2 or gRPC framing in one way or another."""
    kind = rng.randrange(12)
    path = rng.choice(targets()).path
    if kind == 0:
        return rng.randbytes(rng.randint(1, 512))
    if kind == 1:
        cut = PREFACE[: rng.randint(1, len(PREFACE) - 1)]
        return cut + rng.randbytes(rng.randint(0, 64))
    if kind == 2:  # an HTTP/1.1 request
        return b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
    start = PREFACE + frame(SETTINGS, 0, 0)
    if kind == 3:  # random frames
        out = start
        for _ in range(rng.randint(1, 8)):
            payload = rng.randbytes(rng.randint(0, 40))
            out += frame(rng.randrange(12), rng.randrange(256), rng.randrange(8), payload)
        return out
    if kind == 4:  # HPACK garbage in HEADERS
        return start + frame(HEADERS, END_HEADERS | END_STREAM, 1, rng.randbytes(rng.randint(1, 64)))
    if kind == 5:  # a frame length beyond the peer's max frame size, or a lying length
        length = struct.pack(">I", rng.choice([2**24 - 1, 70_000, 5]))[1:]
        return start + length + bytes([DATA, 0]) + b"\x00\x00\x00\x01"
    if kind == 6:  # a gRPC message whose length prefix lies
        body = b"\x00" + struct.pack(">I", rng.choice([0xFFFFFFFF, 2**20 + 1, 50])) + b"abc"
        return start + frame(HEADERS, END_HEADERS, 1, grpc_headers(path)) + frame(DATA, END_STREAM, 1, body)
    if kind == 7:  # a compressed flag without a compression algorithm, and an unknown flag
        body = bytes([rng.choice([1, 2, 0xFF])]) + struct.pack(">I", 2) + b"\x08\x01"
        return start + frame(HEADERS, END_HEADERS, 1, grpc_headers(path)) + frame(DATA, END_STREAM, 1, body)
    if kind == 8:  # settings with bad values, window update of 0, ping without 8 bytes
        bad_settings = b"".join(struct.pack(">HI", k, v) for k, v in ((0x2, 7), (0x4, 2**31), (0x5, 1)))
        return (
            start
            + frame(SETTINGS, 0, 0, bad_settings)
            + frame(WINDOW_UPDATE, 0, 0, b"\x00" * 4)
            + frame(PING, 0, 0, b"\x01")
        )
    if kind == 9:  # streams with even ids, reused ids, data on a closed stream
        return (
            start
            + frame(HEADERS, END_HEADERS, 2, grpc_headers(path))
            + request_frames(path, b"", 1)
            + frame(DATA, END_STREAM, 1, grpc_message(b""))
        )
    if kind == 10:  # CONTINUATION without HEADERS, HEADERS without END_HEADERS followed by DATA
        return (
            start
            + frame(CONTINUATION, END_HEADERS, 1, b"\x82")
            + frame(HEADERS, 0, 3, grpc_headers(path))
            + frame(DATA, 0, 3, b"x")
        )
    # a valid request whose bytes are then flipped
    data = bytearray(start + request_frames(path, rng.randbytes(rng.randint(0, 30))))
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(PREFACE), len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)
