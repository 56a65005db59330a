"""`mqctl metadata ...`: what a broker set's replicas hold besides messages (topics, subscription groups,
consumer and delay offsets), and putting back what the new master lacks. The output of a drift
(`emit_drift`) is also `mqctl recover compare --metadata`'s."""

from __future__ import annotations

import os
from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.admin_cmd import Conn, _broker_sets, _cluster_info, _one_of, connected
from mqctl.cli.common import (
    backup_dir_option,
    broker_name_option,
    cluster_option,
    confirm,
    console,
    dry_run_option,
    echo_doc,
    namesrv_option,
    output_option,
    printing,
    show_doc,
    yes_option,
)
from mqctl.cli.render import Output
from mqctl.errors import NotFoundError, UnhealthyError, UsageError

metadata_app = sub_app("metadata", "Compare and copy broker metadata (topics, groups, offsets) across a set.")

TABLE_ROWS = 50  # differences listed per kind in a table; -o json has them all


def emit_drift(per_set: list[dict[str, Any]], output: Output) -> None:
    """Print the drift of each broker set (mqctl.recover.metadata.compare); exit 7 when any replica's
    metadata differs from another's (docs/codes.md)."""

    doc: dict[str, Any] = {"brokerSets": per_set, "differs": any(s["differs"] for s in per_set)}
    sets = [s["brokerSet"] or "(no brokerIdentity)" for s in per_set if s["differs"]]
    problem = UnhealthyError(f"the replicas' metadata differ in {', '.join(sets)}") if sets else None
    show_doc(output, doc, _print_drift, problem)


def _print_drift(doc: dict[str, Any]) -> None:
    import json  # lazy: start-up

    from rich.table import Table  # lazy: rich

    con = console()
    for s in doc["brokerSets"]:
        t = Table(title=f"metadata of {s['brokerSet'] or '(no brokerIdentity)'}")
        counts = (
            "topics",
            "groups",
            "offsets",
            "topicsMissing",
            "groupsMissing",
            "offsetsMissing",
            "offsetsBehind",
            "messagesBehind",
            "delayBehind",
        )
        for col in ("replica", "brokerId", *counts):
            t.add_column(col, justify="left" if col == "replica" else "right")
        for r in s["replicas"]:
            t.add_row(
                r["replica"],
                "-" if r["brokerId"] is None else str(r["brokerId"]),
                *(str(r[k]) for k in counts),
            )
        con.print(t)
        for r in s["replicas"]:
            for name, src in r["files"].items():
                if src.get("fallback"):
                    con.print(
                        f"{r['replica']}: {name}: read {src['file'] or 'nothing'} ({src['fallback']})",
                        markup=False,
                        soft_wrap=True,
                    )
        if len(s["replicas"]) < 2:
            con.print("only one replica of this set was given: nothing to compare it with")
        for kind, key in (("topics", "topic"), ("subscriptionGroups", "group")):
            rows = s[kind]
            for e in rows[:TABLE_ROWS]:
                what = [f"missing from {', '.join(e['missingFrom'])}"] if e["missingFrom"] else []
                what += [
                    f"{f} "
                    + " / ".join(f"{r}={json.dumps(v, separators=(',', ':'))}" for r, v in vals.items())
                    for f, vals in e["differs"].items()
                ]
                con.print(f"{key} {e[key]}: {'; '.join(what)}", markup=False, soft_wrap=True)
            if len(rows) > TABLE_ROWS:
                con.print(f"... {len(rows) - TABLE_ROWS} more {kind} (-o json lists them all)")
        for kind in ("consumerOffsets", "delayOffsets"):
            rows = s[kind]
            for e in rows[:TABLE_ROWS]:
                where = (
                    f"offset {e['topic']}@{e['group']} queue {e['queueId']}"
                    if kind == "consumerOffsets"
                    else f"delay level {e['level']}"
                )
                vals = " / ".join(f"{r}={'-' if v is None else v}" for r, v in e["offsets"].items())
                behind = ", ".join(f"{r} {n} behind" for r, n in e["behind"].items())
                con.print(
                    f"{where}: {vals}" + (f" ({behind})" if behind else ""), markup=False, soft_wrap=True
                )
            if len(rows) > TABLE_ROWS:
                con.print(f"... {len(rows) - TABLE_ROWS} more {kind} (-o json lists them all)")
        if not s["differs"] and len(s["replicas"]) > 1:
            con.print("the replicas hold the same topics, groups, consumer and delay offsets")


