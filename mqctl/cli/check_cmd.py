"""`mqctl check config FILE...`: lint broker.conf and controller.conf (mqctl.admin.configcheck) before a
failover finds what they get wrong. Exit 0 / 1 / 2 for OK / WARN / CRIT, as monitoring checks do."""

from __future__ import annotations

from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.common import console, echo_doc, output_option
from mqctl.cli.render import Output

check_app = sub_app("check", "Check configurations before they bite.")

EXIT = {"OK": 0, "WARN": 1, "CRIT": 2}


@check_app.command("config")
def config_cmd(
    files: list[str] = typer.Argument(..., metavar="FILE...",
                                      help="broker.conf and controller.conf files (RocketMQ's properties "
                                           "format); give every replica of a set to compare them."),
    output: Output = output_option(),
) -> None:
    """Flag settings that lose acknowledged writes or prevent failover: severity, why, source, fix."""
    from mqctl.admin.configcheck import check, config_file, verdict
    from mqctl.errors import StoreError

    configs = []
    for name in files:
        try:
            with open(name, encoding="utf-8", errors="replace") as fh:
                configs.append(config_file(name, fh.read()))
        except OSError as exc:
            raise StoreError(f"{name}: cannot read: {exc.strerror or exc}") from None
    findings = check(configs)
    result = verdict(findings)
    kinds = [{"file": c.name, "kind": c.kind, "brokerSet": c.broker_set if c.kind == "broker" else None}
             for c in configs]
    doc: dict[str, Any] = {"verdict": result, "files": kinds, "findings": [f.to_dict() for f in findings]}
    if output is not Output.table:
        echo_doc(output, doc)
    else:
        _print(doc)
    raise typer.Exit(EXIT[result])


def _print(doc: dict[str, Any]) -> None:
    con = console()
    style = {"CRIT": "bold red", "WARN": "yellow"}
    for f in doc["findings"]:
        con.print(f"{f['severity']} {f['rule']}: {f['message']}", style=style[f["severity"]], markup=False,
                  soft_wrap=True)
        for k in ("why", "source", "fix"):
            con.print(f"  {k}: {f[k]}", markup=False, soft_wrap=True)
    kinds = ", ".join(f"{x['file']} ({x['kind']}{' ' + x['brokerSet'] if x['brokerSet'] else ''})"
                      for x in doc["files"])
    con.print(f"{doc['verdict']}: {len(doc['findings'])} finding(s) in {kinds}", markup=False, soft_wrap=True)
