"""`mqctl recover guard` and `mqctl recover replay`: save what an unclean election would make a
restarting broker cut, and put it back (docs/recovery.md, "Guard and replay").

Only typer is imported here; the controller client, pyarrow and the remoting producer load inside the
commands.
"""

from __future__ import annotations

from typing import Any

import typer

from mqctl.cli.admin_cmd import Conn, _epoch_cache, connected
from mqctl.cli.common import (
    console,
    dry_run_option,
    echo_doc,
    engine_option,
    env_option,
    human_size,
    namesrv_option,
    output_option,
    printing,
    show_doc,
    spark_master_option,
)
from mqctl.cli.recover_cmd import recover_app
from mqctl.cli.render import Output
from mqctl.errors import MqctlError, UsageError


def _ask_master(conn: Conn) -> Any:
    """brokerName -> MasterView: GetReplicaInfo from the controller group, then the master's epoch
    entries and max offset (GET_BROKER_EPOCH_CACHE, or mqctl's Broker service over gRPC)."""
    from mqctl.pipeline.guard import CannotDecide, MasterView  # lazy: start-up

    def ask(name: str) -> MasterView:
        try:
            with conn.client() as client:
                ri = client.get_replica_info(name)
        except MqctlError as exc:
            raise CannotDecide(
                f"cannot decide: the controller group did not name the master of {name}: {exc}"
            ) from None
        if ri.master_broker_id is None or ri.master_broker_id < 0 or not ri.master_address:
            raise CannotDecide(
                f"cannot decide: broker set {name} has no master now (a broker starting as a "
                f"slave of a later master may be truncated); start it when a master is "
                f"elected, or with --allow-unverified"
            )
        view = _epoch_cache(ri.master_address, conn)
        if view.error is not None or view.max_offset is None:
            raise CannotDecide(
                f"cannot decide: the master {ri.master_address} (brokerId "
                f"{ri.master_broker_id}) did not give its epoch entries: "
                f"{view.error or 'no maxOffset in its answer'}"
            )
        return MasterView(
            ri.master_broker_id,
            ri.master_address,
            ri.master_epoch,
            list(view.entries),
            view.max_offset,
            view.cluster_name,
            view.broker_name,
        )

    return ask


@recover_app.command("guard")
@connected(timeout=5.0)
@printing()
def guard_cmd(
    conn: Conn,
    store: str = typer.Argument(..., metavar="STORE", help="The broker's store root (storePathRootDir)."),
    out: str = typer.Option(
        None,
        "--out",
        envvar="MQCTL_GUARD_DIR",
        metavar="DIR",
        help="Where salvages go (one directory per salvage, created whole or not at "
        "all); required when bytes would be lost.",
    ),
    broker_name: str = typer.Option(
        None, "-b", "--broker-name", help="The broker set (default: the store's brokerIdentity)."
    ),
    namesrv: str = namesrv_option("Name servers, only for the replay command printed."),
    allow_unverified: bool = typer.Option(
        False,
        "--allow-unverified",
        help="When the guard cannot decide (controller or master "
        "unreachable, no master, store unreadable), let the broker "
        "start anyway: exit 13 (0 with --gate) instead of 11.",
    ),
    gate: bool = typer.Option(
        False,
        "--gate",
        help="Exit 0 whenever the broker may start (nothing to lose, "
        "saved, unverified with --allow-unverified), for "
        "ExecStartPre= and init containers; 11 and 12 stay.",
    ),
    dry_run: bool = dry_run_option("Decide, say what would be saved, write nothing."),
    output: Output = output_option(),
) -> None:
    """Before a broker starts: would RocketMQ's AutoSwitchHAClient truncate its store? If so, save the
    tail first (Parquet, as `recover salvage`).

    Exit 0 nothing to lose, 10 saved (or already saved), 11 cannot decide (refused), 12 no room to
    save (refused), 13 cannot decide but --allow-unverified; with --gate 0 for 0, 10 and 13. The store
    is only read."""
    from mqctl.pipeline.guard import guard  # lazy: start-up

    hint = f" -n '{namesrv}'" if namesrv else " -n NAMESRV"
    try:
        res = guard(
            store,
            out=out,
            ask_master=_ask_master(conn),
            broker_name=broker_name,
            dry_run=dry_run,
            allow_unverified=allow_unverified,
            replay_hint=hint,
        )
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
            con.print(
                f"  consistent point {doc['consistentPoint']}, max offset {doc['maxOffset']}, "
                f"bytes to lose {doc['bytesToLose']} ({human_size(doc['bytesToLose'])})",
                markup=False,
            )
        if doc["salvage"]:
            con.print(
                f"  salvage: {doc['salvage']} ({doc['messages']} messages, digest {doc['digest']})",
                markup=False,
            )
        if doc["replay"]:
            con.print(f"  replay: {doc['replay']}", markup=False)
    code = 0 if gate else res.exit_code
    if code:
        raise typer.Exit(code)


