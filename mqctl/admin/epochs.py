"""Broker epoch caches: read from a store directory (offline) or asked of a broker (GetBrokerEpochCache).

``EpochCache`` is what RocketMQ's GET_BROKER_EPOCH_CACHE (1007) answers: clusterName, brokerName,
brokerId, the epoch entries (epoch, startOffset, endOffset) and maxOffset. As in mqadmin, the last
entry's endOffset is the max offset.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.admin import SCHEMA_VERSION

__all__ = ["EpochCache", "Entry", "cache_from_store", "fetch_epoch_cache", "broker_epoch_doc",
           "cache_doc", "cache_from_answer", "entries_with_ends", "LONG_MAX"]

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class Entry:
    epoch: int
    start_offset: int
    end_offset: int


@dataclass
class EpochCache:
    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int | None = None
    entries: list[Entry] = field(default_factory=list)
    max_offset: int | None = None
    broker_addr: str = ""                       # where it was asked ("" for a store)
    store: str | None = None                    # the store directory it was read from
    source: str | None = None                   # the epoch file actually read (main or .bak)
    problems: list[str] = field(default_factory=list)
    error: str | None = None                    # the broker could not be asked


def entries_with_ends(pairs: list[tuple[int, int]], max_offset: int | None) -> list[Entry]:
    """(epoch, startOffset) pairs -> entries whose endOffset is the next start; the last one's is
    ``max_offset`` (when known and not below its start), else Long.MAX_VALUE."""
    out = []
    for i, (epoch, start) in enumerate(pairs):
        if i + 1 < len(pairs):
            end = pairs[i + 1][1]
        elif max_offset is not None and max_offset >= start:
            end = max_offset
        else:
            end = LONG_MAX
        out.append(Entry(int(epoch), int(start), int(end)))
    return out


def cache_from_store(store_dir: str | os.PathLike[str]) -> EpochCache:
    """Read ``<store>/epochFileCheckpoint`` (``.bak`` fallback, CRC checked), ``brokerIdentity`` and
    the commitlog's max offset (the end of its last valid record). StoreError when the directory is
    missing or the epoch file and its ``.bak`` are both unreadable."""
    from mqctl.errors import StoreError
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog
    from mqctl.store.epochfile import read_epoch_file
    from mqctl.store.identity import read_identity

    root = Path(store_dir)
    if not root.is_dir():
        raise StoreError(f"{root}: no such store directory")
    cache = EpochCache(store=str(root))
    try:
        ident = read_identity(root)
    except StoreError as exc:
        ident = None
        cache.problems.append(str(exc))
    if ident is not None:
        cache.cluster_name, cache.broker_name, cache.broker_id = (ident.cluster_name, ident.broker_name,
                                                                  ident.broker_id)
    read = read_epoch_file(root)
    cache.source = read.source
    cache.problems.extend(read.problems)
    if read.source is None:
        cache.problems.append(f"{root / 'epochFileCheckpoint'}: missing (no .bak either)")
    log_dir = root / COMMITLOG_DIR
    if log_dir.is_dir():
        try:
            scan = CommitLog(log_dir).scan()
            cache.max_offset = scan.max_offset
            cache.problems.extend(scan.problems)
        except StoreError as exc:
            cache.problems.append(str(exc))
    else:
        cache.problems.append(f"{log_dir}: missing, max offset unknown")
    cache.entries = entries_with_ends([(e.epoch, e.start_offset) for e in read.entries], cache.max_offset)
    return cache


def fetch_epoch_cache(address: str, *, timeout: float = 5.0, tls_ca: str | None = None,
                      tls_cert: str | None = None, tls_key: str | None = None) -> EpochCache:
    """Ask the broker service at ``address`` (mqctl.v1.Broker/GetBrokerEpochCache). A transport
    failure or a non-zero code comes back as ``EpochCache.error``; this never raises for them."""
    import grpc

    from mqctl.controller.convert import message_to_dict
    from mqctl.security import channel_credentials
    from mqctl.v1 import broker_pb2, broker_pb2_grpc

    creds = channel_credentials(tls_ca, tls_cert, tls_key) if (tls_ca or tls_cert or tls_key) else None
    channel = grpc.secure_channel(address, creds) if creds is not None else grpc.insecure_channel(address)
    try:
        stub = broker_pb2_grpc.BrokerStub(channel)
        resp = stub.GetBrokerEpochCache(broker_pb2.GetBrokerEpochCacheRequest(), timeout=timeout)
    except grpc.RpcError as err:
        code = err.code()  # type: ignore[attr-defined]
        details = (err.details() or "").strip()  # type: ignore[attr-defined]
        if len(details) > 200:
            details = details[:197] + "..."
        return EpochCache(broker_addr=address,
                          error=f"{address}: {code.name if code else 'UNKNOWN'}: {details}")
    finally:
        channel.close()
    d: dict[str, Any] = message_to_dict(resp)
    if int(d.get("code", 0)) != 0:
        return EpochCache(broker_addr=address,
                          error=f"{address}: code {d.get('code')}: {d.get('remark', '')}")
    return cache_from_answer(d, address)


def cache_from_answer(d: dict[str, Any], address: str) -> EpochCache:
    """An EpochEntryCache answer (snake_case keys, from gRPC or from a 1007 body) -> EpochCache; the
    last entry's endOffset becomes the maxOffset, as mqadmin getBrokerEpoch prints it."""
    max_offset = int(d.get("max_offset", -1))
    bid = int(d.get("broker_id", -1))
    entries = [Entry(int(e.get("epoch", 0)), int(e.get("start_offset", 0)),
                     int(e.get("end_offset", LONG_MAX))) for e in d.get("epoch_list", [])]
    if entries and max_offset >= entries[-1].start_offset:
        last = entries[-1]
        entries[-1] = Entry(last.epoch, last.start_offset, max_offset)
    return EpochCache(cluster_name=str(d.get("cluster_name", "")), broker_name=str(d.get("broker_name", "")),
                      broker_id=bid if bid >= 0 else None, entries=entries,
                      max_offset=max_offset if max_offset >= 0 else None, broker_addr=address)


def cache_doc(cache: EpochCache) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "clusterName": cache.cluster_name or None,
        "brokerName": cache.broker_name or None,
        "brokerId": cache.broker_id,
        "brokerAddr": cache.broker_addr or None,
        "maxOffset": cache.max_offset,
        "epochs": [{"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": e.end_offset}
                   for e in cache.entries],
    }
    if cache.store is not None:
        doc["store"] = cache.store
        doc["source"] = cache.source
    if cache.problems:
        doc["problems"] = list(cache.problems)
    if cache.error is not None:
        doc["error"] = cache.error
    return doc


def broker_epoch_doc(caches: list[EpochCache]) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "brokers": [cache_doc(c) for c in caches]}
