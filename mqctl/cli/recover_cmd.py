"""`mqctl recover ...`: offline store inspection and manual recovery.

Only typer is imported at module level; the library (mqctl.recover, mqctl.store), json, rich and
sqlite_utils are imported inside the commands so `mqctl --help` stays fast.
"""

from __future__ import annotations

import os
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.common import (
    backup_dir_option,
    confirm,
    console,
    dry_run_option,
    echo_doc,
    human_size,
    output_option,
    print_line,
    printing,
    show_doc,
    store_option,
    stores_argument,
    yes_option,
)
from mqctl.cli.metadata_cmd import emit_drift
from mqctl.cli.render import Output, cells
from mqctl.errors import UsageError

recover_app = sub_app(
    "recover", "Inspect broker store directories, plan a manual recovery, reseed a lost controller."
)


@recover_app.command("inspect")
@printing(verbose=True)
def inspect_cmd(
    stores: list[str] = stores_argument("Store root directories (storePathRootDir)."),
    deep: bool = typer.Option(
        False, "--deep", help="Verify every record's CRC in every file, not only the last three files."
    ),
    output: Output = output_option(),
) -> None:
    """Identity, state (clean, dirty, empty), epochs, max offset, confirm offset, files and problems."""
    # lazy: start-up
    from mqctl.recover.inspect import failures_error, inspect_stores, no_store_error

    results = inspect_stores(stores, deep=deep)
    problem = failures_error(results) or no_store_error(results)
    show_doc(output, {"stores": [r.to_dict() for r in results]}, _print_inspect, problem)


def _print_inspect(doc: dict[str, Any]) -> None:
    from rich.table import Table  # lazy: rich

    from mqctl.recover.inspect import NO_STORE  # lazy: start-up

    # a path that does not exist or holds no store is the error line only, not a row of dashes
    reports = [
        r
        for r in doc["stores"]
        if r["state"] != NO_STORE and ("error" not in r or os.path.lexists(r["store"]))
    ]
    if not reports:
        return
    con = console()
    t = Table(title="stores")
    for col in (
        "store",
        "state",
        "cluster/broker#id",
        "lastEpoch",
        "minOffset",
        "maxOffset",
        "confirmOffset",
        "checkpoint",
        "files",
        "size",
        "problems",
    ):
        t.add_column(
            col,
            justify="right"
            if col in ("lastEpoch", "minOffset", "maxOffset", "confirmOffset", "files", "problems")
            else "left",
        )
    for r in reports:
        if "error" in r:
            t.add_row(r["store"], "[bold red]ERROR[/]", *["-"] * 8, "1")
            continue
        ident = f"{r['clusterName']}/{r['brokerName']}#{r['brokerId']}" if r["clusterName"] else "-"
        cpm = {True: "ok", False: "MISMATCH", None: "-"}[r["checkpointMatches"]]
        t.add_row(
            r["store"],
            r["state"],
            ident,
            str(r["lastEpoch"]),
            str(r["minOffset"]),
            str(r["maxOffset"]),
            "-" if r["confirmOffset"] is None else str(r["confirmOffset"]),
            cpm,
            str(r["fileCount"]),
            human_size(r["totalBytes"]),
            str(len(r["problems"])),
        )
    con.print(t)
    for r in reports:
        if "error" in r:
            con.print(f"{r['store']}: error: {r['error']}", markup=False)
            continue
        if r["epochs"]:
            et = Table(title=f"epochs of {r['store']}")
            for col in ("epoch", "startOffset", "endOffset"):
                et.add_column(col, justify="right")
            for e in r["epochs"]:
                et.add_row(str(e["epoch"]), str(e["startOffset"]), str(e["endOffset"]))
            con.print(et)
        for why in r["dirtyReasons"]:
            con.print(f"{r['store']}: dirty: {why}")
        for p in r["problems"]:
            con.print(f"{r['store']}: problem: {p}")


