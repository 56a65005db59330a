"""The controller API both clients share: result types and the typed methods (docs/grpc-api.md).

``ControllerApi`` builds each request as a dict with the proto field names and turns the SUCCESS
answer into a frozen result dataclass; the transports (``mqctl.client.ControllerClient`` over
gRPC, ``mqctl.remoting.client.RemotingControllerClient`` over RocketMQ remoting) only implement
``_call`` (send, retry, raise ControllerError on a non-SUCCESS answer) and ``get_metadata``, so the
two cannot drift apart. No gRPC import here: the remoting client and the CLI import this cheaply.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from mqctl import methods
from mqctl.address import parse_address
from mqctl.controller.core import (
    Ack,
    AlterSyncStateSetResult,
    ApplyBrokerIdResult,
    BrokerMemberGroup,
    ConfigResult,
    ElectMasterResult,
    HistoryPage,
    NextBrokerIdResult,
    PauseResult,
    RebalanceResult,
    RegisterBrokerResult,
    ReplicaIdentity,
    ReplicaInfoResult,
    ReplicasInfo,
    RoleChange,
    SwitchoverResult,
    SyncStateDataResult,
    UpdateConfigResult,
)
from mqctl.controller.core.responses import pick
from mqctl.controller.quorum import ChangeQuorumResult
from mqctl.errors import Code, ControllerError, UsageError

__all__ = [
    "Ack",
    "AlterSyncStateSetResult",
    "ApplyBrokerIdResult",
    "BrokerMemberGroup",
    "ChangeQuorumResult",
    "ConfigResult",
    "ControllerApi",
    "ElectMasterResult",
    "HistoryPage",
    "Metadata",
    "NextBrokerIdResult",
    "PauseResult",
    "Peer",
    "RebalanceResult",
    "RegisterBrokerResult",
    "ReplicaIdentity",
    "ReplicaInfoResult",
    "ReplicasInfo",
    "RoleChange",
    "SwitchoverResult",
    "SyncStateDataResult",
    "UpdateConfigResult",
    "parse_addresses",
]

# ---------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class Peer:
    raft_address: str = ""
    grpc_address: str = ""
    is_leader: bool = False
    is_self: bool = False
    connected: bool = False
    match_index: int = 0
    next_index: int = 0
    max_feature_level: int = 0  # 0: the node did not say (an older server)


@dataclass(frozen=True)
class Metadata:
    """GetMetadata: the answering node's view of the controller group."""

    group: str = ""
    group_id: str = ""
    controller_leader_id: str = ""
    controller_leader_address: str = ""
    is_leader: bool = False
    self_id: str = ""
    peers: tuple[Peer, ...] = ()
    term: int = 0
    commit_index: int = 0
    last_applied: int = 0
    has_quorum: bool = False
    state_hash: str = ""
    state: str = ""
    log_length: int = 0
    feature_level: int = 0  # the group's; 0 from a server that does not report it
    max_feature_level: int = 0  # the answering node's newest
    record_versions: Mapping[str, int] = field(default_factory=dict)
    problem: str = ""  # why the node stopped or takes no writes
    leader_address: str = ""
    remark: str = ""
    address: str = ""  # the address that answered

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], address: str = "") -> Metadata:
        return pick(cls, d, peers=tuple(pick(Peer, p) for p in d.get("peers", ())), address=address)


# ---------------------------------------------------------------------------------------------
# The API


def parse_addresses(addresses: str | Iterable[str]) -> list[str]:
    """``"a:1;b:2"``, ``"a:1,b:2"`` or a list -> ``["a:1", "b:2"]`` (order kept, duplicates dropped)."""
    items = addresses.replace(";", ",").split(",") if isinstance(addresses, str) else list(addresses)
    out: list[str] = []
    for item in items:
        for part in str(item).replace(";", ",").split(","):
            addr = part.strip()
            if not addr:
                continue
            parse_address(addr, "controller address")
            if addr not in out:
                out.append(addr)
    if not out:
        raise UsageError("no controller address given")
    return out


# Calls retried on any transient failure (reads, and the in-memory heartbeat); the other calls are
# writes, retried only when they surely were not executed. From the method table.
BACKOFF_INITIAL = 0.05
BACKOFF_MAX = 1.0