def _what(value: str) -> list[str]:
    from mqctl.recover.metadata import WHAT  # lazy: start-up

    what = [w.strip() for w in value.split(",") if w.strip()]
    bad = [w for w in what if w not in WHAT]
    if bad or not what:
        raise UsageError(f"--what {value!r}: expected a comma-separated list of {', '.join(WHAT)}")
    return what


def _is_address(value: str) -> bool:
    """HOST:PORT of a live broker rather than a store directory."""

    host, sep, port = value.rpartition(":")
    return bool(sep and host and port.isdigit()) and not os.path.isdir(value)


def _broker_connect(conn: Conn, brokers: list[str]) -> Any:
    """Connections to brokers with the command's TLS and ACL options (the remoting client's)."""
    return conn.remoting(brokers, min(conn.timeout, 10.0), brokers=True)


@metadata_app.command("diff")
@connected()
@printing()
def diff_cmd(
    conn: Conn,
    broker_name: str = broker_name_option("broker set name(s), comma separated (default: every set)"),
    cluster: str = cluster_option("every broker set of this cluster"),
    namesrv: str = namesrv_option(
        "take the brokers from these name servers (default: the alive "
        "replicas of each set, from the controller -a)"
    ),
    output: Output = output_option(),
) -> None:
    """What each live replica has that another lacks: topics, groups, consumer and delay offsets (exit 7)."""
    from mqctl.admin.brokermeta import live_drift  # lazy: start-up

    _one_of(broker_name, cluster)
    sets: dict[str, list[tuple[int, str]]]
    if namesrv:
        info = _cluster_info(conn, namesrv)
        names = (
            [n.strip() for n in broker_name.split(",") if n.strip()]
            if broker_name
            else info.broker_names(cluster)
            if cluster
            else sorted(info.broker_addrs)
        )
        sets = {n: info.replicas(n) for n in names}
    else:
        with conn.client() as client:
            table = _broker_sets(client, broker_name, cluster)
        sets = {
            n: sorted(
                (r.broker_id, r.broker_address)
                for r in (*i.in_sync_replicas, *i.not_in_sync_replicas)
                if r.alive
            )
            for n, i in sorted(table.items())
        }
    missing = [n for n, reps in sets.items() if not reps]
    if missing or not sets:
        where = "the name server lists" if namesrv else "the controller knows"
        raise NotFoundError(f"{where} no live broker of {', '.join(missing) or cluster or 'any set'}")
    with _broker_connect(conn, [a for reps in sets.values() for _, a in reps]) as client:
        per_set = [
            live_drift(client.connection, name, reps, timeout=min(conn.timeout, 10.0))
            for name, reps in sets.items()
        ]
    emit_drift(per_set, output)


