"""`mqctl metadata ...`: what a broker set's replicas hold besides messages (topics, subscription groups,
consumer and delay offsets), and putting back what the new master lacks. The table of a drift document
(`print_drift`) is also `mqctl recover compare --metadata`'s."""

from __future__ import annotations

from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.common import confirm, console, echo_doc, output_option
from mqctl.cli.render import Output

metadata_app = sub_app("metadata", "Compare and copy broker metadata (topics, groups, offsets) across a set.")

TABLE_ROWS = 50   # differences listed per kind in a table; -o json has them all


def drift_verdict(doc: dict[str, Any]) -> Exception | None:
    """Exit 7 when any replica's metadata differs from another's (docs/codes.md)."""
    from mqctl.errors import UnhealthyError

    if not doc["differs"]:
        return None
    sets = [s["brokerSet"] or "(no brokerIdentity)" for s in doc["brokerSets"] if s["differs"]]
    return UnhealthyError(f"the replicas' metadata differ in {', '.join(sets)}")


def print_drift(doc: dict[str, Any]) -> None:
    import json

    from rich.table import Table

    con = console()
    for s in doc["brokerSets"]:
        t = Table(title=f"metadata of {s['brokerSet'] or '(no brokerIdentity)'}")
        for col in ("replica", "brokerId", "topics", "groups", "offsets", "topicsMissing", "groupsMissing",
                    "offsetsMissing", "offsetsBehind", "messagesBehind", "delayBehind"):
            t.add_column(col, justify="left" if col == "replica" else "right")
        counts = ("topics", "groups", "offsets", "topicsMissing", "groupsMissing", "offsetsMissing",
                  "offsetsBehind", "messagesBehind", "delayBehind")
        for r in s["replicas"]:
            t.add_row(r["replica"], "-" if r["brokerId"] is None else str(r["brokerId"]),
                      *(str(r[k]) for k in counts))
        con.print(t)
        for r in s["replicas"]:
            for name, src in r["files"].items():
                if src.get("fallback"):
                    con.print(f"{r['replica']}: {name}: read {src['file'] or 'nothing'} ({src['fallback']})",
                              markup=False, soft_wrap=True)
        if len(s["replicas"]) < 2:
            con.print("only one replica of this set was given: nothing to compare it with")
        for kind, key in (("topics", "topic"), ("subscriptionGroups", "group")):
            rows = s[kind]
            for e in rows[:TABLE_ROWS]:
                what = [f"missing from {', '.join(e['missingFrom'])}"] if e["missingFrom"] else []
                what += [f"{f} " + " / ".join(f"{r}={json.dumps(v, separators=(',', ':'))}"
                                              for r, v in vals.items())
                         for f, vals in e["differs"].items()]
                con.print(f"{key} {e[key]}: {'; '.join(what)}", markup=False, soft_wrap=True)
            if len(rows) > TABLE_ROWS:
                con.print(f"... {len(rows) - TABLE_ROWS} more {kind} (-o json lists them all)")
        for kind in ("consumerOffsets", "delayOffsets"):
            rows = s[kind]
            for e in rows[:TABLE_ROWS]:
                where = (f"offset {e['topic']}@{e['group']} queue {e['queueId']}" if kind == "consumerOffsets"
                         else f"delay level {e['level']}")
                vals = " / ".join(f"{r}={'-' if v is None else v}" for r, v in e["offsets"].items())
                behind = ", ".join(f"{r} {n} behind" for r, n in e["behind"].items())
                con.print(f"{where}: {vals}" + (f" ({behind})" if behind else ""), markup=False,
                          soft_wrap=True)
            if len(rows) > TABLE_ROWS:
                con.print(f"... {len(rows) - TABLE_ROWS} more {kind} (-o json lists them all)")
        if not s["differs"] and len(s["replicas"]) > 1:
            con.print("the replicas hold the same topics, groups, consumer and delay offsets")


def _what(value: str) -> list[str]:
    from mqctl.errors import UsageError
    from mqctl.recover.metadata import WHAT

    what = [w.strip() for w in value.split(",") if w.strip()]
    bad = [w for w in what if w not in WHAT]
    if bad or not what:
        raise UsageError(f"--what {value!r}: expected a comma-separated list of {', '.join(WHAT)}")
    return what


@metadata_app.command("sync")
def sync_cmd(
    src: str = typer.Option(..., "--from", metavar="STORE",
                            help="The replica that has the metadata (its store root; read only)."),
    dst: str = typer.Option(..., "--to", metavar="STORE",
                            help="The replica that lacks it (its store root, broker stopped)."),
    what: str = typer.Option("topics,groups,offsets", "--what", metavar="LIST",
                             help="What to copy: topics, groups, offsets, delay (comma-separated)."),
    allow_rewind: bool = typer.Option(False, "--allow-rewind",
                                      help="Also move back an offset the target holds further."),
    backup_dir: str | None = typer.Option(None, "--backup-dir", metavar="DIR",
                                          help="Where to save the files replaced (default: beside it)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Show what would be copied, change nothing."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    output: Output = output_option(),
) -> None:
    """Put back what the target replica lacks: topics, groups, offsets (offline; never removes anything)."""
    from mqctl.recover.metadata_sync import apply_sync, prepare_sync

    kinds = _what(what)
    prep = prepare_sync(src, dst, kinds, allow_rewind=allow_rewind)
    doc: dict[str, Any] = {"from": src, "to": dst, "what": kinds, "dryRun": dry_run, **prep.plan.to_dict(),
                           "filesWritten": [], "backupDir": None}
    if not dry_run and not prep.plan.empty:
        if not yes:
            confirm(f"Write {len(prep.plan.topics_added)} topics, {len(prep.plan.groups_added)} groups, "
                    f"{len(prep.plan.offsets_set)} offsets and {len(prep.plan.delay_set)} delay offsets into "
                    f"{dst}?", output)
        written, bdir = apply_sync(prep, backup_dir)
        doc["filesWritten"], doc["backupDir"] = written, bdir
    if output is not Output.table:
        echo_doc(output, doc)
        return
    verb = "would add" if dry_run else "added"
    for name in doc["topicsAdded"]:
        typer.echo(f"{verb} topic {name}")
    for name in doc["groupsAdded"]:
        typer.echo(f"{verb} group {name}")
    verb = "would set" if dry_run else "set"
    for o in doc["offsetsSet"]:
        typer.echo(f"{verb} offset {o['topic']}@{o['group']} queue {o['queueId']}: "
                   f"{'-' if o['from'] is None else o['from']} -> {o['to']}")
    for o in doc["delayOffsetsSet"]:
        typer.echo(f"{verb} delay level {o['level']}: {'-' if o['from'] is None else o['from']} -> {o['to']}")
    for k in doc["kept"]:
        typer.echo(f"kept {k['kind']} {k['name']}: {k['why']}")
    if prep.plan.empty:
        typer.echo(f"{dst}: nothing to copy from {src}")
    for f in doc["filesWritten"]:
        typer.echo(f"wrote {f}")
    if doc["backupDir"]:
        typer.echo(f"backup: {doc['backupDir']}")
