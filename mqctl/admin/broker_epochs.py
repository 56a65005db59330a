"""Broker epoch caches (mqctl.store.epochfile.EpochCacheView): read from a store directory (offline)
or asked of a broker (GetBrokerEpochCache), and the getBrokerEpoch document. As in mqadmin, the last
entry's endOffset is the max offset.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mqctl.admin import SCHEMA_VERSION
from mqctl.errors import StoreError
from mqctl.store.epochfile import EpochCacheView, read_epoch_file

__all__ = ["broker_epoch_doc", "cache_doc", "cache_from_store", "fetch_epoch_cache"]


def cache_from_store(store_dir: str | os.PathLike[str]) -> EpochCacheView:
    """Read ``<store>/epochFileCheckpoint`` (``.bak`` fallback, CRC checked), ``brokerIdentity`` and
    the commitlog's max offset (the end of its last valid record). StoreError when the directory is
    missing or the epoch file and its ``.bak`` are both unreadable."""
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog  # lazy: start-up
    from mqctl.store.identity import read_identity  # lazy: start-up

    root = Path(store_dir)
    if not root.is_dir():
        raise StoreError(f"{root}: no such store directory")
    cache = EpochCacheView(store=str(root))
    try:
        ident = read_identity(root)
    except StoreError as exc:
        ident = None
        cache.problems.append(str(exc))
    if ident is not None:
        cache.cluster_name, cache.broker_name, cache.broker_id = (
            ident.cluster_name,
            ident.broker_name,
            ident.broker_id,
        )
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
    cache.entries = list(read.entries)
    return cache


def fetch_epoch_cache(
    address: str,
    *,
    timeout: float = 5.0,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> EpochCacheView:
    """Ask the broker service at ``address`` (mqctl.v1.Broker/GetBrokerEpochCache). A transport
    failure or a non-zero code comes back as ``EpochCacheView.error``; this never raises for them."""
    import grpc  # lazy: grpc

    from mqctl.grpc.convert import message_to_dict  # lazy: protobuf
    from mqctl.grpc.security import channel_credentials  # lazy: start-up
    from mqctl.v1 import broker_pb2, broker_pb2_grpc  # lazy: protobuf

    creds = channel_credentials(tls_ca, tls_cert, tls_key) if (tls_ca or tls_cert or tls_key) else None
    channel = grpc.secure_channel(address, creds) if creds is not None else grpc.insecure_channel(address)
    try:
        stub = broker_pb2_grpc.BrokerStub(channel)
        resp = stub.GetBrokerEpochCache(broker_pb2.GetBrokerEpochCacheRequest(), timeout=timeout)
    except grpc.RpcError as err:
        code = err.code()
        details = (err.details() or "").strip()
        if len(details) > 200:
            details = details[:197] + "..."
        return EpochCacheView(
            broker_addr=address, error=f"{address}: {code.name if code else 'UNKNOWN'}: {details}"
        )
    finally:
        channel.close()
    d: dict[str, Any] = message_to_dict(resp)
    return EpochCacheView.from_answer(d, address)


def cache_doc(cache: EpochCacheView) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "clusterName": cache.cluster_name or None,
        "brokerName": cache.broker_name or None,
        "brokerId": cache.broker_id,
        "brokerAddr": cache.broker_addr or None,
        "maxOffset": cache.max_offset,
        "epochs": [
            {"epoch": e.epoch, "startOffset": e.start_offset, "endOffset": end}
            for e, end in zip(cache.entries, cache.ends(), strict=True)
        ],
    }
    if cache.store is not None:
        doc["store"] = cache.store
        doc["source"] = cache.source
    if cache.problems:
        doc["problems"] = list(cache.problems)
    if cache.error is not None:
        doc["error"] = cache.error
    return doc


def broker_epoch_doc(caches: list[EpochCacheView]) -> dict[str, Any]:
    return {"version": SCHEMA_VERSION, "brokers": [cache_doc(c) for c in caches]}
