"""What the stores and the controller show now: the input of the runbook and the checks.

Gathering reads only (stores through mqctl.recover.inspect, the controller through
GetSyncStateData); deciding is left to runbook.py, which is pure.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mqctl.errors import MqctlError
from mqctl.recover.compare import freshness
from mqctl.recover.inspect import NO_STORE, StoreReport, inspect_store
from mqctl.upgrade.align import SetAlignment, align
from mqctl.upgrade.clear_epochs import EPOCH_FILES
from mqctl.upgrade.store_in_use import Usage, store_usage

if TYPE_CHECKING:
    from mqctl.client import ControllerClient, ReplicasInfo

__all__ = ["BrokerSet", "ControllerState", "StoreState", "UpgradeState", "gather", "group_sets"]


@dataclass
class StoreState:
    path: str
    report: StoreReport
    usage: Usage
    epoch_files: list[str]
    error: str = ""

    @property
    def identity_id(self) -> int | None:
        return self.report.identity.broker_id if self.report.identity else None

    @property
    def running(self) -> bool:
        return self.usage.running


@dataclass
class ControllerState:
    addresses: str = ""  # "" = not asked (-a not given)
    reachable: bool | None = None
    error: str = ""
    leader: str = ""
    sets: dict[str, ReplicasInfo] = field(default_factory=dict)

    @property
    def asked(self) -> bool:
        return bool(self.addresses)


@dataclass
class BrokerSet:
    cluster_name: str | None
    broker_name: str | None
    stores: list[StoreState]
    master: StoreState
    master_reason: str
    alignment: SetAlignment
    notes: list[str] = field(default_factory=list)

    @property
    def slaves(self) -> list[StoreState]:
        return [s for s in self.stores if s is not self.master]

    @property
    def label(self) -> str:
        return f"{self.cluster_name}/{self.broker_name}" if self.broker_name else "(broker set unknown)"


@dataclass
class UpgradeState:
    stores: list[StoreState]
    sets: list[BrokerSet]
    controller: ControllerState


def _store_state(path: str) -> StoreState:
    usage = store_usage(path)
    try:
        rep = inspect_store(path)
        err = ""
    except MqctlError as exc:
        rep = StoreReport(os.fspath(path), NO_STORE)
        err = str(exc)
    files = [n for n in EPOCH_FILES if (Path(path) / n).is_file()]
    return StoreState(os.fspath(path), rep, usage, files, err)


def group_sets(stores: list[StoreState], controller: ControllerState) -> list[BrokerSet]:
    """Group stores by (cluster, broker name) from brokerIdentity (or mqctl's initial signature).
    Stores with no name (pre-5.1.1 stores have no brokerIdentity) join the only named set, or form one
    set among themselves when no store is named."""
    named: dict[tuple[str, str], list[StoreState]] = {}
    unnamed: list[StoreState] = []
    for s in stores:
        if s.report.state == NO_STORE:
            continue
        if s.report.broker_name and s.report.cluster_name:
            named.setdefault((s.report.cluster_name, s.report.broker_name), []).append(s)
        else:
            unnamed.append(s)
    groups: list[tuple[str | None, str | None, list[StoreState], list[str]]] = [
        (c, b, members, []) for (c, b), members in named.items()
    ]
    if unnamed:
        names = ", ".join(s.path for s in unnamed)
        if len(groups) == 1:
            groups[0][2].extend(unnamed)
            groups[0][3].append(
                f"{names}: no brokerIdentity; assumed to belong to {groups[0][0]}/{groups[0][1]}"
            )
        elif not groups:
            note = (
                "no store names its broker set (no brokerIdentity: pre-5.1.1 stores); the stores given "
                "are taken as one set"
            )
            if len(controller.sets) == 1:
                bname, info = next(iter(controller.sets.items()))
                groups.append(
                    (
                        info.cluster_name or None,
                        bname,
                        unnamed,
                        [note + f", named {bname} after the controller's only broker set"],
                    )
                )
            else:
                groups.append((None, None, unnamed, [note]))
        else:
            for s in unnamed:
                groups.append(
                    (
                        None,
                        None,
                        [s],
                        [
                            f"{s.path}: no brokerIdentity and several broker sets "
                            f"given: check it together with its own set's stores"
                        ],
                    )
                )
    out: list[BrokerSet] = []
    for c, b, members, notes in groups:
        master, why = _pick_master(members, b, controller)
        al = align([m.report for m in members], c, b)
        out.append(BrokerSet(c, b, members, master, why, al, notes))
    return out


def _pick_master(
    members: list[StoreState], broker_name: str | None, controller: ControllerState
) -> tuple[StoreState, str]:
    info = controller.sets.get(broker_name or "") if broker_name else None
    if info is not None and info.master_broker_id is not None:
        for m in members:
            if m.identity_id == info.master_broker_id:
                return m, f"the controller reports brokerId {info.master_broker_id} as master"
    best = max(members, key=lambda m: (freshness(m.report), -members.index(m)))
    if len(members) == 1:
        return best, "the only store of its set"
    return best, (
        "the freshest store (highest last epoch, then max offset; the first given on ties): start "
        "the broker that was master before the upgrade; if that is another store, see the "
        "alignment check"
    )


def _controller_state(addresses: str, client_factory: Callable[[str], ControllerClient]) -> ControllerState:
    st = ControllerState(addresses)
    if not addresses:
        return st
    try:
        with client_factory(addresses) as client:
            data = client.get_sync_state_data([])
            st.leader = client.leader or ""
        st.reachable = True
        st.sets = dict(data.replicas_info_table)
    except MqctlError as exc:
        st.reachable = False
        st.error = str(exc)
    return st


def gather(
    stores: list[str], addresses: str | None, client_factory: Callable[[str], ControllerClient] | None = None
) -> UpgradeState:
    """Read every store and, with `addresses`, ask the controller. Writes nothing."""

    def default_factory(a: str) -> ControllerClient:
        from mqctl.client import ControllerClient  # lazy: grpc, protobuf

        return ControllerClient(a, timeout=5.0)

    controller = _controller_state(addresses or "", client_factory or default_factory)
    states = [_store_state(s) for s in stores]
    return UpgradeState(states, group_sets(states, controller), controller)