@recover_app.command("compare")
@printing(verbose=True)
def compare_cmd(
    stores: list[str] = stores_argument("Two store roots; with --metadata two or more."),
    metadata: bool = typer.Option(
        False,
        "--metadata",
        help="Compare topics, subscription groups, consumer and delay offsets (the "
        "config/ files) within each broker set; exit 7 if they differ.",
    ),
    output: Output = output_option(),
) -> None:
    """Same broker set? Which is fresher, where their histories part, bytes beyond, split brain; with
    --metadata, what each replica has that another lacks."""
    if metadata:
        _compare_metadata(stores, output)
        return
    if len(stores) != 2:
        raise UsageError(f"recover compare takes two stores, got {len(stores)} (--metadata compares more)")
    # lazy: start-up
    from mqctl.recover.compare import Comparison, compare_reports
    from mqctl.recover.inspect import StoreReport, failures_error, inspect_stores

    store_a, store_b = stores
    results = inspect_stores([store_a, store_b])
    problem = failures_error(results)
    a, b = results
    if isinstance(a, StoreReport) and isinstance(b, StoreReport):
        c = compare_reports(a, b)
        doc = c.to_dict()
        rows: list[dict[str, Any]] = [
            {
                "store": r.path,
                "state": r.state,
                "lastEpoch": r.last_epoch,
                "maxOffset": r.max_offset,
                "bytesBeyond": beyond,
            }
            for r, beyond in ((a, c.a_bytes_beyond), (b, c.b_bytes_beyond))
        ]
    else:  # not comparable: each store's row, or its error row
        doc = Comparison(a.path, b.path, False).to_dict()
        doc.update(sameBrokerSet=None, consistentPoint=None, aBytesBeyond=None, bBytesBeyond=None)
        rows = [
            r.to_dict()
            if not isinstance(r, StoreReport)
            else {
                "store": r.path,
                "state": r.state,
                "lastEpoch": r.last_epoch,
                "maxOffset": r.max_offset,
                "bytesBeyond": None,
            }
            for r in (a, b)
        ]
    doc["aLastEpoch"], doc["aMaxOffset"] = rows[0].get("lastEpoch"), rows[0].get("maxOffset")
    doc["bLastEpoch"], doc["bMaxOffset"] = rows[1].get("lastEpoch"), rows[1].get("maxOffset")
    doc["stores"] = rows

    def print_table(doc: dict[str, Any]) -> None:
        _print_compare(doc, problem is not None)

    show_doc(output, doc, print_table, problem)


def _print_compare(doc: dict[str, Any], failed: bool) -> None:
    """The two stores' rows; then, unless one could not be inspected (`failed`), the verdict."""
    from rich.table import Table  # lazy: rich

    rows = doc["stores"]
    con = console()
    t = Table(title="compare")
    for col in ("", "store", "state", "lastEpoch", "maxOffset", "bytesBeyond"):
        t.add_column(col)
    for label, r in zip("AB", rows, strict=True):
        state = "[bold red]ERROR[/]" if "error" in r else r["state"]
        t.add_row(
            label,
            r["store"],
            state,
            *(("-" if r.get(k) is None else str(r[k])) for k in ("lastEpoch", "maxOffset", "bytesBeyond")),
        )
    con.print(t)
    for r in rows:
        if "error" in r:
            con.print(f"{r['store']}: error: {r['error']}", markup=False)
    if failed:
        return
    con.print(f"same broker set: {'yes' if doc['sameBrokerSet'] else 'no'}")
    for why in doc["reasons"]:
        con.print(f"  {why}")
    con.print(f"fresher: {doc['fresher'] or '-'}")
    con.print(f"consistent point: {doc['consistentPoint']}")
    for w in doc["warnings"]:
        con.print(f"[bold red]WARNING: {w}[/bold red]")


def _compare_metadata(stores: list[str], output: Output) -> None:
    from mqctl.recover.metadata import compare, group_by_set, load_store  # lazy: start-up

    if len(stores) < 2:
        raise UsageError("recover compare --metadata takes two or more stores")
    emit_drift([compare(rs) for rs in group_by_set(load_store(s) for s in stores).values()], output)


