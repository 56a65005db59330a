"""`mqctl upgrade ...`: the persistent-BrokerId upgrade (RocketMQ 5.0.0/5.1.0 -> 5.1.1+) as guarded
commands. docs/upgrade.md is the operator's page; decisions live in mqctl.upgrade.

Only typer is imported at module level; the library, grpc and rich load inside the commands.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import typer

from mqctl.cli import sub_app
from mqctl.cli.admin_cmd import Conn, connected
from mqctl.cli.common import (
    backup_dir_option,
    confirm,
    console,
    dry_run_option,
    echo_doc,
    output_option,
    printing,
    store_option,
    yes_option,
)
from mqctl.cli.render import Output
from mqctl.errors import UnhealthyError, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mqctl.client import ControllerClient
    from mqctl.upgrade.backup import ClearPlan

upgrade_app = sub_app(
    "upgrade",
    "Upgrade to persistent broker ids (RocketMQ 5.1.1+): runbook, checks, "
    "clears with backups, restore, wait for the master.",
)


def _factory(conn: Conn) -> Callable[[str], ControllerClient]:
    """The controller client of ``gather``: this command's connection options (-a, TLS, token)."""
    return lambda _addresses: conn.client()


def _confirm(question: str, yes: bool, output: Output = Output.table) -> None:
    """Ask unless --yes; never prompt when stdin is not a terminal (a script would hang or guess)."""
    if not yes:
        confirm(question, output, terminal_only=True)


def _refuse_running_stores(stores: list[str], what: str) -> None:
    from mqctl.upgrade.store_in_use import store_usage  # lazy: start-up

    for s in stores:
        u = store_usage(s)
        if u.running:
            raise UsageError(
                f"refused: {s}: the broker is running ({'; '.join(u.reasons)}); stop it "
                f"first, then run {what} again (nothing was changed)"
            )


def _refuse_running_controller(data_dir: str) -> None:
    from mqctl.upgrade.store_in_use import controller_dir_usage  # lazy: start-up

    u = controller_dir_usage(data_dir)
    if u.running:
        raise UsageError(
            f"refused: {data_dir}: a controller is running on it ({'; '.join(u.reasons)}); "
            f"stop every controller node first (runbook step 1), then run clear-controller-data "
            f"again (nothing was changed)"
        )


def _show_clear(
    plan: ClearPlan,
    dry_run: bool,
    backup: str | None,
    output: Output = Output.table,
    extra: dict[str, object] | None = None,
) -> None:
    if output is not Output.table:
        echo_doc(
            output,
            {
                "version": 1,
                **plan.to_dict(),
                **(extra or {}),
                "dryRun": dry_run,
                "backupDir": backup,
                "undo": f"mqctl upgrade restore {backup}" if backup else None,
            },
        )
        return
    verb = "would remove" if dry_run else "removed"
    for r in plan.roots:
        if not r.items:
            typer.echo(f"{r.path}: nothing to clear" + (f" ({'; '.join(r.notes)})" if r.notes else ""))
            continue
        files = [i for i in r.items if i.kind == "file"]
        typer.echo(f"{r.path} ({r.kind}): {verb} {len(files)} file(s), {r.bytes} bytes:")
        for i in r.items:
            typer.echo(
                f"  {i.rel}{'/' if i.kind == 'dir' else ''}"
                + (f"  {i.size} bytes" if i.kind == "file" else "")
            )
        for n in r.notes:
            typer.echo(f"  note: {n}")
    if dry_run:
        typer.echo("dry run: nothing was changed")
    elif backup:
        typer.echo(f"backup: {backup}")
        typer.echo(f"undo with: mqctl upgrade restore {backup}")


@upgrade_app.command("plan")
@connected(protocol=False, address=None)
@printing()
def plan_cmd(
    conn: Conn,
    stores: list[str] = store_option(
        "A broker store (storePathRootDir); repeat for every store.", default=[]
    ),
    output: Output = output_option(),
) -> None:
    """The ordered runbook with the exact command and check of each step, marking steps already done."""
    # lazy: start-up
    from mqctl.upgrade.runbook import next_step, runbook
    from mqctl.upgrade.survey import gather

    state = gather(stores, ";".join(conn.addresses) or None, _factory(conn))
    steps = runbook(state)
    nxt = next_step(steps)
    doc = {
        "version": 1,
        "controller": {
            "addresses": state.controller.addresses or None,
            "reachable": state.controller.reachable,
            "error": state.controller.error or None,
        },
        "brokerSets": [
            {
                "clusterName": bs.cluster_name,
                "brokerName": bs.broker_name,
                "master": bs.master.path,
                "masterReason": bs.master_reason,
                "slaves": [s.path for s in bs.slaves],
                "aligned": bs.alignment.aligned,
                "notes": bs.notes,
            }
            for bs in state.sets
        ],
        "steps": [s.to_dict() for s in steps],
        "next": nxt.n if nxt else None,
    }
    if output is not Output.table:
        echo_doc(output, doc)
        return
    from rich.table import Table  # lazy: rich

    con = console()
    t = Table(title="upgrade runbook (persistent broker ids)", show_lines=True)
    for col in ("step", "status", "what", "run", "check / evidence"):
        t.add_column(col, overflow="fold")
    style = {"done": "green", "pending": "yellow", "unknown": "magenta", "unchecked": "dim"}
    for s in steps:
        mark = f"[{style[s.status]}]{s.status}[/]" + (" <- next" if nxt is s else "")
        t.add_row(
            str(s.n),
            mark,
            s.title,
            "\n".join(s.commands),
            s.check + (f"\n[{style[s.status]}]{s.evidence}[/]" if s.evidence else ""),
        )
    con.print(t)
    for bs in state.sets:
        con.print(
            f"{bs.label}: master {bs.master.path} ({bs.master_reason}); slaves: "
            f"{', '.join(s.path for s in bs.slaves) or 'none'}"
        )
        for n in bs.notes:
            con.print(f"  note: {n}")
    con.print("next: " + (f"step {nxt.n}, {nxt.title}" if nxt else "nothing: the upgrade is done"))