@recover_app.command("replay")
@printing()
def replay_cmd(
    salvage: str = typer.Argument(
        ..., metavar="SALVAGE_DIR", help="A salvage directory (of `recover guard` or `recover salvage`)."
    ),
    namesrv: str = namesrv_option(
        "Name servers 'h:p;h:p': the set's master and the topics' routes.", envvar="MQCTL_NAMESRV"
    ),
    broker_addr: str = typer.Option(
        None,
        "--broker-addr",
        metavar="ADDR",
        help="Or send to this broker (it must be of the salvage's set).",
    ),
    rate: float = typer.Option(None, "--rate", metavar="N", help="At most N messages per second."),
    dry_run: bool = dry_run_option(
        "Look the messages up and say what would be sent; send nothing, write no checkpoint."
    ),
    group: str = typer.Option("mqctl_replay", "--group", help="The producer group the messages are sent as."),
    include_crc_errors: bool = typer.Option(
        False,
        "--include-crc-errors",
        help="Also send messages whose body does not match its BODYCRC (crcOk false), as stored.",
    ),
    retries: int = typer.Option(
        10,
        "--retries",
        metavar="N",
        help="Times a message is sent again after SYSTEM_BUSY or FLOW_CONTROL "
        "(backoff 0.1 s, doubling, at most 5 s).",
    ),
    timeout: float = typer.Option(5.0, "--timeout", envvar="MQCTL_TIMEOUT", help="Seconds per request."),
    tls_ca: str = env_option("--tls-ca", "CA (PEM): speak TLS to the brokers and name servers (tls.enable)."),
    tls_cert: str = env_option("--tls-cert", "Client certificate."),
    tls_key: str = env_option("--tls-key", "Client private key (PEM)."),
    engine: str = engine_option(
        "local: in this process; spark: one task per part file, each with its "
        "own connection and checkpoint file; auto: Spark when --master is "
        "given."
    ),
    master: str | None = spark_master_option(
        "Spark master URL (default local[*]); the executors must reach "
        "the brokers and see SALVAGE_DIR at the same path."
    ),
    access_key: str = env_option(
        "--access-key", "RocketMQ ACL AccessKey: sign every request (AclClientRPCHook)."
    ),
    secret_key: str = env_option("--secret-key", "RocketMQ ACL SecretKey of --access-key."),
    output: Output = output_option(),
) -> None:
    """Publish a salvage's messages to their broker set (SEND_MESSAGE_V2), skipping those the cluster has
    (by UNIQ_KEY) and those an earlier run sent (its checkpoint).

    Exit 0 every message sent or present, 3 some failed or the lookups were refused (the report says
    why; a missing topic comes with the command that creates it), 2 the salvage is of another broker
    set, 4 the salvage is cut or corrupt, 6 a broker or name server does not answer (run again to go
    on)."""
    from mqctl.api import parse_addresses  # lazy: start-up
    from mqctl.pipeline.replay import ReplayOptions, ReplayRefused, replay  # lazy: start-up

    if bool(namesrv) == bool(broker_addr):
        raise UsageError("give the name servers (-n) or one broker (--broker-addr)")
    if rate is not None and rate <= 0:
        raise UsageError(f"--rate must be positive, got {rate}")
    if timeout <= 0:
        raise UsageError(f"--timeout must be positive, got {timeout}")
    if retries < 0:
        raise UsageError(f"--retries must be 0 or more, got {retries}")
    if bool(access_key) != bool(secret_key):
        raise UsageError("--access-key and --secret-key go together (MQCTL_ACCESS_KEY, MQCTL_SECRET_KEY)")
    if engine not in ("auto", "local", "spark"):
        raise UsageError(f"--engine must be one of auto, local, spark, not {engine!r}")
    if engine == "spark" and rate is not None:
        raise UsageError("--rate is a limit of one process: use --engine local with it")
    if tls_ca or tls_cert or tls_key:
        from mqctl.auth import client_context  # lazy: start-up

        client_context(tls_ca, tls_cert, tls_key)  # unreadable files: one line, exit 2, now
    opts = ReplayOptions(
        namesrv=parse_addresses(namesrv) if namesrv else None,
        broker_addr=broker_addr,
        rate=rate,
        dry_run=dry_run,
        group=group,
        timeout=timeout,
        busy_retries=retries,
        namesrv_text=namesrv or "NAMESRV",
        tls_ca=tls_ca,
        tls_cert=tls_cert,
        tls_key=tls_key,
        access_key=access_key,
        secret_key=secret_key,
        include_crc_errors=include_crc_errors,
    )
    use_spark = engine == "spark" or (engine == "auto" and master is not None and rate is None)
    err: MqctlError | None = None
    doc: dict[str, Any] | None
    try:
        if use_spark:
            from mqctl.pipeline.engine import require_spark, spark_session  # lazy: start-up

            require_spark()
            with spark_session(master, app_name="mqctl recover replay") as spark:
                doc = replay(salvage, opts, spark)
        else:
            doc = replay(salvage, opts)
    except MqctlError as exc:
        doc = getattr(exc, "report", None)
        if doc is None:
            if output is not Output.table:
                echo_doc(output, {"salvage": salvage}, error=exc)
            raise
        err = exc
    assert doc is not None
    if err is None and doc["failed"]:
        err = ReplayRefused(
            f"{doc['failed']} of {doc['messages']} messages were not published"
            + (
                f"; missing topics: {', '.join(m['topic'] for m in doc['missingTopics'])}"
                if doc["missingTopics"]
                else ""
            )
            + " (the report lists why)"
        )
    show_doc(output, doc, _replay_table, err)


