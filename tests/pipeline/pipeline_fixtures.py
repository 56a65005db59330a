"""Helpers of the pipeline tests (a module of its own so imports never clash with other conftest modules):
a fleet of stores built with the writers, a tree hash."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from mqctl.store.build import build_store
from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter, Message, file_name

HERE = Path(__file__).resolve().parent
FILE_SIZE = 4096


def spark_missing() -> str | None:
    for mod in ("pyspark", "numpy", "pyarrow", "pandas"):
        if importlib.util.find_spec(mod) is None:
            return f"{mod} is not installed (pip install 'mqctl[spark]')"
    from mqctl.pipeline.engine import java_executable

    if java_executable() is None:
        return "no java on PATH (Spark needs Java 17+)"
    return None


# --------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    root: Path
    stores: dict[str, Path]
    offsets: dict[str, int] = field(default_factory=dict)  # message label -> physical offset
    messages: dict[str, Message] = field(default_factory=dict)

    def paths(self, *names: str) -> list[str]:
        return [str(self.stores[n]) for n in names]


def msg(
    topic: str,
    body: bytes,
    *,
    key: str | None = None,
    qid: int = 0,
    qoff: int = 0,
    born_ts: int = 0,
    born: tuple[str, int] = ("127.0.0.1", 40000),
    store: tuple[str, int] = ("127.0.0.100", 10911),
    extra: dict[str, str] | None = None,
    version: int | None = None,
) -> Message:
    props = dict(extra or {})
    if key:
        props["UNIQ_KEY"] = key
    return Message(
        topic,
        body,
        props,
        queue_id=qid,
        queue_offset=qoff,
        born_timestamp=born_ts,
        born_host=born,
        store_timestamp=born_ts + 3,
        store_host=store,
        version=version,
    )


def append(fleet: Fleet, store: str, labelled: list[tuple[str, Message]]) -> None:
    with CommitLogWriter(fleet.stores[store] / COMMITLOG_DIR, FILE_SIZE) as w:
        for label, m in labelled:
            off = w.append(m)
            if label in fleet.offsets:
                assert fleet.offsets[label] == off, "a copy on another replica must sit at the same offset"
            fleet.offsets.setdefault(label, off)
            fleet.messages.setdefault(label, m)


def patch(store: Path, offset: int, rel: int, xor: int) -> None:
    """Flip bits of the byte at `rel` inside the record at absolute `offset`."""
    f = store / COMMITLOG_DIR / file_name(offset - offset % FILE_SIZE)
    data = bytearray(f.read_bytes())
    data[offset % FILE_SIZE + rel] ^= xor
    f.write_bytes(bytes(data))


T_LONG = "long-topic-" + "x" * 150  # > 127 bytes: a v2 record
BORN6 = ("2001:db8::7", 40001)


def build_fleet(root: Path) -> Fleet:
    """Broker set a, three replicas sharing epoch 0 up to offset 1000, then diverging:

    * A (id 1) led epoch 1 from 1000: a0..a12, with a5's body damaged (BODYCRC) and a6's PHYSICALOFFSET
      smashed (structural damage mid-file), a7 larger than a range, a file rollover (blank marker);
    * C (id 3), A's slave in epoch 1: a0..a2, byte-identical to A's;
    * B (id 2) leads epoch 2 from 1000 (the source): b0, a producer retry of a0 (same UNIQ_KEY), a copy of
      a3 (no key: same born host, born time and body), b3, then b4 whose body is damaged: B's max offset
      stops there and b4 is B's own tail.
    Broker set b: D (clean) and E, identical: nothing to salvage.
    """
    stores = {n: root / n for n in "ABCDE"}
    fleet = Fleet(root, stores)
    for name, bid, hist in (
        ("A", 1, [(0, 0), (1, 1000)]),
        ("B", 2, [(0, 0), (2, 1000)]),
        ("C", 3, [(0, 0), (1, 1000)]),
    ):
        build_store(
            stores[name], history=hist, max_offset=1000, broker_id=bid, abort=True, file_size=FILE_SIZE
        )
    for name, bid in (("D", 1), ("E", 2)):
        build_store(
            stores[name],
            history=[(0, 0)],
            max_offset=700,
            broker="broker-set-b",
            broker_id=bid,
            clean=name == "D",
            file_size=FILE_SIZE,
        )
    a = [
        ("a0", msg("orders", b"order-0" * 5, key="K-a0", qid=1, qoff=10, born_ts=5000)),
        ("a1", msg("orders", b"order-1" * 5, key="K-a1", qid=2, qoff=11, born_ts=5001)),
        (
            "a2",
            msg(
                "orders",
                b"no key, born over IPv6",
                qid=1,
                qoff=12,
                born_ts=5002,
                born=BORN6,
                store=("fd00::100", 10911),
            ),
        ),
        ("a3", msg("payments", b"pay-3" * 9, qid=0, qoff=0, born_ts=5003, born=("127.0.0.9", 5555))),
        (
            "a4",
            msg(
                T_LONG,
                b"v2 record",
                key="K-a4",
                qid=3,
                qoff=1,
                born_ts=5004,
                extra={"KEYS": "order-4 order-44", "TAGS": "tagA"},
            ),
        ),
        ("a5", msg("orders", b"body damaged later", key="K-a5", qid=1, qoff=13, born_ts=5005)),
        ("a6", msg("orders", b"physical offset smashed", key="K-a6", qid=1, qoff=14, born_ts=5006)),
        ("a7", msg("big", bytes(range(256)) * 6, key="K-a7", qid=0, qoff=0, born_ts=5007)),
    ]
    a += [
        (
            f"a{i}",
            msg(
                "orders",
                f"filler {i} ".encode() * 12,
                key=f"K-a{i}",
                qid=i % 4,
                qoff=20 + i,
                born_ts=5000 + i,
            ),
        )
        for i in range(8, 13)
    ]
    append(fleet, "A", a)
    append(fleet, "C", a[:3])
    b = [
        ("b0", msg("orders", b"new master", key="K-b0", qid=1, qoff=10, born_ts=6000)),
        ("b1", msg("orders", b"order-0 retried", key="K-a0", qid=1, qoff=11, born_ts=6001)),
        ("b2", msg("payments", b"pay-3" * 9, qid=0, qoff=0, born_ts=5003, born=("127.0.0.9", 5555))),
        ("b3", msg("orders", b"more", key="K-b3", qid=2, qoff=12, born_ts=6003)),
        ("b4", msg("orders", b"source tail, damaged", key="K-b4", qid=2, qoff=13, born_ts=6004)),
    ]
    append(fleet, "B", b)
    body_at = 48 + 8 + 8 + 8 + 4 + 8 + 4  # head, born host, store time, store host, ..., body length
    patch(stores["A"], fleet.offsets["a5"], body_at, 0x01)
    patch(stores["A"], fleet.offsets["a6"], 28 + 7, 0x40)
    patch(stores["B"], fleet.offsets["b4"], body_at, 0x01)
    assert fleet.offsets["a8"] // FILE_SIZE < fleet.offsets["a12"] // FILE_SIZE, "A's tail must roll over"
    return fleet
