"""`mqctl snapshot save|restore`: the controller group's state to a checksummed file, and a new
group's data directories seeded from it (mqctl.admin.snapshot)."""

from __future__ import annotations

from typing import Any

import typer

from mqctl import __version__
from mqctl.cli import render, sub_app
from mqctl.cli.admin_cmd import Conn, connected
from mqctl.cli.common import dry_run_option, no_color_option, output_option
from mqctl.cli.render import Output

snapshot_app = sub_app("snapshot", "Save the controller group's state to a file; seed a new group from it.")


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "format",
        "createdAt",
        "source",
        "mqctlVersion",
        "appliedIndex",
        "term",
        "group",
        "groupId",
        "featureLevel",
        "recordVersions",
        "stateHash",
        "checksum",
    )
    return {k: doc[k] for k in keys}


@snapshot_app.command("save")
@connected(protocol=False)
def snapshot_save(
    conn: Conn,
    file: str = typer.Argument(
        ..., help="where to write the snapshot (an existing file is kept as FILE.bak-TIME)"
    ),
    dry_run: bool = dry_run_option("read the state and show what would be written"),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Save the controller group's state, read on the leader after a read barrier, with its applied
    index, feature level and record versions, checksummed."""
    from mqctl.admin import snapshot  # lazy: start-up

    with conn.client() as client:
        answer = client.get_snapshot()
    doc = snapshot.build(answer, ";".join(conn.addresses), __version__)
    backup = None if dry_run else snapshot.write(doc, file)
    sets = len(doc["state"].get("broker_sets", {}))
    message = (
        f"{'would write' if dry_run else 'wrote'} {file}: applied index {doc['appliedIndex']}, "
        f"{sets} broker set(s), state hash {doc['stateHash'][:12]}"
    )
    if backup:
        message += f"; the previous file is {backup}"
    out = {
        "version": 1,
        "file": file,
        "dryRun": dry_run,
        "backup": backup,
        **_summary(doc),
        "brokerSets": sets,
        "message": message,
    }
    render.emit(out, output, render.message_table, no_color=no_color)


@snapshot_app.command("restore")
def snapshot_restore(
    file: str = typer.Argument(..., help="a file written by `mqctl snapshot save`"),
    data_dir: str = typer.Option(
        ..., "--data-dir", help="the new node's data directory (an existing one is moved to DIR.backup-TIME)"
    ),
    raft: str = typer.Option("127.0.0.1:9880", "--raft", help="the new node's Raft HOST:PORT (its --raft)"),
    peers: str = typer.Option(
        None,
        "--peers",
        help="the other new nodes' Raft HOST:PORT,... (their "
        "--peers); restore the same file for each of them",
    ),
    group_id: str = typer.Option(
        None,
        "--group-id",
        help="a new controller group id (default: the "
        "saved group's); the same for every node of the new group",
    ),
    dry_run: bool = dry_run_option("check the file and show the plan; write nothing"),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """Seed a data directory of a new controller group from a snapshot file: `mqctl serve` on it
    starts from the saved state and index. Refuses a corrupt file (exit 4) or one newer than this
    mqctl (exit 2); a data directory in use is refused, an existing one moved aside."""
    # lazy: start-up
    from mqctl.address import parse_address
    from mqctl.admin import snapshot

    parse_address(raft, "--raft address")
    others = [p.strip() for p in (peers or "").replace(";", ",").split(",") if p.strip()]
    for peer in others:
        parse_address(peer, "--peers entry")
    doc = snapshot.read(file)
    plan = snapshot.restore_plan(doc, data_dir, raft, others, group_id)
    if not dry_run:
        snapshot.restore(plan)
    message = (
        f"{'would seed' if dry_run else 'seeded'} {data_dir} with {file} (applied index "
        f"{doc['appliedIndex']}, {len(plan['brokerSets'])} broker set(s), group id {plan['groupId']}, "
        f"members {', '.join(plan['members'])})"
    )
    if plan["backup"]:
        message += f"; the old directory {'would move' if dry_run else 'moved'} to {plan['backup']}"
    message += f"\nstart it with: {plan['start']}"
    out = {k: v for k, v in plan.items() if k != "file"}
    out.update(dryRun=dry_run, snapshot=_summary(doc), message=message)
    render.emit(out, output, render.message_table, no_color=no_color)