@recover_app.command("plan")
@printing(verbose=True)
def plan_cmd(
    stores: list[str] = stores_argument(),
    db: str | None = typer.Option(
        None, "--db", metavar="FILE", help="Also write stores, epochs and the plan into this SQLite file."
    ),
    deep: bool = typer.Option(False, "--deep", help="Verify every record's CRC while inspecting."),
    output: Output = output_option(),
) -> None:
    """Group stores by broker set, pick each set's source, restart order, truncateTo and bytesToDrop."""
    # lazy: start-up
    from mqctl.recover.inspect import StoreReport, failures_error, inspect_stores
    from mqctl.recover.plan import make_plan

    results = inspect_stores(stores, deep=deep)
    problem = failures_error(results)
    reports = [r for r in results if isinstance(r, StoreReport)]
    plan = make_plan(reports)
    # a store that could not be inspected is unmatched, with its error as the reason
    plan["unmatched"] += [
        {"store": f.path, "state": f.state, "reason": f.error}
        for f in results
        if not isinstance(f, StoreReport)
    ]
    if db:
        from mqctl.recover.db import write_db  # lazy: start-up

        write_db(db, reports, plan)

    def print_table(plan: dict[str, Any]) -> None:
        _print_plan(plan, db)

    show_doc(output, plan, print_table, problem)


def _print_plan(plan: dict[str, Any], db: str | None) -> None:
    from rich.table import Table  # lazy: rich

    con = console()
    for s in plan["brokerSets"]:
        t = Table(
            title=f"{s['clusterName']}/{s['brokerName']}: source {s['source']} "
            f"({'clean' if s['sourceClean'] else 'NOT clean'})"
        )
        for col in (
            "order",
            "store",
            "brokerId",
            "state",
            "lastEpoch",
            "maxOffset",
            "truncateTo",
            "bytesToDrop",
        ):
            t.add_column(col, justify="left" if col in ("store", "state") else "right")
        for i, r in enumerate(s["replicas"], 1):
            t.add_row(
                str(i),
                *cells(r, "store", "brokerId", "state", "lastEpoch", "maxOffset"),
                "-" if r["truncateTo"] is None else str(r["truncateTo"]),
                str(r["bytesToDrop"]),
            )
        con.print(t)
        for w in s["warnings"]:
            con.print(f"[bold red]WARNING: {w}[/bold red]" if "SPLIT" in w else f"warning: {w}")
    for u in plan["unmatched"]:
        con.print(f"unmatched: {u['store']} ({u['state']}): {u['reason']}", markup=False)
    if db:
        con.print(f"inventory written to {db}")