@metadata_app.command("sync")
@connected()
@printing()
def sync_cmd(
    conn: Conn,
    src: str = typer.Option(
        ...,
        "--from",
        metavar="STORE|BROKER",
        help="The replica that has the metadata: its store root (read only) or a live broker's HOST:PORT.",
    ),
    dst: str = typer.Option(
        ...,
        "--to",
        metavar="STORE|BROKER",
        help="The replica that lacks it: its store root (broker stopped), or a live "
        "broker's HOST:PORT (through its admin requests).",
    ),
    what: str = typer.Option(
        "topics,groups,offsets",
        "--what",
        metavar="LIST",
        help="What to copy: topics, groups, offsets, delay (comma-separated).",
    ),
    allow_rewind: bool = typer.Option(
        False, "--allow-rewind", help="Also move back an offset the target holds further."
    ),
    backup_dir: str | None = backup_dir_option("Where to save the files replaced (default: beside it)."),
    dry_run: bool = dry_run_option("Show what would be copied, change nothing."),
    yes: bool = yes_option(),
    output: Output = output_option(),
) -> None:
    """Put back what the target replica lacks: topics, groups, offsets; never removes anything."""
    kinds = _what(what)
    if _is_address(dst):
        _sync_online(conn, src, dst, kinds, allow_rewind, dry_run, yes, output)
        return
    from mqctl.recover.metadata_sync import apply_sync, prepare_sync  # lazy: start-up

    prep = prepare_sync(src, dst, kinds, allow_rewind=allow_rewind)
    doc: dict[str, Any] = {
        "from": src,
        "to": dst,
        "what": kinds,
        "dryRun": dry_run,
        **prep.plan.to_dict(),
        "filesWritten": [],
        "backupDir": None,
    }
    if not dry_run and not prep.plan.empty:
        if not yes:
            confirm(
                f"Write {len(prep.plan.topics_added)} topics, {len(prep.plan.groups_added)} groups, "
                f"{len(prep.plan.offsets_set)} offsets and {len(prep.plan.delay_set)} delay offsets into "
                f"{dst}?",
                output,
            )
        written, bdir = apply_sync(prep, backup_dir)
        doc["filesWritten"], doc["backupDir"] = written, bdir
    if output is not Output.table:
        echo_doc(output, doc)
        return
    _print_plan(doc, dry_run)
    if prep.plan.empty:
        typer.echo(f"{dst}: nothing to copy from {src}")
    for f in doc["filesWritten"]:
        typer.echo(f"wrote {f}")
    if doc["backupDir"]:
        typer.echo(f"backup: {doc['backupDir']}")


def _print_plan(doc: dict[str, Any], dry_run: bool) -> None:
    verb = "would add" if dry_run else "added"
    for name in doc["topicsAdded"]:
        typer.echo(f"{verb} topic {name}")
    for name in doc["groupsAdded"]:
        typer.echo(f"{verb} group {name}")
    verb = "would set" if dry_run else "set"
    for o in doc["offsetsSet"]:
        typer.echo(
            f"{verb} offset {o['topic']}@{o['group']} queue {o['queueId']}: "
            f"{'-' if o['from'] is None else o['from']} -> {o['to']}"
        )
    for o in doc["delayOffsetsSet"]:
        typer.echo(f"{verb} delay level {o['level']}: {'-' if o['from'] is None else o['from']} -> {o['to']}")
    for k in doc["kept"]:
        typer.echo(f"kept {k['kind']} {k['name']}: {k['why']}")


def _sync_online(
    conn: Conn,
    src: str,
    dst: str,
    kinds: list[str],
    allow_rewind: bool,
    dry_run: bool,
    yes: bool,
    output: Output,
) -> None:
    """The target is a live broker: its tables fetched, what it lacks sent as admin requests."""
    from mqctl.admin.brokermeta import fetch_replica, push_plan  # lazy: start-up
    from mqctl.recover.metadata import load_store, plan_sync  # lazy: start-up

    if "delay" in kinds:
        raise UsageError(
            "--what delay: no broker request sets a delay offset; copy it offline (the target's "
            "store, broker stopped)"
        )
    seconds = min(conn.timeout, 10.0)
    with _broker_connect(conn, [dst]) as client:
        source = (
            fetch_replica(client.connection, src, timeout=seconds) if _is_address(src) else load_store(src)
        )
        target = fetch_replica(client.connection, dst, timeout=seconds)
        plan = plan_sync(source, target, kinds, allow_rewind=allow_rewind)
        done: list[str] = []
        if not dry_run and not plan.empty:
            if not yes:
                confirm(
                    f"Send {len(plan.topics_added)} topics, {len(plan.groups_added)} groups and "
                    f"{len(plan.offsets_set)} offsets to the broker {dst}?",
                    output,
                )
            done = push_plan(client.connection, dst, plan, timeout=seconds)
    doc: dict[str, Any] = {
        "from": src,
        "to": dst,
        "what": kinds,
        "dryRun": dry_run,
        **plan.to_dict(),
        "done": done,
    }
    if output is not Output.table:
        echo_doc(output, doc)
        return
    _print_plan(doc, dry_run)
    if plan.empty:
        typer.echo(f"{dst}: nothing to copy from {src}")
