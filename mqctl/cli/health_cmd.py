"""`mqctl health`: OK, WARN or CRIT for the controller group and each broker set (mqctl.admin.health
decides; this module asks the controller and renders). Exit status 0, 1 or 2 (Nagios)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import typer

from mqctl.cli import render, root_app
from mqctl.cli.admin_cmd import Conn, _names, _one_of, connected
from mqctl.cli.common import broker_name_option, cluster_option, no_color_option, output_option
from mqctl.cli.render import Output
from mqctl.errors import MqctlError, NotFoundError

if TYPE_CHECKING:
    from mqctl.client import ControllerClient


def _metadata(client: ControllerClient) -> tuple[dict[str, Any] | None, str]:
    """The leader's GetMetadata when it answers (only it knows which peers it reaches), else any
    node's; with why it is not the leader's."""
    try:
        meta = client.get_metadata()
    except MqctlError as exc:
        return None, f"no controller node answered: {exc}"
    if meta.is_leader or not meta.controller_leader_address:
        return asdict(meta), ""
    try:
        return asdict(client.get_metadata(meta.controller_leader_address)), ""
    except MqctlError as exc:
        return asdict(meta), f"the leader {meta.controller_leader_address} does not answer: {exc}"


def collect(
    client: ControllerClient,
    broker_name: str | None,
    cluster: str | None,
    max_lag: int,
    doctor: bool,
    addresses: str,
    brokers: Callable[[list[str]], Any] | None = None,
    broker_timeout: float = 5.0,
) -> dict[str, Any]:
    """``brokers``: opens remoting connections to brokers (Conn.remoting) for the doctor's metadata
    check; without it the doctor does not ask the brokers."""
    # lazy: start-up
    from mqctl.admin import health
    from mqctl.admin.syncstate import select_broker_sets

    meta, problem = _metadata(client)
    table: dict[str, dict[str, Any]] | None = None
    lease = 10_000
    if meta is not None and meta.get("controller_leader_id") and not problem:
        try:
            everything = client.get_sync_state_data(_names(broker_name)).replicas_info_table
            lease = int(client.get_config().config.get("heartbeatTimeoutMillis", lease))
        except MqctlError as exc:
            problem = f"cannot read the broker sets: {exc}"
        else:
            selected, missing = select_broker_sets(everything, _names(broker_name), cluster)
            if missing:
                raise NotFoundError(
                    f"{'broker set' if broker_name else 'cluster'} {', '.join(missing)} "
                    "not found on the controller"
                )
            table = {name: asdict(info) for name, info in selected.items()}
    doc = health.health_doc(meta, table, lease, max_lag, problem)
    if doctor and table is not None:
        doc["replicas"] = health.doctor_replicas(table)
        doc["findings"] = health.doctor(table, addr=addresses)
        try:
            entries = client.history(broker_name or "").entries
        except MqctlError:
            entries = ()  # no history below feature level 3
        doc["findings"] += health.loss_findings(entries, table)
        if brokers is not None:
            doc["metadata"] = _metadata_drift(brokers, table, broker_timeout)
            doc["findings"] += health.metadata_findings(table, doc["metadata"])
    return doc


def _metadata_drift(
    brokers: Callable[[list[str]], Any], table: dict[str, dict[str, Any]], timeout: float
) -> dict[str, dict[str, Any]]:
    from mqctl.admin.brokermeta import drift_of_sets  # lazy: start-up

    addresses = [
        str(r["broker_address"])
        for info in table.values()
        for r in (*info.get("in_sync_replicas", ()), *info.get("not_in_sync_replicas", ()))
        if r.get("alive") and r.get("broker_address")
    ]
    if not addresses:
        return {}
    with brokers(addresses) as client:
        drifts = drift_of_sets(client.connection, table, timeout=timeout)
    # each replica's counts; what exactly differs is `mqctl metadata diff -b SET -o json`'s
    return {
        name: d
        if "error" in d
        else {
            "differs": d["differs"],
            "replicas": [{k: v for k, v in r.items() if k != "files"} for r in d["replicas"]],
        }
        for name, d in drifts.items()
    }


@root_app.command("health")
@connected()
def health_command(
    conn: Conn,
    broker_name: str = broker_name_option("only these broker sets (comma separated)"),
    cluster: str = cluster_option("only the broker sets of this cluster"),
    doctor: bool = typer.Option(
        False,
        "--doctor",
        help="also compare what the controller believes with "
        "what each broker reports in its heartbeats, and the metadata (topics, "
        "groups, consumer offsets) of the alive replicas of each set, each finding "
        "with its fix",
    ),
    max_lag: int = typer.Option(
        16 << 20,
        "--max-lag",
        metavar="BYTES",
        help="a replica further behind the master's maxOffset is lagging (WARN)",
    ),
    output: Output = output_option(),
    no_color: bool = no_color_option(),
) -> None:
    """OK, WARN or CRIT for the controller group and each broker set, the worst first.

    CRIT: no master, master not alive, replicas that disagree on the master (an epoch ahead of
    masterEpoch), no controller leader or quorum. WARN: SyncStateSet smaller than the alive replicas,
    a replica not alive or lagging, a heartbeat older than half the lease, a controller peer
    unreachable. Exit status 0 (OK), 1 (WARN) or 2 (CRIT), as Nagios checks; --doctor adds the
    cross-layer findings (registered but never heartbeating, address conflicts, epochs ahead of
    the controller, a replica lacking topics, groups or consumer offsets another replica has, asked
    of the brokers with `metadata diff`'s requests) with the command that fixes each."""
    from mqctl.admin.health import RANK  # lazy: start-up

    _one_of(broker_name, cluster)
    seconds = min(conn.timeout, 5.0)
    with conn.client() as client:
        doc = collect(
            client,
            broker_name,
            cluster,
            max_lag,
            doctor,
            ";".join(conn.addresses),
            brokers=(lambda addrs: conn.remoting(addrs, seconds, brokers=True)) if doctor else None,
            broker_timeout=seconds,
        )
    render.emit(doc, output, render.health_table, no_color=no_color)
    raise typer.Exit(RANK[doc["verdict"]])