class ControllerApi(ABC):
    """The typed controller methods, once for every transport.

    Methods take positional parameters in the order of RocketMQ's request header fields and mqctl
    extensions as keyword arguments; a subclass supplies ``_call`` and ``get_metadata``.
    """

    addresses: list[str]
    timeout: float
    _leader: str | None
    carries_broker_options = True  # RegisterBroker's ``options`` (a gRPC-only extension)
    # the command's deadline (time.monotonic()): no call of this client goes beyond it, so that
    # --timeout bounds the whole command, not each of its calls; None: each call gets ``timeout``
    deadline: float | None = None

    def _open(
        self, addresses: str | Iterable[str], timeout: float, tls: bool | None, *pem: str | None
    ) -> bool:
        """What a transport's constructor checks first, the same on both: the addresses, then the
        timeout. True when TLS is on (``tls``, or by default when a PEM file is given)."""
        self.addresses = parse_addresses(addresses)
        if timeout <= 0:
            raise UsageError(f"timeout must be positive, got {timeout}")
        self.timeout = float(timeout)
        self._leader = None
        return tls if tls is not None else any(x is not None for x in pem)

    def call_deadline(self) -> float:
        """When the call starting now must be done: ``timeout`` from now, at most ``deadline``."""

        mine = time.monotonic() + self.timeout
        return mine if self.deadline is None else min(mine, self.deadline)

    @abstractmethod
    def _call(self, method: str, request: Mapping[str, Any], *, address: str | None = None) -> dict[str, Any]:
        """Send ``method`` (to ``address``, or to the leader when None) with the transport's retries;
        return the SUCCESS answer as a dict with proto field names, or raise ControllerError."""

    @abstractmethod
    def close(self) -> None:
        """Close the connections."""

    @abstractmethod
    def get_metadata(self, address: str | None = None) -> Metadata:
        """GetMetadata from ``address`` (any node), or from the leader when None (any node if none)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def leader(self) -> str | None:
        """The leader's address as last learned (None before the first call or after a failure)."""
        return self._leader

    def call(self, method: str, request: Mapping[str, Any], *, address: str | None = None) -> Any:
        """Any unary method of the table (``methods.register``'s too), answered as its row's
        ``result`` types it; the typed methods below are this with named parameters."""
        return methods.spec(method).typed_answer(self._call(method, request, address=address))

    def get_next_broker_id(self, cluster_name: str, broker_name: str) -> NextBrokerIdResult:
        d = self._call("GetNextBrokerId", {"cluster_name": cluster_name, "broker_name": broker_name})
        return NextBrokerIdResult.from_dict(d)

    def apply_broker_id(
        self, cluster_name: str, broker_name: str, applied_broker_id: int, register_check_code: str
    ) -> ApplyBrokerIdResult:
        d = self._call(
            "ApplyBrokerId",
            {
                "cluster_name": cluster_name,
                "broker_name": broker_name,
                "applied_broker_id": applied_broker_id,
                "register_check_code": register_check_code,
            },
        )
        return ApplyBrokerIdResult.from_dict(d)

    def register_broker(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int,
        broker_address: str,
        *,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        election_priority: int | None = None,
        options: Mapping[str, str] | None = None,
        heartbeat_timeout_mills: int | None = None,
    ) -> RegisterBrokerResult:
        """RegisterBroker (remoting: CONTROLLER_REGISTER_BROKER, 1003). ``options`` (values sent as
        text) are a gRPC-only extension: the remoting client refuses them."""
        if options and not self.carries_broker_options:
            raise UsageError("broker options are a gRPC-only extension; register over gRPC to check them")
        d = self._call(
            "RegisterBroker",
            {
                "cluster_name": cluster_name,
                "broker_name": broker_name,
                "broker_id": broker_id,
                "broker_address": broker_address,
                "epoch": epoch,
                "max_offset": max_offset,
                "confirm_offset": confirm_offset,
                "election_priority": election_priority,
                "options": {str(k): str(v) for k, v in (options or {}).items()},
                "heartbeat_timeout_mills": heartbeat_timeout_mills,
            },
        )
        return RegisterBrokerResult.from_dict(d)

    def heartbeat(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int | None,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        heartbeat_timeout_mills: int | None = None,
        election_priority: int | None = None,
        *,
        broker_epoch: int | None = None,
        oneway: bool = False,
    ) -> Ack:
        """Heartbeat (remoting: BROKER_HEARTBEAT, 904). ``oneway=True`` sends it without waiting for
        an answer, as brokers do over remoting (the remoting client only)."""
        request = {
            "cluster_name": cluster_name,
            "broker_addr": broker_addr,
            "broker_name": broker_name,
            "broker_id": broker_id,
            "epoch": epoch,
            "max_offset": max_offset,
            "confirm_offset": confirm_offset,
            "heartbeat_timeout_mills": heartbeat_timeout_mills,
            "election_priority": election_priority,
            "broker_epoch": broker_epoch,
        }
        if oneway:
            self._send_oneway("Heartbeat", request)
            return Ack()
        return Ack.from_dict(self._beat(request))

    def _beat(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """One heartbeat as a call; a transport with a cheaper way (gRPC's stream) overrides it."""
        return self._call("Heartbeat", request)

    def _send_oneway(self, method: str, request: Mapping[str, Any]) -> None:
        raise UsageError(f"{method}: one-way requests are RocketMQ remoting's; use the remoting client")

    def alter_sync_state_set(
        self,
        broker_name: str,
        master_broker_id: int,
        master_epoch: int,
        new_sync_state_set: Iterable[int],
        sync_state_set_epoch: int,
        *,
        broker_epoch: int | None = None,
        cluster_name: str = "",
    ) -> AlterSyncStateSetResult:
        d = self._call(
            "AlterSyncStateSet",
            {
                "broker_name": broker_name,
                "master_broker_id": master_broker_id,
                "master_epoch": master_epoch,
                "new_sync_state_set": [int(x) for x in new_sync_state_set],
                "sync_state_set_epoch": sync_state_set_epoch,
                "broker_epoch": broker_epoch,
                "cluster_name": cluster_name or None,  # "" is no clusterName header (gRPC: the same "")
            },
        )
        return AlterSyncStateSetResult.from_dict(d)

    def elect_master(
        self,
        cluster_name: str,
        broker_name: str,
        broker_id: int | None = None,
        designate_elect: bool = False,
        *,
        broker_epoch: int | None = None,
    ) -> ElectMasterResult:
        """ElectMaster: broker-triggered (broker_id), controller-triggered (None) or admin
        (``designate_elect=True``; needs the token when the server has one)."""
        d = self._call(
            "ElectMaster",
            {
                "cluster_name": cluster_name,
                "broker_name": broker_name,
                # -1: RocketMQ's controller trigger (ElectMasterRequestHeader.ofControllerTrigger), as
                # its controllers read the header; the core reads -1 and none alike
                "broker_id": -1 if broker_id is None else broker_id,
                "designate_elect": designate_elect,
                "broker_epoch": broker_epoch,
            },
        )
        return ElectMasterResult.from_dict(d)

    def get_replica_info(self, broker_name: str) -> ReplicaInfoResult:
        return ReplicaInfoResult.from_dict(self._call("GetReplicaInfo", {"broker_name": broker_name}))

    def get_sync_state_data(self, broker_names: str | Iterable[str] | None = None) -> SyncStateDataResult:
        """GetSyncStateData (remoting 1006) for ``broker_names`` (a name or names; None or empty:
        every broker set; a RocketMQ controller needs names)."""
        names = [broker_names] if isinstance(broker_names, str) else list(broker_names or ())
        return SyncStateDataResult.from_dict(self._call("GetSyncStateData", {"broker_names": names}))

    def clean_broker_data(
        self,
        cluster_name: str,
        broker_name: str,
        broker_controller_ids_to_clean: str | Iterable[int] | None = None,
        is_clean_living_broker: bool = False,
    ) -> Ack:
        """CleanBrokerData (admin; needs the token when the server has one). Ids as "1;2;3" or
        a list; None cleans the whole broker set."""
        ids = broker_controller_ids_to_clean
        ids_text = ids if isinstance(ids, str) or ids is None else ";".join(str(int(i)) for i in ids)
        d = self._call(
            "CleanBrokerData",
            {
                "cluster_name": cluster_name,
                "broker_name": broker_name,
                # "" or None: no header over remoting; gRPC sends "" either way (the whole broker set)
                "broker_controller_ids_to_clean": ids_text or None,
                "is_clean_living_broker": is_clean_living_broker,
            },
        )
        return Ack.from_dict(d)

    def get_config(self, address: str | None = None) -> ConfigResult:
        """The controller config, from the leader (or from ``address`` first when given)."""
        return ConfigResult.from_dict(self._call("GetConfig", {}, address=address))

    def update_config(self, config: Mapping[str, Any], address: str | None = None) -> UpdateConfigResult:
        """UpdateConfig (admin; needs the token when the server has one). Values are sent as text
        (remoting: UPDATE_CONTROLLER_CONFIG, 1009, as a properties body)."""
        body = {str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in config.items()}
        return UpdateConfigResult.from_dict(self._call("UpdateConfig", {"config": body}, address=address))

    # -- operator cockpit (mqctl extensions, gRPC only) --------------------------------------------

    def get_history(
        self, broker_name: str = "", since_ms: int = 0, after_seq: int = 0, limit: int = 0
    ) -> HistoryPage:
        """One page of the decision history (feature level 3), oldest first, from the asked node."""
        return HistoryPage.from_dict(
            self._call(
                "GetHistory",
                {"broker_name": broker_name, "since_ms": since_ms, "after_seq": after_seq, "limit": limit},
            )
        )

    def history(self, broker_name: str = "", since_ms: int = 0) -> HistoryPage:
        """The whole history (every page) of a broker set ("" = all) from ``since_ms``."""
        page = self.get_history(broker_name, since_ms)
        entries = list(page.entries)
        while page.more and entries:
            page = self.get_history(broker_name, since_ms, int(entries[-1]["seq"]))
            entries.extend(page.entries)
        return HistoryPage(
            tuple(entries),
            False,
            page.last_seq,
            page.history_max_entries,
            page.loss_total,
            page.failover_paused,
            page.remark,
        )

    def follow_history(
        self, broker_name: str = "", after_seq: int = 0, poll: float = 0.5
    ) -> Iterator[dict[str, Any]]:
        """New history entries as they are noted (after ``after_seq``), until the caller stops."""
        while True:
            page = self.get_history(broker_name, after_seq=after_seq)
            for entry in page.entries:
                after_seq = int(entry["seq"])
                yield entry
            if not page.more:
                time.sleep(poll)

    def pause_failover(self, broker_name: str = "", reason: str = "", *, paused: bool = True) -> PauseResult:
        """Pause (or with ``paused=False`` resume) automatic failover of a broker set ("" = all);
        admin, needs the token when the server has one."""
        return PauseResult.from_dict(
            self._call("PauseFailover", {"broker_name": broker_name, "paused": paused, "reason": reason})
        )

    def switchover(
        self,
        broker_name: str,
        broker_id: int | None = None,
        *,
        force: bool = False,
        dry_run: bool = False,
        wait: float = 0.0,
        poll: float = 0.5,
    ) -> SwitchoverResult:
        """Move the master (admin; token). While the new master has not caught up (2105), ask again
        for up to ``wait`` seconds; then, with ``force``, move it anyway, else raise the 2105 error
        with the numbers."""
        deadline = time.monotonic() + max(0.0, wait)
        request = {"broker_name": broker_name, "broker_id": broker_id, "dry_run": dry_run}
        while True:
            try:
                return SwitchoverResult.from_dict(self._call("Switchover", {**request, "force": False}))
            except ControllerError as exc:
                if exc.code != Code.NOT_CAUGHT_UP:
                    raise
                if time.monotonic() + poll <= deadline:
                    time.sleep(poll)
                    continue
                if not force:
                    raise
            return SwitchoverResult.from_dict(self._call("Switchover", {**request, "force": True}))

    def rebalance(self, cluster_name: str = "", dry_run: bool = False) -> RebalanceResult:
        """Preferred master election (admin; token): a switchover to each broker set's preferred
        replica where it has caught up."""
        return RebalanceResult.from_dict(
            self._call("Rebalance", {"cluster_name": cluster_name, "dry_run": dry_run})
        )

    def get_snapshot(self) -> dict[str, Any]:
        """GetSnapshot (mqctl extension, admin): the
        replicated state at one applied index, read on the leader after a barrier. The response
        fields, with ``state_json`` the state as JSON (``mqctl snapshot save``)."""
        return dict(self._call("GetSnapshot", {}))