@upgrade_app.command("check")
@connected(protocol=False, address=None)
@printing()
def check_cmd(
    conn: Conn,
    stores: list[str] = store_option("A broker store; repeat for each.", default=...),
    output: Output = output_option(),
) -> None:
    """Pre-flight: brokers stopped, stores aligned, identity and epoch files, controller; exit 7 on a FAIL."""
    # lazy: start-up
    from mqctl.upgrade.runbook import FAIL, checks, next_step, phase_of, runbook
    from mqctl.upgrade.survey import gather

    state = gather(stores, ";".join(conn.addresses) or None, _factory(conn))
    steps = runbook(state)
    results = checks(state, steps)
    nxt = next_step(steps)
    failed = [c for c in results if c.status == FAIL]
    problem = UnhealthyError(
        f"{len(failed)} check(s) failed: " + "; ".join(f"{c.name} {c.subject}" for c in failed[:4])
    )
    if output is not Output.table:
        echo_doc(
            output,
            {
                "version": 1,
                "phase": phase_of(steps),
                "next": nxt.n if nxt else None,
                "ok": not failed,
                "checks": [c.to_dict() for c in results],
            },
            error=problem if failed else None,
        )
    else:
        typer.echo(f"next step: {f'{nxt.n} {nxt.id}' if nxt else 'none (done)'}; checking what it expects")
        for c in results:
            typer.echo(
                f"{c.status:<4} {c.name:<11} {c.subject}: {c.detail}" + (f" -> fix: {c.fix}" if c.fix else "")
            )
            for line in c.lines:
                typer.echo(f"       {line}")
    if failed:
        raise problem


@upgrade_app.command("clear-epochs")
@printing()
def clear_epochs_cmd(
    stores: list[str] = store_option("A broker store; repeat for each.", default=...),
    backup_dir: str | None = backup_dir_option(
        "Where to copy the files first (default: a timestamped directory beside the first store)."
    ),
    dry_run: bool = dry_run_option("Show what would be removed; change nothing."),
    yes: bool = yes_option(),
    output: Output = output_option(),
) -> None:
    """Remove epochFileCheckpoint and epochFileCheckpoint.bak from stopped brokers' stores, after a backup."""
    # lazy: start-up
    from mqctl.upgrade.backup import apply_clear, default_backup_dir
    from mqctl.upgrade.clear_epochs import plan_clear_epochs

    plan = plan_clear_epochs(stores)
    _refuse_running_stores(stores, "clear-epochs")
    if dry_run or plan.nothing_to_do:
        _show_clear(plan, dry_run, None, output)
        return
    bdir = backup_dir or str(default_backup_dir(stores[0], "epochs"))
    n = sum(len(r.items) for r in plan.roots)
    _confirm(f"Remove {n} epoch file(s) from {len(plan.roots)} store(s), backup to {bdir}?", yes, output)
    manifest = apply_clear(
        plan, bdir, refuse_if_running=lambda: _refuse_running_stores(stores, "clear-epochs")
    )
    _show_clear(plan, False, manifest["backupDir"], output)


@upgrade_app.command("clear-controller-data")
@printing()
def clear_controller_data_cmd(
    data_dir: str = typer.Argument(
        ...,
        metavar="DIR",
        help="RocketMQ's controllerStorePath (~/DledgerController) or mqctl serve --data-dir.",
    ),
    backup_dir: str | None = backup_dir_option(
        "Where to copy the data first (default: a timestamped directory beside DIR)."
    ),
    dry_run: bool = dry_run_option("Show what would be removed; change nothing."),
    yes: bool = yes_option(),
    output: Output = output_option(),
) -> None:
    """Remove a stopped controller's data (RocketMQ DLedger or mqctl), after a backup."""
    # lazy: start-up
    from mqctl.upgrade.backup import apply_clear, default_backup_dir
    from mqctl.upgrade.controller_data import plan_clear_controller_data

    plan, cd = plan_clear_controller_data(data_dir)
    _refuse_running_controller(data_dir)
    extra: dict[str, object] = {"dledgerNodeIds": list(cd.node_ids)}
    if cd.node_ids and output is Output.table:
        typer.echo(f"{data_dir}: RocketMQ DLedger controller data of node(s) {', '.join(cd.node_ids)}")
    if dry_run or plan.nothing_to_do:
        _show_clear(plan, dry_run, None, output, extra)
        return
    bdir = backup_dir or str(default_backup_dir(data_dir, "controller-data"))
    root = plan.roots[0]
    _confirm(
        f"Remove the controller data in {data_dir} ({len(root.items)} entries, {root.bytes} bytes), "
        f"backup to {bdir}?",
        yes,
        output,
    )
    manifest = apply_clear(plan, bdir, refuse_if_running=lambda: _refuse_running_controller(data_dir))
    _show_clear(plan, False, manifest["backupDir"], output, extra)


