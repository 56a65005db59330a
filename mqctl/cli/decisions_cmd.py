"""The controller's decisions for an operator on call: ``history`` (with loss accounting),
``failover pause|resume``, ``switchover`` and ``rebalance`` (docs/operations.md).

The controller decides and records every one of them (docs/controller-rules.md); these commands
ask and render. Exit codes: docs/codes.md.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import typer

from mqctl.cli import render, root_app, sub_app
from mqctl.cli.admin_cmd import Conn, connected
from mqctl.cli.common import (
    broker_name_option,
    cluster_option,
    dry_run_option,
    no_color_option,
    output_option,
)
from mqctl.cli.render import Output
from mqctl.errors import MqctlError, RefusedError, UsageError

if TYPE_CHECKING:
    from mqctl.client import ControllerClient

failover_app = sub_app(
    "failover", "Pause or resume automatic failover (the controller's elections on lease expiry)."
)


@root_app.command("history")
@connected(protocol=False, broker_acl=True)
def history(
    conn: Conn,
    broker_name: str = broker_name_option("one broker set (default: every broker set and config changes)"),
    since: str = typer.Option(
        None,
        "--since",
        metavar="WHEN",
        help="entries from WHEN: a duration back from now (90s, 15m, 1h, 2d, 1w) or an "
        "ISO 8601 time (UTC unless it says otherwise)",
    ),
    follow: bool = typer.Option(
        False,
        "-f",
        "--follow",
        help="then print new entries as the controller "
        "notes them, until Ctrl-C (JSON: one entry per line; YAML: one document "
        "each)",
    ),
    no_metadata: bool = typer.Option(
        False,
        "--no-metadata",
        help="do not ask the brokers for their "
        "metadata (four requests to each registered replica of each set "
        "listed, up to --broker-timeout each); --follow never does",
    ),
    broker_timeout: float = typer.Option(
        3.0, "--broker-timeout", metavar="SECONDS", help="at most this long for each broker's metadata"
    ),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Every decision the controller recorded, newest last: time (the leader's clock), Raft term,
    broker set, what happened, why, and for an election every candidate, why the winner won and the
    bytes the new master may not have (with the total per broker set).

    Then, for each broker set listed, what each replica lacks now of the topics, subscription groups
    and consumer offsets another replica has (after a failover: what the new master lacks), asked of
    the brokers at the addresses they registered, with `metadata diff`'s requests and comparer, and
    the `metadata sync` that puts it back; a broker that does not answer is shown unreachable.

    The history is replicated controller state (feature level 3; the last historyMaxEntries entries,
    10000 by default); any node answers."""
    from mqctl.admin.decision_docs import entry_doc, history_doc, since_ms  # lazy: start-up

    if broker_timeout <= 0:
        raise UsageError(f"--broker-timeout must be positive, got {broker_timeout}")
    start = since_ms(since, int(time.time() * 1000))
    with conn.client() as client:
        page = client.history(broker_name or "", start)
        doc = history_doc(page, broker_name, start)
        if not follow and not no_metadata:
            doc["metadata"] = _replica_metadata(conn, client, doc, broker_timeout)
        if not follow:
            render.emit(doc, output, render.history_table, no_color=no_color)
            return
        last = page.last_seq
        if output is Output.table:
            render.console(no_color).print(render.history_table(doc))
        else:
            for entry in doc["entries"]:
                _print_entry(entry, output)
        client.deadline = None  # following has no end: each poll gets --timeout
        try:
            for entry in client.follow_history(broker_name or "", last):
                shown = entry_doc(entry)
                if output is Output.table:
                    render.console(no_color).print(render.history_line(shown))
                else:
                    _print_entry(shown, output)
        except KeyboardInterrupt:
            return


def _replica_metadata(
    conn: Conn, client: ControllerClient, doc: dict[str, Any], timeout: float
) -> dict[str, dict[str, Any]]:
    """brokermeta.replica_drift of each broker set the history lists, from the registrations the
    controller has now; {"error": why} for a set it cannot be asked of."""

    from mqctl.admin.brokermeta import replica_drift  # lazy: start-up

    names = sorted({e["brokerName"] for e in doc["entries"] if e["brokerName"]})
    if not names:
        return {}
    try:
        table = {n: asdict(i) for n, i in client.get_sync_state_data(names).replicas_info_table.items()}
    except MqctlError as exc:
        return {n: {"error": f"cannot read its replicas from the controller: {exc}"} for n in names}
    addresses = {
        n: [
            str(r["broker_address"])
            for r in (*i["in_sync_replicas"], *i["not_in_sync_replicas"])
            if r["broker_address"]
        ]
        for n, i in table.items()
    }
    out = {
        n: {"error": "no replica of it is registered on the controller"}
        for n in names
        if not addresses.get(n)
    }
    asked = [n for n in names if n not in out]
    if asked:
        with conn.remoting([a for n in asked for a in addresses[n]], timeout, brokers=True) as brokers:
            out.update(
                (n, replica_drift(brokers.connection, table[n], broker_set=n, timeout=timeout)) for n in asked
            )
    return dict(sorted(out.items()))


def _print_entry(entry: dict[str, Any], output: Output) -> None:
    from mqctl.admin.output import to_json, to_yaml  # lazy: start-up

    text = to_json(entry, compact=True) + "\n" if output is Output.json else "---\n" + to_yaml(entry)
    sys.stdout.write(text)
    sys.stdout.flush()