@recover_app.command("dump")
@printing(verbose=True)
def dump_cmd(
    store: str = typer.Argument(..., metavar="STORE"),
    start: int | None = typer.Option(
        None, "--from", metavar="OFFSET", help="First record (a record boundary; default: the first)."
    ),
    to: int | None = typer.Option(
        None, "--to", metavar="OFFSET", help="Stop before the record at or past OFFSET."
    ),
    max_bytes: int | None = typer.Option(
        None, "--max-bytes", metavar="N", help="Stop after about N bytes of records."
    ),
    body: bool = typer.Option(
        False, "--body", help="Add each message body (UTF-8, undecodable bytes replaced)."
    ),
    output: Output = output_option(),
) -> None:
    """One line per commitlog record: offset, size, topic, queue, times, hosts, CRC, epoch (streams)."""
    from mqctl.recover.dump import dump_records  # lazy: start-up

    if to is not None and max_bytes is not None:
        raise UsageError("--to and --max-bytes: give one of them")
    if output is Output.yaml:
        raise UsageError("recover dump streams one line per record: -o table or -o json (JSON Lines)")
    for d in dump_records(store, start=start, to=to, max_bytes=max_bytes, body=body):
        if output is Output.json:
            print_line(d)
            continue
        ts = datetime.fromtimestamp(d["storeTimestamp"] / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        line = (
            f"{d['offset']} size={d['size']} topic={d['topic']} queue={d['queueId']} "
            f"queueOffset={d['queueOffset']} store={ts}Z born={d['bornHost']} stored={d['storeHost']} "
            f"crc={'ok' if d['crcOk'] else 'BAD'} epoch={'-' if d['epoch'] is None else d['epoch']}"
        )
        if body:
            line += f" body={d['body']!r}"
        sys.stdout.write(line + "\n")


@recover_app.command("mark-clean")
@printing()
def mark_clean_cmd(
    store: str = typer.Argument(..., metavar="STORE"),
    dry_run: bool = dry_run_option("Show the final signature, write nothing."),
    yes: bool = yes_option(),
    output: Output = output_option(),
) -> None:
    """Write the final signature that marks STORE as the one to restart from (manual recovery)."""
    from mqctl.recover.mark_clean import mark_clean  # lazy: start-up

    preview = mark_clean(store, dry_run=True)
    if not dry_run:
        if not yes:
            fin = preview["finalSignature"]
            confirm(f"Mark {store} clean at epoch {fin['lastEpoch']}, max offset {fin['maxOffset']}?", output)
        result = mark_clean(store, dry_run=False)
    else:
        result = preview
    if output is not Output.table:
        echo_doc(output, result)
        return
    fin = result["finalSignature"]
    verb = "would write" if dry_run else "wrote"
    typer.echo(
        f"{verb} {result['file']}: lastEpoch {fin['lastEpoch']} "
        f"(start {fin['lastEpochStartOffset']}), maxOffset {fin['maxOffset']}, "
        f"previous state {result['previousState']}"
    )
    for n in result["notes"]:
        typer.echo(f"note: {n}")


@recover_app.command("truncate")
@printing()
def truncate_cmd(
    store: str = typer.Argument(..., metavar="STORE"),
    to: int = typer.Option(..., "--to", metavar="OFFSET", help="Record boundary to cut the commitlog at."),
    backup_dir: str | None = backup_dir_option("Where to save what is removed (default: beside the store)."),
    dry_run: bool = dry_run_option("Show what would be removed, change nothing."),
    yes: bool = yes_option(),
    output: Output = output_option(),
) -> None:
    """Cut the commitlog at OFFSET and correct the epoch file like a slave, after a backup."""
    # lazy: start-up
    from mqctl.recover.truncate import apply_truncate, default_backup_dir, plan_truncate
    from mqctl.store.abort import is_locked

    if is_locked(store):
        raise UsageError(f"{store}/lock: held by another process (is the broker running?); stop it first")
    plan = plan_truncate(store, to)
    doc: dict[str, Any] = {**plan.to_dict(), "dryRun": dry_run, "backupDir": None}
    if not dry_run and not plan.nothing_to_do:
        bdir = backup_dir or str(default_backup_dir(store))
        if not yes:
            confirm(
                f"Cut {store} at {to}, dropping {plan.bytes_to_drop} bytes ({plan.records} records); "
                f"backup to {bdir}?",
                output,
            )
        apply_truncate(plan, bdir)
        doc["backupDir"] = bdir
    if output is not Output.table:
        echo_doc(output, doc)
        return
    if plan.nothing_to_do:
        typer.echo(f"{store}: nothing to truncate at {to} (max offset {plan.max_offset})")
        return
    verb = "would drop" if dry_run else "dropped"
    typer.echo(
        f"{store}: {verb} {plan.bytes_to_drop} bytes ({plan.records} records) from {to} to {plan.max_offset}"
    )
    typer.echo(f"epochs: {', '.join(doc['epochsBefore']) or '-'} -> {', '.join(doc['epochsAfter']) or '-'}")
    if plan.confirm_before != plan.confirm_after:
        typer.echo(f"confirmPhyOffset: {plan.confirm_before} -> {plan.confirm_after}")
    if doc["backupDir"]:
        typer.echo(f"backup: {doc['backupDir']}")


@recover_app.command("reseed")
@printing()
def reseed_cmd(
    stores: list[str] = store_option(
        "a broker's store root directory (storePathRootDir); repeat it for every replica there is",
        default=...,
    ),
    data_dir: str = typer.Option(
        ...,
        "--data-dir",
        metavar="DIR",
        help="the new controller node's data directory (an existing one is moved to DIR.backup-TIME)",
    ),
    raft: str = typer.Option("127.0.0.1:9880", "--raft", help="the new node's Raft HOST:PORT (its --raft)"),
    peers: str | None = typer.Option(
        None,
        "--peers",
        help="the other new nodes' Raft HOST:PORT,...; reseed "
        "each of them from the same stores with the same --group-id",
    ),
    group_id: str | None = typer.Option(
        None,
        "--group-id",
        help="the new controller group's id (default: a new one, printed; give it to the other nodes)",
    ),
    group: str = typer.Option(
        "mqctl", "--group", help="the controller group name `mqctl serve --group` will use"
    ),
    dry_run: bool = dry_run_option("Show the plan, write nothing."),
    output: Output = output_option(),
) -> None:
    """Rebuild a lost controller's state from the brokers' store directories: broker sets, ids,
    masterEpoch from the epoch files, the freshest replicas as master candidates. Shows the plan,
    then seeds DIR; `mqctl serve --data-dir DIR` starts from it and elects when the brokers return."""

    # lazy: start-up
    from mqctl.address import parse_address
    from mqctl.admin import snapshot

    # lazy: start-up
    from mqctl.recover.inspect import StoreReport, failures_error, inspect_stores
    from mqctl.recover.reseed import reseed_plan

    parse_address(raft, "--raft address")
    others = [p.strip() for p in (peers or "").replace(";", ",").split(",") if p.strip()]
    for peer in others:
        parse_address(peer, "--peers entry")
    results = inspect_stores(stores)
    problem = failures_error(results)
    if problem is not None:
        raise problem
    gid = group_id or uuid.uuid4().hex
    plan = reseed_plan([r for r in results if isinstance(r, StoreReport)], gid, group)
    if plan["conflicts"]:
        raise UsageError("; ".join(plan["conflicts"]) + "; nothing was written")
    if not plan["brokerSets"]:
        raise UsageError("no store names a broker set (brokerIdentity); nothing was written")
    seed = {"state": plan.pop("state"), "groupId": gid, "appliedIndex": 2, "featureLevel": 1}
    target = snapshot.restore_plan(seed, data_dir, raft, others, gid)
    if not dry_run:
        snapshot.restore(target)
    doc = {**{k: v for k, v in target.items() if k != "file"}, "dryRun": dry_run, **plan}

    def print_table(doc: dict[str, Any]) -> None:
        from rich.table import Table  # lazy: rich

        con = console()
        for s in plan["brokerSets"]:
            t = Table(
                title=f"{s['clusterName']}/{s['brokerName']}: masterEpoch {s['masterEpoch']}, master "
                f"candidates {', '.join(map(str, s['masterCandidates']))}"
            )
            for col in ("brokerId", "store", "state", "lastEpoch", "maxOffset", "candidate"):
                t.add_column(col, justify="left" if col in ("store", "state", "candidate") else "right")
            for r in s["replicas"]:
                t.add_row(
                    *cells(r, "brokerId", "store", "state", "lastEpoch", "maxOffset"),
                    "yes" if r["candidate"] else "",
                )
            con.print(t)
        for u in plan["unmatched"]:
            con.print(f"skipped: {u['store']} ({u['state']}): {u['reason']}", markup=False)
        verb = "would seed" if dry_run else "seeded"
        con.print(
            f"{verb} {data_dir}: {len(plan['brokerSets'])} broker set(s), group id {gid}, members "
            f"{', '.join(target['members'])}",
            markup=False,
        )
        if target["backup"]:
            moved = "would move" if dry_run else "moved"
            con.print(f"the old directory {moved} to {target['backup']}", markup=False)
        con.print(f"start it with: {target['start']}", markup=False)

    show_doc(output, doc, print_table)