@upgrade_app.command("restore")
@printing()
def restore_cmd(
    backup_dir: str = typer.Argument(
        ..., metavar="BACKUP_DIR", help="A directory printed by a clear command."
    ),
    dry_run: bool = dry_run_option("Verify the backup and show what would be put back."),
    yes: bool = yes_option(),
    output: Output = output_option(),
) -> None:
    """Put back exactly what a clear removed (bytes, modes, times), after verifying every sha256."""
    from mqctl.upgrade.backup import apply_restore, plan_restore  # lazy: start-up

    plan = plan_restore(backup_dir)

    def refuse() -> None:
        for r in plan.roots:
            if r["kind"] == "store":
                _refuse_running_stores([r["path"]], "restore")
            elif os.path.isdir(r["path"]):
                _refuse_running_controller(r["path"])

    refuse()
    table = output is Output.table
    verb = "would restore" if dry_run else "restoring"
    for a in plan.actions if table else ():
        if a.action == "restore":
            typer.echo(f"{verb} {a.target}" + (f" ({a.detail})" if a.detail else ""))
        elif a.action == "present":
            typer.echo(f"already in place: {a.target}")
        else:
            typer.echo(f"CONFLICT {a.target}: {a.detail}")

    def document(restored: int, error: BaseException | None = None) -> None:
        echo_doc(output, {"version": 1, **plan.to_dict(), "dryRun": dry_run, "restored": restored}, error)

    if plan.conflicts:
        refused = UsageError(
            f"refused: {len(plan.conflicts)} target(s) exist with other content; nothing "
            f"was restored (move them away first)"
        )
        if not table:
            document(0, refused)
        raise refused
    if dry_run or plan.nothing_to_do:
        if not table:
            document(0)
        elif dry_run:
            typer.echo("dry run: backup verified, nothing was changed")
        else:
            typer.echo("nothing to restore: everything in the backup is in place")
        return
    todo = sum(1 for a in plan.actions if a.action == "restore")
    _confirm(f"Restore {todo} entr{'y' if todo == 1 else 'ies'} from {backup_dir}?", yes, output)
    n = apply_restore(plan, refuse_if_running=refuse)
    if not table:
        document(n)
        return
    typer.echo(f"restored {n} entr{'y' if n == 1 else 'ies'} from {plan.backup_dir}")


@upgrade_app.command("wait-master")
@connected(
    protocol=False,
    timeout=300.0,
    timeout_help="give up after this many seconds (exit 8): the whole command's deadline",
)
@printing()
def wait_master_cmd(
    conn: Conn,
    broker_name: str = typer.Option(..., "-b", "--broker-name", help="The broker set's name."),
    broker_id: int = typer.Option(..., "--broker-id", help="The broker's id (its brokerIdentity)."),
    output: Output = output_option(),
) -> None:
    """Block until the controller reports the broker as master; a progress line on stderr."""
    from mqctl.upgrade.wait import wait_master  # lazy: start-up

    tty = sys.stderr.isatty()
    state = {"last": ""}

    def progress(line: str) -> None:
        if tty:
            sys.stderr.write("\r\x1b[K" + line)
        elif line.split(" [")[0] != state["last"]:
            sys.stderr.write(line + "\n")  # not a terminal: one line per change
        state["last"] = line.split(" [")[0]
        sys.stderr.flush()

    try:
        with conn.client(timeout=max(0.5, min(5.0, conn.timeout))) as client:
            res = wait_master(client, broker_name, broker_id, conn.timeout, progress=progress)
    finally:
        if tty:
            sys.stderr.write("\n")
    if output is not Output.table:
        echo_doc(
            output,
            {
                "version": 1,
                "brokerName": res.broker_name,
                "brokerId": res.broker_id,
                "masterEpoch": res.master_epoch,
                "masterAddress": res.master_address,
                "syncStateSet": list(res.sync_state_set),
                "waitedSeconds": round(res.waited, 3),
            },
        )
        return
    typer.echo(
        f"{res.broker_name}: brokerId {res.broker_id} is master, epoch {res.master_epoch}, "
        f"{res.master_address}, SyncStateSet {list(res.sync_state_set)}"
    )
