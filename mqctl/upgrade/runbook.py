"""The runbook (reference section 11, seed 000 "Upgrade plan") and the pre-flight checks, decided
from an UpgradeState. Pure: no I/O here.

Statuses: done (the stores or the controller show it), pending, unknown (cannot be seen from here,
e.g. a controller data directory on another host), unchecked (needs -a to be seen). A step shown
done also marks every earlier step done: the runbook is ordered.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from mqctl.camel import camel_fields
from mqctl.upgrade.survey import BrokerSet, StoreState, UpgradeState

DONE, PENDING, UNKNOWN, UNCHECKED = "done", "pending", "unknown", "unchecked"
OK, FAIL, WARN, SKIP = "ok", "FAIL", "warn", "skip"

__all__ = [
    "DONE",
    "FAIL",
    "OK",
    "PENDING",
    "SKIP",
    "UNCHECKED",
    "UNKNOWN",
    "WARN",
    "Check",
    "Step",
    "checks",
    "next_step",
    "phase_of",
    "runbook",
]


@dataclass
class Step:
    n: int
    id: str
    title: str
    commands: list[str]
    check: str
    status: str = PENDING
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.n,
            **camel_fields(self, "id", "title"),
            "commands": list(self.commands),
            **camel_fields(self, "check", "status", "evidence"),
        }


@dataclass
class Check:
    status: str
    name: str
    subject: str
    detail: str
    fix: str = ""
    lines: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "check": self.name,
            **camel_fields(self, "subject", "detail", "fix"),
            "lines": list(self.lines),
        }


def _q(s: str) -> str:
    return shlex.quote(s)


def _a(state: UpgradeState) -> str:
    return f" -a {_q(state.controller.addresses)}" if state.controller.asked else " -a ADDRS"


def _stores_args(state: UpgradeState) -> str:
    return " ".join(f"--store {_q(s.path)}" for s in state.stores)


# --- evidence -------------------------------------------------------------------------------------


def _set_known(state: UpgradeState, bs: BrokerSet) -> bool:
    return bool(bs.broker_name) and bs.broker_name in state.controller.sets


def _replica_ids(state: UpgradeState, bs: BrokerSet) -> dict[int, bool]:
    """brokerId -> alive, as the controller reports the set."""
    info = state.controller.sets.get(bs.broker_name or "")
    if info is None:
        return {}
    return {r.broker_id: r.alive for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}


def _stale_sets(state: UpgradeState) -> list[BrokerSet]:
    """Sets the controller knows although none of its replicas matches a store's brokerIdentity: data of
    the old controller (the brokers registered before persistent ids)."""
    out = []
    for bs in state.sets:
        if not _set_known(state, bs):
            continue
        ids = set(_replica_ids(state, bs))
        if not any(s.identity_id in ids for s in bs.stores if s.identity_id is not None):
            out.append(bs)
    return out


def controller_upgraded(state: UpgradeState) -> bool | None:
    c = state.controller
    if not c.asked:
        return None
    return bool(c.reachable) and not _stale_sets(state)


def registered(state: UpgradeState, bs: BrokerSet, s: StoreState) -> bool | None:
    """The store's broker registered with the (new) controller: its brokerIdentity id is a replica of
    the set. None when the controller was not asked."""
    if not state.controller.asked:
        return None
    if not state.controller.reachable or s.identity_id is None:
        return False
    return s.identity_id in _replica_ids(state, bs)


def past_clear(state: UpgradeState, bs: BrokerSet, s: StoreState) -> bool:
    """No old epoch history: no epoch file, or the broker registered since (its epoch file is new). Without
    -a a brokerIdentity counts (pre-5.1.1 stores have none; the broker wrote it at its first start)."""
    if not s.epoch_files:
        return True
    reg = registered(state, bs, s)
    return bool(reg) if reg is not None else s.identity_id is not None


def master_elected(state: UpgradeState, bs: BrokerSet) -> bool | None:
    if not state.controller.asked:
        return None
    info = state.controller.sets.get(bs.broker_name or "")
    mid = bs.master.identity_id
    return bool(
        state.controller.reachable and info is not None and mid is not None and info.master_broker_id == mid
    )


# --- the runbook ----------------------------------------------------------------------------------


def runbook(state: UpgradeState) -> list[Step]:
    c = state.controller
    a = _a(state)
    upgraded = controller_upgraded(state)
    steps = [
        Step(
            1,
            "stop-controllers",
            "Stop every node of the old controller group",
            [
                "stop each controller node (RocketMQ: bin/mqshutdown controller or your service manager; "
                "mqctl: stop mqctl serve)"
            ],
            f"mqctl upgrade check {_stores_args(state)}{a}  -> controller unreachable",
        ),
        Step(
            2,
            "clear-controller-data",
            "Delete the controller data on every controller node (after a backup)",
            [
                "mqctl upgrade clear-controller-data CONTROLLER_STORE_PATH --dry-run",
                "mqctl upgrade clear-controller-data CONTROLLER_STORE_PATH   "
                "(RocketMQ 5.1.x default ~/DledgerController; docs ~/DLedgerController; "
                "mqctl: serve --data-dir)",
            ],
            "running it again says there is nothing to clear",
        ),
        Step(
            3,
            "start-controllers",
            "Start the new controller group (brokers keep running; no switch can happen meanwhile)",
            ["start each controller node with the new version"],
            f"mqctl getControllerMetaData{a}",
        ),
    ]
    if not c.asked:
        for s in steps:
            s.status, s.evidence = UNCHECKED, "pass -a ADDRS to see the controller"
    elif upgraded:
        for s in steps:
            s.status, s.evidence = (
                DONE,
                (f"the controller at {c.leader or c.addresses} answers and holds no data of the old group"),
            )
    elif c.reachable:
        stale = ", ".join(bs.label for bs in _stale_sets(state))
        steps[0].evidence = f"the controller answers and still holds the old data of {stale}"
        steps[1].evidence = steps[0].evidence
        steps[2].evidence = "the old controller still answers"
    else:
        steps[0].status, steps[0].evidence = DONE, f"no controller answers at {c.addresses}"
        steps[1].status, steps[1].evidence = (
            UNKNOWN,
            (
                "the data directories are not visible from here; run clear-controller-data on each node "
                "(harmless when already cleared)"
            ),
        )
        steps[2].evidence = f"no controller answers at {c.addresses}"

    slaves = [s for bs in state.sets for s in bs.slaves]
    masters = [bs.master for bs in state.sets]
    n = 4
    for title, sid, group in (
        ("Stop the slave brokers", "stop-slaves", slaves),
        ("Stop the master brokers", "stop-master", masters),
    ):
        running = [s.path for s in group if s.running]
        st = Step(
            n,
            sid,
            title,
            [f"stop the broker of {s.path}" for s in group] or ["(no store)"],
            f"mqctl upgrade check {_stores_args(state)}{a}  -> broker stopped",
        )
        if not running:
            st.status, st.evidence = DONE, "no broker holds these stores" if group else "no such store"
        else:
            st.evidence = "still running: " + ", ".join(running)
        steps.append(st)
        n += 1
    st = Step(
        6,
        "clear-epochs",
        "Delete epochFileCheckpoint and epochFileCheckpoint.bak on every broker (after a backup)",
        [
            f"mqctl upgrade clear-epochs {_stores_args(state)} --dry-run",
            f"mqctl upgrade clear-epochs {_stores_args(state)}",
        ],
        f"mqctl upgrade check {_stores_args(state)}{a}  -> epoch files absent",
    )
    left = [s.path for bs in state.sets for s in bs.stores if not past_clear(state, bs, s)]
    if not left:
        st.status, st.evidence = DONE, "no store holds an epoch file from before the upgrade"
    else:
        st.evidence = "epoch files in " + ", ".join(left)
    steps.append(st)

    start = Step(
        7,
        "start-master",
        "Start the old master broker of each set",
        [f"start the broker of {bs.master.path}   ({bs.label}: {bs.master_reason})" for bs in state.sets],
        "its brokerIdentity appears (the id the controller applied)",
    )
    wait = Step(
        8,
        "wait-master",
        "Wait until the controller reports it as master",
        [
            f"mqctl upgrade wait-master{a} -b {_q(bs.broker_name or 'BROKER_NAME')} --broker-id "
            f"{bs.master.identity_id if bs.master.identity_id is not None else 'ID'}"
            + (
                ""
                if bs.master.identity_id is not None
                else f"   (ID: in {bs.master.path}/brokerIdentity once it started; 1 on a fresh controller)"
            )
            for bs in state.sets
        ],
        f"mqctl getSyncStateSet{a} -b BROKER_NAME",
    )
    slaves_step = Step(
        9,
        "start-slaves",
        "Start the slave brokers",
        [f"start the broker of {s.path}" for s in slaves] or ["(no slave store given)"],
        f"mqctl getSyncStateSet{a} -b BROKER_NAME  -> every replica alive",
    )
    started = [bs for bs in state.sets if bs.master.running and past_clear(state, bs, bs.master)]
    if state.sets and len(started) == len(state.sets):
        start.status, start.evidence = (
            DONE,
            "running with a new epoch history: " + ", ".join(bs.master.path for bs in started),
        )
    elected = [master_elected(state, bs) for bs in state.sets]
    if not c.asked:
        wait.status, wait.evidence = UNCHECKED, "pass -a ADDRS to ask the controller"
        if all(s.running and past_clear(state, bs, s) for bs in state.sets for s in bs.slaves) and slaves:
            slaves_step.status, slaves_step.evidence = UNCHECKED, "running; pass -a ADDRS to confirm"
        else:
            slaves_step.status = UNCHECKED
            slaves_step.evidence = "pass -a ADDRS to ask the controller"
    else:
        if state.sets and all(elected):
            wait.status, wait.evidence = (
                DONE,
                "; ".join(f"{bs.label}: master is brokerId {bs.master.identity_id}" for bs in state.sets),
            )
        else:
            wait.evidence = "; ".join(
                f"{bs.label}: not master yet" for bs, e in zip(state.sets, elected, strict=True) if not e
            )
        alive_all = (
            bool(state.sets)
            and all(
                _replica_ids(state, bs).get(s.identity_id or -1, False)
                for bs in state.sets
                for s in bs.slaves
            )
            and all(elected)
        )
        if alive_all:
            slaves_step.status, slaves_step.evidence = DONE, "every slave registered and alive"
        else:
            missing = [
                s.path
                for bs in state.sets
                for s in bs.slaves
                if not _replica_ids(state, bs).get(s.identity_id or -1, False)
            ]
            slaves_step.evidence = ("not registered or not alive: " + ", ".join(missing)) if missing else ""
    steps += [start, wait, slaves_step]
    _imply(steps)
    return steps


def _imply(steps: list[Step]) -> None:
    """Later evidence marks earlier steps done, only where it proves them: epoch files cleared (6, which
    refuses running brokers) or any later step proves the brokers were stopped (4, 5); the controller
    reporting the new master (8, 9) proves the controller steps (1-3). Step 6 itself is never implied:
    a slave may still hold old epoch files while its master already runs."""
    done = {s.n for s in steps if s.status == DONE}
    for s in steps:
        if s.status == DONE:
            continue
        sources = [n for n in done if n > s.n and ((s.n in (4, 5) and n >= 6) or (s.n <= 3 and n >= 8))]
        if sources:
            src = max(sources)
            s.status = DONE
            s.evidence = f"implied: step {src} is done" + (f" ({s.evidence})" if s.evidence else "")


def next_step(steps: list[Step]) -> Step | None:
    """The first step not done (steps only -a could show are skipped)."""
    for s in steps:
        if s.status in (PENDING, UNKNOWN):
            return s
    return None


def phase_of(steps: list[Step]) -> str:
    nxt = next_step(steps)
    if nxt is None:
        return "done"
    if nxt.n <= 3:
        return "controller"
    if nxt.n <= 6:
        return "stop-brokers"
    if nxt.n <= 8:
        return "start-master"
    return "start-slaves"


# --- checks ---------------------------------------------------------------------------------------


def checks(state: UpgradeState, steps: list[Step]) -> list[Check]:
    """One Check per store and set and the controller, judged against what the next step expects."""
    phase = phase_of(steps)
    out: list[Check] = []
    c = state.controller
    for s in state.stores:
        if s.error:
            out.append(Check(FAIL, "store", s.path, f"unreadable: {s.error}", "see mqctl recover inspect"))
        elif s.report.state == "no store":
            out.append(
                Check(
                    FAIL,
                    "store",
                    s.path,
                    "; ".join(s.report.problems) or "no store here",
                    "pass the broker's storePathRootDir",
                )
            )
    set_of = {id(s): bs for bs in state.sets for s in bs.stores}
    for s in state.stores:
        bs = set_of.get(id(s))
        if bs is None:
            continue
        is_master = s is bs.master
        role = "master" if is_master else "slave"
        # -- stopped
        if not s.running:
            out.append(
                Check(
                    WARN if s.usage.notes else OK,
                    "stopped",
                    s.path,
                    f"{role}: no lock held, no process has its files open"
                    + (
                        f" ({s.usage.uninspected} process(es) of other users not inspected)"
                        if s.usage.uninspected
                        else ""
                    ),
                    lines=list(s.usage.notes),
                )
            )
        else:
            must_stop = phase == "stop-brokers" or (phase == "start-master" and not is_master)
            why = "; ".join(s.usage.reasons)
            if must_stop:
                fix = (
                    "stop the slaves first, then the master"
                    if phase == "stop-brokers"
                    else "start the slaves only after wait-master succeeded"
                )
                out.append(Check(FAIL, "stopped", s.path, f"{role} is running: {why}", fix))
            else:
                out.append(Check(OK, "stopped", s.path, f"{role} running, as expected now ({phase}): {why}"))
        # -- epoch files
        if not s.epoch_files:
            out.append(Check(OK, "epoch-files", s.path, "absent"))
        elif past_clear(state, bs, s):
            out.append(Check(OK, "epoch-files", s.path, "present, written since the broker registered anew"))
        elif phase in ("start-master", "start-slaves", "done"):
            out.append(
                Check(
                    FAIL,
                    "epoch-files",
                    s.path,
                    f"{', '.join(s.epoch_files)} from before the upgrade",
                    f"mqctl upgrade clear-epochs --store {_q(s.path)}",
                )
            )
        else:
            out.append(
                Check(
                    OK,
                    "epoch-files",
                    s.path,
                    f"{', '.join(s.epoch_files)} present; clear-epochs removes them (step 6)",
                )
            )
        # -- identity
        ident = s.report.identity
        if ident is None:
            tmp = s.report.temp_identity
            extra = f" (brokerIdentity-temp holds id {tmp.broker_id})" if tmp else ""
            out.append(
                Check(
                    OK,
                    "identity",
                    s.path,
                    "no brokerIdentity: the broker applies a new id at its first start" + extra,
                )
            )
        else:
            label = f"{ident.cluster_name}/{ident.broker_name}#{ident.broker_id}"
            reg = registered(state, bs, s)
            if reg:
                out.append(Check(OK, "identity", s.path, f"{label}, registered with the controller"))
            elif reg is None:
                out.append(
                    Check(
                        WARN, "identity", s.path, f"{label}; pass -a to see whether the controller knows it"
                    )
                )
            elif c.reachable and not any(b is bs for b in _stale_sets(state)):
                out.append(
                    Check(
                        FAIL,
                        "identity",
                        s.path,
                        f"{label}: the controller does not know this id; the broker would be "
                        f"refused at registration (CONTROLLER_BROKER_NEED_TO_BE_REGISTERED)",
                        f"move {s.path}/brokerIdentity away with the broker stopped; it is written "
                        f"again at the next start",
                    )
                )
            else:
                out.append(
                    Check(
                        WARN,
                        "identity",
                        s.path,
                        f"{label}: unknown to a controller whose data is "
                        f"cleared in step 2; the broker would not register with that id",
                    )
                )
    # -- alignment
    for bs in state.sets:
        al = bs.alignment
        before_master = phase in ("controller", "stop-brokers")
        if len(bs.stores) < 2 or al.aligned:
            out.append(Check(OK, "aligned", bs.label, al.summary(), lines=al.notes + bs.notes))
            continue
        lost = {k: v for k, v in al.losses[bs.master.path].items() if v}
        if before_master or lost:
            fix = (
                f"let the slaves catch up before stopping them, or start {al.best} as master (it loses "
                f"least); mqctl recover compare shows the details"
            )
            out.append(Check(FAIL, "aligned", bs.label, al.summary(), fix, lines=al.details() + al.notes))
        else:
            out.append(
                Check(
                    OK,
                    "aligned",
                    bs.label,
                    al.summary() + f"; the slaves catch up from {bs.master.path}",
                    lines=al.details(),
                )
            )
    # -- controller
    if not c.asked:
        out.append(Check(SKIP, "controller", "-", "not asked; pass -a ADDRS"))
    elif phase == "controller":
        if c.reachable:
            stale = ", ".join(b.label for b in _stale_sets(state))
            out.append(
                Check(
                    FAIL,
                    "controller",
                    c.addresses,
                    f"answers and holds the old data of {stale}",
                    "stop every controller node, then clear-controller-data on each (steps 1-2)",
                )
            )
        else:
            out.append(
                Check(OK, "controller", c.addresses, "unreachable, as expected while its data is cleared")
            )
    else:
        if c.reachable and controller_upgraded(state):
            out.append(Check(OK, "controller", c.addresses, "reachable, no data from before the upgrade"))
        elif c.reachable:
            out.append(
                Check(
                    FAIL,
                    "controller",
                    c.addresses,
                    "answers with the old group's data",
                    "steps 1-3: stop, clear-controller-data, start the new controllers",
                )
            )
        else:
            out.append(
                Check(
                    FAIL,
                    "controller",
                    c.addresses,
                    f"unreachable: {c.error}",
                    "start the new controllers (step 3) before the brokers",
                )
            )
    return out
