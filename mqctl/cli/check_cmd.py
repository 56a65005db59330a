"""`mqctl check config FILE...`: lint broker.conf and controller.conf (mqctl.admin.configcheck) before a
failover finds what they get wrong. Exit 0 / 1 / 2 for OK / WARN / CRIT, as monitoring checks do."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.admin_cmd import Conn, _cluster_info, connected
from mqctl.cli.common import console, echo_doc, namesrv_option, output_option, printing
from mqctl.cli.render import Output
from mqctl.errors import StoreError, UsageError

check_app = sub_app("check", "Check configurations before they bite.")

EXIT = {"OK": 0, "WARN": 1, "CRIT": 2}


@check_app.command("config")
@connected()
@printing()
def config_cmd(
    conn: Conn,
    files: list[str] = typer.Argument(
        None,
        metavar="[FILE...]",
        help="broker.conf and controller.conf files (RocketMQ's properties "
        "format); give every replica of a set to compare them.",
    ),
    online: bool = typer.Option(
        False,
        "--online",
        help="Also check the live values: every broker the name servers (-n) list "
        "(GET_BROKER_CONFIG, its version from GET_BROKER_RUNTIME_INFO) and the "
        "controllers named with -a (GetControllerConfig).",
    ),
    namesrv: str = namesrv_option("with --online: name servers that list the brokers"),
    output: Output = output_option(),
) -> None:
    """Flag settings that lose acknowledged writes or prevent failover: severity, why, source, fix."""
    from mqctl.admin.configcheck import check, config_file, verdict  # lazy: start-up

    if not files and not online:
        raise UsageError("name the configuration files to check, or --online -n NAMESRV")
    if online and not namesrv:
        raise UsageError("--online needs -n/--namesrvAddr: the name servers that list the brokers")
    configs = []
    for name in files or []:
        try:
            with open(name, encoding="utf-8", errors="replace") as fh:
                configs.append(config_file(name, fh.read()))
        except OSError as exc:
            raise StoreError(f"{name}: cannot read: {exc.strerror or exc}") from None
    versions: dict[str, str] = {}
    if online:
        live, versions = _live(conn, namesrv)
        configs += live
    findings = check(configs, versions)
    result = verdict(findings)
    kinds = [
        {"file": c.name, "kind": c.kind, "brokerSet": c.broker_set if c.kind == "broker" else None}
        for c in configs
    ]
    doc: dict[str, Any] = {"verdict": result, "files": kinds, "findings": [f.to_dict() for f in findings]}
    if output is not Output.table:
        echo_doc(output, doc)
    else:
        _print(doc)
    raise typer.Exit(EXIT[result])


def _live(conn: Conn, namesrv: str) -> tuple[list[Any], dict[str, str]]:
    """The running values of every broker the name servers list and of the -a controllers."""

    # lazy: start-up
    from mqctl.admin.brokermeta import fetch_broker_config
    from mqctl.admin.configcheck import config_file

    info = _cluster_info(conn, namesrv)
    addresses = sorted({a for reps in info.broker_addrs.values() for a in reps.values()})
    out, versions = [], {}
    seconds = min(conn.timeout, 10.0)
    if addresses:
        with conn.remoting(addresses, seconds, brokers=True) as client:
            for address in addresses:
                text, version = fetch_broker_config(client.connection, address, timeout=seconds)
                name = f"broker {address}"
                out.append(replace(config_file(name, text), live=True))
                versions[name] = version
    for address in conn.addresses:
        with conn.client([address]) as client:
            cfg = client.get_config(address).config
        text = "".join(f"{k}={v}\n" for k, v in cfg.items())
        out.append(replace(config_file(f"controller {address}", text), live=True))
    return out, versions


def _print(doc: dict[str, Any]) -> None:
    con = console()
    style = {"CRIT": "bold red", "WARN": "yellow"}
    for f in doc["findings"]:
        con.print(
            f"{f['severity']} {f['rule']}: {f['message']}",
            style=style[f["severity"]],
            markup=False,
            soft_wrap=True,
        )
        for k in ("why", "source", "fix"):
            con.print(f"  {k}: {f[k]}", markup=False, soft_wrap=True)
    kinds = ", ".join(
        f"{x['file']} ({x['kind']}{' ' + x['brokerSet'] if x['brokerSet'] else ''})" for x in doc["files"]
    )
    con.print(f"{doc['verdict']}: {len(doc['findings'])} finding(s) in {kinds}", markup=False, soft_wrap=True)
