"""`mqctl recover guard` and `mqctl recover replay`: save what an unclean election would make a
restarting broker cut, and put it back (docs/recovery.md#guard-and-replay).

Only typer is imported here; the controller client, pyarrow and the remoting producer load inside the
commands.
"""

from __future__ import annotations

from typing import Any

import typer

from mqctl.cli.admin_cmd import Conn, connected
from mqctl.cli.common import console, echo_doc, human_size, output_option
from mqctl.cli.recover_cmd import recover_app
from mqctl.cli.render import Output


def _ask_master(conn: Conn) -> Any:
    """brokerName -> MasterView: GetReplicaInfo from the controller group, then the master's epoch
    entries and max offset (GET_BROKER_EPOCH_CACHE, or mqctl's Broker service over gRPC)."""
    from mqctl.cli.admin_cmd import _epoch_cache
    from mqctl.errors import MqctlError
    from mqctl.recover.guard import CannotDecide, MasterView

    def ask(name: str) -> MasterView:
        try:
            with conn.client() as client:
                ri = client.get_replica_info(name)
        except MqctlError as exc:
            raise CannotDecide(f"cannot decide: the controller group did not name the master of {name}: "
                               f"{exc}") from None
        if ri.master_broker_id is None or ri.master_broker_id < 0 or not ri.master_address:
            raise CannotDecide(f"cannot decide: broker set {name} has no master now (a broker starting as a "
                               f"slave of a later master may be truncated); start it when a master is "
                               f"elected, or with --allow-unverified")
        view = _epoch_cache(ri.master_address, conn)
        if view.error is not None or view.max_offset is None:
            raise CannotDecide(f"cannot decide: the master {ri.master_address} (brokerId "
                               f"{ri.master_broker_id}) did not give its epoch entries: "
                               f"{view.error or 'no maxOffset in its answer'}")
        return MasterView(ri.master_broker_id, ri.master_address, ri.master_epoch, list(view.entries),
                          view.max_offset, view.cluster_name, view.broker_name)

    return ask


@recover_app.command("guard")
@connected(timeout=5.0)
def guard_cmd(
    conn: Conn,
    store: str = typer.Argument(..., metavar="STORE", help="The broker's store root (storePathRootDir)."),
    out: str = typer.Option(None, "--out", envvar="MQCTL_GUARD_DIR", metavar="DIR",
                            help="Where salvages go (one directory per salvage, created whole or not at "
                                 "all); required when bytes would be lost."),
    broker_name: str = typer.Option(None, "-b", "--broker-name",
                                    help="The broker set (default: the store's brokerIdentity)."),
    namesrv: str = typer.Option(None, "-n", "--namesrvAddr", metavar="ADDRS",
                                help="Name servers, only for the replay command printed."),
    allow_unverified: bool = typer.Option(False, "--allow-unverified",
                                          help="When the guard cannot decide (controller or master "
                                               "unreachable, no master, store unreadable), let the broker "
                                               "start anyway: exit 13 (0 with --gate) instead of 11."),
    gate: bool = typer.Option(False, "--gate", help="Exit 0 whenever the broker may start (nothing to lose, "
                                                    "saved, unverified with --allow-unverified), for "
                                                    "ExecStartPre= and init containers; 11 and 12 stay."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Decide, say what would be saved, write nothing."),
    output: Output = output_option(),
) -> None:
    """Before a broker starts: would RocketMQ's AutoSwitchHAClient truncate its store? If so, save the
    tail first (Parquet, as `recover salvage`).

    Exit 0 nothing to lose, 10 saved (or already saved), 11 cannot decide (refused), 12 no room to
    save (refused), 13 cannot decide but --allow-unverified; with --gate 0 for 0, 10 and 13. The store
    is only read."""
    from mqctl.errors import MqctlError
    from mqctl.recover.guard import guard

    hint = f" -n '{namesrv}'" if namesrv else " -n NAMESRV"
    try:
        res = guard(store, out=out, ask_master=_ask_master(conn), broker_name=broker_name, dry_run=dry_run,
                    allow_unverified=allow_unverified, replay_hint=hint)
    except MqctlError as exc:
        if output is not Output.table:
            echo_doc(output, {"store": store, "outcome": "refused"}, error=exc)
        raise
    doc = res.to_dict()
    if output is not Output.table:
        echo_doc(output, doc)
    else:
        con = console()
        con.print(f"{doc['store']}: {doc['outcome']}: {doc['reason']}", markup=False)
        if doc["consistentPoint"] is not None:
            con.print(f"  consistent point {doc['consistentPoint']}, max offset {doc['maxOffset']}, "
                      f"bytes to lose {doc['bytesToLose']} ({human_size(doc['bytesToLose'])})", markup=False)
        if doc["salvage"]:
            con.print(f"  salvage: {doc['salvage']} ({doc['messages']} messages, digest {doc['digest']})",
                      markup=False)
        if doc["replay"]:
            con.print(f"  replay: {doc['replay']}", markup=False)
    code = 0 if gate else res.exit_code
    if code:
        raise typer.Exit(code)
