#!/usr/bin/env python3
"""Generate a large RocketMQ-shaped store for bench/bench_store.py (not a test).

    .venv/bin/python tests/gen_large_store.py OUT [--size 4G] [--file-size 256M] [--record-size 1024]

Writes OUT/brokerIdentity, OUT/epochFileCheckpoint (a new epoch every --epoch-every bytes), OUT/checkpoint
and OUT/commitlog/<20-digit files> with records rolled over by the blank marker like RocketMQ. Files are
preallocated sparse to the file size; the body of each record carries its queue offset so CRCs differ.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
import zlib
from pathlib import Path

from mqctl.store.checkpoint import StoreCheckpoint, write_checkpoint
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter, Message, encode_record
from mqctl.store.epochfile import EpochEntry, write_epoch_file
from mqctl.store.identity import BrokerIdentity, write_identity

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    unit = t[-1] if t and t[-1] in _UNITS else ""
    return int(float(t[: len(t) - len(unit)]) * _UNITS[unit])


def generate(
    out: Path,
    size: int,
    file_size: int,
    record_size: int,
    epoch_every: int,
    base_time: int = 1_700_000_000_000,
    quiet: bool = False,
) -> dict[str, int]:
    out.mkdir(parents=True, exist_ok=True)
    write_identity(out, BrokerIdentity("bench-cluster", "bench-broker", 1))
    template = encode_record(Message("BenchTopic", b"\0" * 0), 0)
    body_len = max(8, record_size - len(template))
    proto = bytearray(
        encode_record(
            Message(
                "BenchTopic",
                bytes(body_len),
                {"KEYS": "k"},
                born_timestamp=base_time,
                store_timestamp=base_time,
            ),
            0,
        )
    )
    n = len(proto)
    body_pos = n - (2 + len(b"KEYS\x01k\x02")) - (1 + len("BenchTopic")) - body_len
    epochs = [EpochEntry(1, 0)]
    count = 0
    t0 = time.monotonic()
    with CommitLogWriter(out / COMMITLOG_DIR, file_size, buffer_bytes=16 << 20) as w:
        while w.offset + n <= size:
            if w.offset >= epochs[-1].start_offset + epoch_every:
                epochs.append(EpochEntry(epochs[-1].epoch + 1, w.offset))

            def enc(off: int, q: int = count) -> bytes:
                struct.pack_into(">q", proto, body_pos, q)
                struct.pack_into(
                    ">i", proto, 8, zlib.crc32(memoryview(proto)[body_pos : body_pos + body_len]) & 0x7FFFFFFF
                )
                struct.pack_into(">q", proto, 20, q)
                struct.pack_into(">q", proto, 28, off)
                return bytes(proto)

            w.append_encoded(enc, n)
            count += 1
            if not quiet and count % 500_000 == 0:
                print(f"  {w.offset / (1 << 30):.2f} GiB, {count} records", file=sys.stderr)
        max_offset = w.offset
    write_epoch_file(out, epochs)
    write_checkpoint(out, StoreCheckpoint(base_time, base_time, base_time, 0, max_offset))
    return {
        "records": count,
        "maxOffset": max_offset,
        "files": max_offset // file_size + 1,
        "epochs": len(epochs),
        "seconds": int(time.monotonic() - t0),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--size", default="4G", help="commitlog bytes to write (default 4G)")
    ap.add_argument(
        "--file-size", default="256M", help="commitlog file size (default 256M; RocketMQ's is 1G)"
    )
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--epoch-every", default="1G", help="start a new epoch every this many bytes")
    a = ap.parse_args(argv)
    res = generate(
        a.out, parse_size(a.size), parse_size(a.file_size), a.record_size, parse_size(a.epoch_every)
    )
    print(res)


if __name__ == "__main__":
    main()