def _replay_table(doc: dict[str, Any]) -> None:
    from rich.table import Table  # lazy: rich

    con = console()
    t = Table(title=f"replay of {doc['salvage']}" + (" (dry run)" if doc["dryRun"] else ""))
    cols = ("brokerName", "topic", "messages", "sent", "alreadyPresent", "doneEarlier", "wouldSend", "failed")
    for col in cols:
        t.add_column(col, justify="left" if col in ("brokerName", "topic") else "right")
    for s in doc["brokerSets"]:
        for tp in s["topics"]:
            t.add_row(s["brokerName"], tp["topic"], *(str(tp[c]) for c in cols[2:]))
    con.print(t)
    con.print(
        f"messages {doc['messages']}: sent {doc['sent']}, already present {doc['alreadyPresent']}, "
        f"done by an earlier run {doc['doneEarlier']}, would send {doc['wouldSend']}, "
        f"failed {doc['failed']}",
        markup=False,
    )
    for m in doc["missingTopics"]:
        con.print(
            f"missing topic {m['topic']} on {m['brokerName']} ({m['messages']} messages): {m['create']}",
            markup=False,
        )
    for f in doc["failures"][:20]:
        con.print(f"failed: {f['topic']} {f['uniqKey'] or f['messageKey']}: {f['reason']}", markup=False)