def _pause(
    action: str,
    conn: Conn,
    broker_name: str | None,
    reason: str,
    dry_run: bool,
    output: Output,
    no_color: bool,
) -> None:
    from mqctl.admin.decision_docs import pause_doc  # lazy: start-up

    with conn.client() as client:
        if dry_run:
            current = client.get_history(broker_name or "", limit=1).failover_paused
            doc = pause_doc(action, broker_name, reason, None, True, current)
        else:
            result = client.pause_failover(broker_name or "", reason, paused=action == "pause")
            doc = pause_doc(action, broker_name, reason, result, False, {})
    render.emit(doc, output, render.message_table, no_color=no_color)


def _broker_opt(what: str) -> Any:
    return broker_name_option(f"one broker set (default: {what})")


def _dry_run_opt() -> Any:
    return dry_run_option("say what would change; change nothing")


@failover_app.command("pause")
@connected(protocol=False)
def failover_pause(
    conn: Conn,
    broker_name: str = _broker_opt("every broker set"),
    reason: str = typer.Option(
        "", "--reason", metavar="TEXT", help="why (shown by getSyncStateSet and history)"
    ),
    dry_run: bool = _dry_run_opt(),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Stop the controller from electing a new master when a master's lease expires (a broker's own
    election request is refused too) until `failover resume`; replicated. `electMaster -b ID` and
    `switchover` still work. Needs feature level 3 and the token."""
    _pause("pause", conn, broker_name, reason, dry_run, output, no_color)


@failover_app.command("resume")
@connected(protocol=False)
def failover_resume(
    conn: Conn,
    broker_name: str = _broker_opt("the pause of every broker set"),
    reason: str = typer.Option("", "--reason", metavar="TEXT", help="why (kept in the history)"),
    dry_run: bool = _dry_run_opt(),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Let the controller elect on lease expiry again (at once: a master that died while paused is
    replaced within a tick). A set stays paused while every set is."""
    _pause("resume", conn, broker_name, reason, dry_run, output, no_color)


@root_app.command("switchover")
@connected(protocol=False, broker_acl=True)
def switchover(
    conn: Conn,
    broker_name: str = broker_name_option("the broker set", default=...),
    to: int = typer.Option(
        None, "--to", metavar="ID", help="the new master (default: the freshest alive SyncStateSet member)"
    ),
    wait: float = typer.Option(
        10.0,
        "--wait",
        metavar="SECONDS",
        help="wait this long for the new master "
        "to catch up with the master (offset equal in their heartbeats)",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="move it after --wait even when the new master has not caught up (it may not have the gap)",
    ),
    require_metadata: bool = typer.Option(
        False,
        "--require-metadata",
        help="first ask the master and "
        "the new master for their topics, subscription groups and "
        "consumer offsets (as `metadata diff`) and refuse while the new "
        "master lacks any the master has (needs the brokers' remoting "
        "ports)",
    ),
    dry_run: bool = _dry_run_opt(),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Move the master of a broker set to an alive SyncStateSet member once it has caught up (maxOffset
    equal to the master's), waiting up to --wait; refused with the numbers otherwise (exit 3),
    unless --force. With --require-metadata also refused (exit 3) while the new master lacks topics,
    groups or consumer offsets the master has. The old master is sent its new role first. Needs the
    token."""
    from mqctl.admin.decision_docs import switchover_doc  # lazy: start-up

    with conn.client() as client:
        if require_metadata:  # the candidate the controller would pick, checked, then pinned
            to = _metadata_checked(conn, client, broker_name, to)
        if wait < 0:
            raise UsageError(f"--wait must be 0 or more seconds, got {wait}")
        if client.deadline is not None:  # --timeout reaches the controller; --wait comes on top
            client.deadline += wait
        result = client.switchover(broker_name, to, force=force, dry_run=dry_run, wait=wait)
    render.emit(switchover_doc(result, force), output, render.message_table, no_color=no_color)


def _metadata_checked(conn: Conn, client: ControllerClient, broker_name: str, to: int | None) -> int:
    from mqctl.admin.brokermeta import require_metadata  # lazy: start-up

    plan = client.switchover(broker_name, to, force=True, dry_run=True)
    info = client.get_sync_state_data([broker_name]).replicas_info_table[broker_name]
    address = {r.broker_id: r.broker_address for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}
    master, candidate = plan.old_master_broker_id, plan.new_master_broker_id
    if master is None or candidate is None or not address.get(master) or not address.get(candidate):
        raise RefusedError(
            f"{broker_name}: --require-metadata needs a master and a candidate with addresses "
            f"(master {master}, candidate {candidate})"
        )
    seconds = min(conn.timeout, 10.0)
    with conn.remoting([address[master], address[candidate]], seconds, brokers=True) as brokers:
        require_metadata(
            brokers.connection,
            broker_name,
            (master, address[master]),
            (candidate, address[candidate]),
            timeout=seconds,
        )
    return candidate


@root_app.command("rebalance")
@connected(protocol=False)
def rebalance(
    conn: Conn,
    cluster: str = cluster_option("the broker sets of this cluster (default: every broker set)"),
    dry_run: bool = dry_run_option("list what would move; change nothing"),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Preferred master election (Kafka's preferred leader election): for every broker set whose
    preferred replica (the highest election priority, then the lowest id) is an alive, caught-up
    SyncStateSet member but not the master, a switchover to it; the others are listed with the
    reason. Not for a paused set. Needs the token."""
    from mqctl.admin.decision_docs import rebalance_doc  # lazy: start-up

    with conn.client() as client:
        result = client.rebalance(cluster or "", dry_run)
    render.emit(rebalance_doc(result, cluster), output, render.rebalance_table, no_color=no_color)
