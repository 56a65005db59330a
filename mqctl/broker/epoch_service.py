"""``mqctl.v1.Broker`` over a store directory: GetBrokerEpochCache (RocketMQ request 1007).

Each call reads the store afresh with the mqctl.store readers: ``epochFileCheckpoint`` (``.bak``
fallback, CRC checked), ``brokerIdentity`` and the commitlog's max offset. The last entry's
endOffset is the max offset, as the broker's ``setLastEpochEntryEndOffset`` leaves it. A store
that cannot be read is answered with code 1 SYSTEM_ERROR and the reason; the gRPC status stays OK.

```python
from mqctl.broker.epoch_service import serve_epoch_cache
server = serve_epoch_cache("/data/broker-a/store", "127.0.0.1:0")   # server.mqctl_port
```
"""

from __future__ import annotations

import logging
import os
from typing import Any

import grpc

from mqctl.admin.broker_epochs import cache_from_store
from mqctl.broker.peers import serve_broker_service
from mqctl.errors import Code, MqctlError
from mqctl.v1 import broker_pb2 as pb
from mqctl.v1 import broker_pb2_grpc as pb_grpc

log = logging.getLogger("mqctl.broker")

__all__ = ["BrokerEpochServicer", "serve_epoch_cache"]


class BrokerEpochServicer(pb_grpc.BrokerServicer):
    """Serves the epoch cache of the store at ``store_dir``. ``cluster_name``, ``broker_name`` and
    ``broker_id`` override what ``brokerIdentity`` says (a broker knows its config)."""

    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        *,
        cluster_name: str | None = None,
        broker_name: str | None = None,
        broker_id: int | None = None,
    ) -> None:
        self.store_dir = os.fspath(store_dir)
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.broker_id = broker_id

    def GetBrokerEpochCache(self, request: Any, context: grpc.ServicerContext) -> Any:
        try:
            cache = cache_from_store(self.store_dir)
        except MqctlError as exc:
            return pb.GetBrokerEpochCacheResponse(code=int(Code.SYSTEM_ERROR), remark=str(exc))
        except Exception as exc:  # never fail the RPC itself
            log.exception("GetBrokerEpochCache failed")
            return pb.GetBrokerEpochCacheResponse(
                code=int(Code.SYSTEM_ERROR), remark=f"internal error: {type(exc).__name__}: {exc}"
            )
        cache.cluster_name = self.cluster_name or cache.cluster_name
        cache.broker_name = self.broker_name or cache.broker_name
        cache.broker_id = self.broker_id if self.broker_id is not None else cache.broker_id
        return pb.GetBrokerEpochCacheResponse(**cache.answer())


def serve_epoch_cache(
    store_dir: str | os.PathLike[str], listen: str, *, max_workers: int = 4, **identity: Any
) -> grpc.Server:
    """Start a gRPC server with the Broker service for ``store_dir`` on ``listen`` (port 0 = any;
    the bound port is ``server.mqctl_port``). Stop it with ``server.stop(grace)``."""
    server, port = serve_broker_service(
        BrokerEpochServicer(store_dir, **identity), listen, max_workers, "mqctl-broker"
    )
    server.mqctl_port = port
    return server
