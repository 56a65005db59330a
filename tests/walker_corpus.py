"""The two record walkers side by side (issue 32): a ParsedRange as plain values, every walker entry point
run with each walker, and commitlog buffers with the damage the recovery tests plant (truncated, flipped
bits, garbage, oversized length fields, records crossing the file's end, gaps, the blank marker). Used by
tests/store/test_walker_differential.py and the fuzz harness (tests/fuzz/fuzz_walker.py), which seeds
libFuzzer with these buffers."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mqctl.store import walker
from mqctl.store.commitlog import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, Message, encode_record

COLUMNS = (
    "position",
    "size",
    "version",
    "body_crc",
    "crc_ok",
    "queue_id",
    "flag",
    "queue_offset",
    "physical_offset",
    "sysflag",
    "born_timestamp",
    "store_timestamp",
    "reconsume_times",
    "prepared_tx_offset",
    "body_length",
    "topic_codes",
)


def answer(pr: walker.ParsedRange) -> dict[str, Any]:
    """Everything a walk says, as plain values (the columns' dtypes too)."""
    d: dict[str, Any] = {c: (getattr(pr, c).dtype.char, getattr(pr, c).tolist()) for c in COLUMNS}
    d.update(
        file_start=pr.file_start,
        walk_end=pr.walk_end,
        topic_names=pr.topic_names,
        problems=[(p.offset, p.position, p.length, p.kind, p.reason) for p in pr.problems],
        host_names=pr.host_names,
    )
    for b in ("body_blob", "properties_blob"):
        blob = getattr(pr, b)
        d[b] = None if blob is None else (blob.offsets.tolist(), blob.data)
    for h in ("born_host_codes", "store_host_codes"):
        codes = getattr(pr, h)
        d[h] = None if codes is None else codes.tolist()
    return d


@contextmanager
def using(name: str) -> Iterator[None]:
    """Walk with walker `name` ("c" or "numpy") inside the block."""
    before = walker.IMPL
    walker.select(name)
    try:
        yield
    finally:
        walker.select(before)


def both(fn: Callable[[], Any]) -> tuple[Any, Any]:
    """fn's result (or the exception it raised, as its type and text) with the compiled walker, then with
    the numpy walker."""
    out = []
    for name in ("c", "numpy"):
        with using(name):
            try:
                out.append(fn())
            except Exception as exc:  # the same error from both is the same answer
                out.append(("raised", type(exc).__name__, str(exc)))
    return out[0], out[1]


# --------------------------------------------------------------------------- buffers


def records(base: int, rng: random.Random, count: int) -> tuple[bytearray, list[int]]:
    """`count` records from `base` of every layout: v1 and v2, IPv4 and IPv6 hosts, empty and long
    bodies, topics and properties; MAGICCODEs and whole record heads inside some bodies."""
    out = bytearray()
    at = []
    for i in range(count):
        kind = rng.randrange(6)
        body = rng.randbytes(rng.choice([0, 1, 13, 64, 100, 257, 1000]))
        if kind == 4:  # magic bytes and a plausible head inside the body
            body = body[:8] + struct.pack(">iI", 120, rng.choice([MAGIC_V1, MAGIC_V2])) + body[8:]
        topic = rng.choice(["T", "TopicA", "t" * 127, "x" * 200, "", "é-topic", "TopicB", "y" * 300])
        msg = Message(
            topic,
            body,
            properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i}"} if i % 3 else b"",
            queue_id=rng.randrange(8),
            flag=rng.randrange(-5, 5),
            queue_offset=i,
            sysflag=rng.choice([0, 4, 8]),
            born_timestamp=1700000000000 + i,
            born_host=rng.choice([("127.0.0.1", 5000 + i), ("::1", 7), ("127.0.0.1", 0)]),
            store_timestamp=1700000000100 + i,
            store_host=rng.choice([("127.0.0.1", 10911), ("fd00::100", 10911)]),
            reconsume_times=rng.randrange(3),
            prepared_tx_offset=rng.randrange(-1, 2),
            version=2 if kind == 5 and len(topic.encode()) <= 127 else None,
        )
        at.append(len(out))
        out += encode_record(msg, base + len(out))
    return out, at


def corpus(seed: int = 0) -> list[tuple[str, int, bytes]]:
    """(name, base offset, buffer): a whole file of good records, then the same with each kind of damage
    the recovery tests plant."""
    rng = random.Random(seed)
    base = 4096 * rng.randrange(1, 64)
    good, at = records(base, rng, 24)
    out: list[tuple[str, int, bytes]] = [
        ("good", base, bytes(good)),
        ("good+zero tail", base, bytes(good) + bytes(700)),
    ]
    end = len(good)
    out.append(("blank marker", base, bytes(good) + struct.pack(">iI", 4096, BLANK_MAGIC) + bytes(500)))
    tail, _ = records(base + end + 300, rng, 3)
    out.append(("zero gap then records", base, bytes(good) + bytes(300) + bytes(tail)))
    out.append(
        (
            "blank marker then records",
            base,
            bytes(good) + struct.pack(">iI", 300, BLANK_MAGIC) + bytes(292) + bytes(tail),
        )
    )
    for cut in (1, 7, 35, 36, 90, 200):  # a record crossing the buffer's end (torn)
        r = at[len(at) // 2]
        out.append((f"torn at +{cut}", base, bytes(good[: r + cut])))
    out.append(("truncated mid-file", base, bytes(good[: end * 2 // 3])))
    for name, rel, fmt, value in (
        ("TOTALSIZE huge", 0, ">i", 1 << 30),
        ("TOTALSIZE over the limit", 0, ">i", (1 << 30) + 1),
        ("TOTALSIZE negative", 0, ">i", -5),
        ("TOTALSIZE small", 0, ">i", 90),
        ("TOTALSIZE past the end", 0, ">i", 1 << 20),
        ("body length huge", 84, ">i", 1 << 29),
        ("body length negative", 84, ">i", -1),
        ("PHYSICALOFFSET wrong", 28, ">q", 999),
        ("BODYCRC wrong", 8, ">i", 12345),
        ("sysflag v6 bits", 36, ">i", 0x30),
        ("magic wrong", 4, ">I", 0xDAA320A8),
        ("blank magic mid-log", 4, ">I", BLANK_MAGIC),
    ):
        for k in (0, len(at) // 2, len(at) - 1):
            b = bytearray(good)
            struct.pack_into(fmt, b, at[k] + rel, value)
            out.append((f"{name} #{k}", base, bytes(b)))
    for k in range(6):  # topic and properties lengths past the record
        b = bytearray(good)
        r = at[rng.randrange(len(at))]
        size = struct.unpack_from(">i", b, r)[0]
        b[r + size - rng.randrange(1, 40)] ^= 0xFF
        out.append((f"length field flipped {k}", base, bytes(b)))
    for k in range(12):  # flipped bits anywhere
        b = bytearray(good)
        for _ in range(1 + k % 4):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        out.append((f"flipped bits {k}", base, bytes(b)))
    for k in range(4):  # garbage over a stretch
        b = bytearray(good)
        s = rng.randrange(len(b) - 200)
        b[s : s + rng.randrange(1, 200)] = rng.randbytes(len(b[s : s + 200]))[: len(b[s : s + 200])]
        out.append((f"garbage {k}", base, bytes(b[: len(good)])))
    out.append(("garbage only", base, rng.randbytes(3000)))
    out.append(("zeros only", base, bytes(2000)))
    out.append(("empty", base, b""))
    out.append(("tiny", base, b"\x00\x00\x00\x5b\xda\xa3\x20"))
    return out
