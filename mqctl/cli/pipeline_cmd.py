"""`mqctl recover salvage` and `mqctl analyze commitlog`: the Spark data pipeline (docs/pipeline.md).

Only typer is imported here; pyspark, numpy, rich and the pipeline modules load inside the commands
(`mqctl --help` never starts or imports Spark). The commands check for pyspark, numpy and java first and
exit 8 with the install command when one is missing.
"""

from __future__ import annotations

import re
from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.common import console, echo_doc, human_size, output_option
from mqctl.cli.recover_cmd import recover_app
from mqctl.cli.render import Output

analyze_app = sub_app("analyze", "Analyse commitlogs across a fleet of stores (Spark).")

_MASTER_HELP = ("Spark master URL (default: local[*], an in-process Spark; env MQCTL_SPARK_MASTER). With a "
                "cluster, the executors must see the store paths and have mqctl[spark] installed.")
_RANGE_HELP = "Bytes of commitlog per Spark task, e.g. 64M (default) or 512K."
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def _parse_size(text: str) -> int:
    from mqctl.errors import UsageError

    m = _SIZE_RE.match(text)
    if not m or int(m.group(1)) <= 0:
        raise UsageError(f"--range-size must be a positive size like 65536, 512K or 64M, not {text!r}")
    return int(m.group(1)) << (10 * " KMGT".index((m.group(2) or " ").upper()))


def _time(ms: int | None) -> str:
    import datetime as dt

    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@recover_app.command("salvage")
def salvage_cmd(
    stores: list[str] = typer.Argument(..., metavar="STORE...", help="Store root directories of the fleet."),
    out: str = typer.Option(..., "--out", metavar="DIR", help="Output directory (Parquet + summary.json)."),
    master: str | None = typer.Option(None, "--master", metavar="URL", envvar="MQCTL_SPARK_MASTER",
                                      help=_MASTER_HELP),
    full_source: bool = typer.Option(False, "--full-source", help="Compare with every record the source "
                                     "keeps, not only those after the set's smallest truncateTo."),
    range_size: str = typer.Option("64M", "--range-size", metavar="SIZE", help=_RANGE_HELP),
    dry_run: bool = typer.Option(False, "--dry-run", help="Run the job and show what would be saved; write "
                                                          "nothing."),
    output: Output = output_option(),
) -> None:
    """Save to Parquet every message that truncating the plan's replicas would drop and the source lacks."""
    size = _parse_size(range_size)
    from pathlib import Path

    from mqctl.pipeline.engine import require_spark, spark_session
    from mqctl.pipeline.output import check_out_dir
    from mqctl.pipeline.salvage import KIND, prepare, run_salvage

    require_spark()
    if not dry_run:
        check_out_dir(Path(out).absolute(), KIND)
    inp = prepare(stores, range_size=size, full_source=full_source)
    with spark_session(master, app_name="mqctl recover salvage") as spark:
        doc = run_salvage(spark, inp, out, dry_run=dry_run)
    if output is not Output.table:
        echo_doc(output, doc)
        return
    _render_salvage(doc)


def _render_salvage(doc: dict[str, Any]) -> None:
    from rich.table import Table

    con = console()
    for s in doc["brokerSets"]:
        t = Table(title=f"{s['clusterName']}/{s['brokerName']}: " + (
            f"source {s['source']}, compared over [{s['comparedFrom']}, {s['comparedTo']})"
            if s["source"] is not None else "every store is empty, nothing to salvage"))
        for col in ("store", "brokerId", "truncateTo", "maxOffset", "records past", "on source",
                    "on other replica", "salvaged", "bytes"):
            t.add_column(col, justify="left" if col == "store" else "right")
        for r in s["replicas"]:
            t.add_row(r["store"], str(r["brokerId"]), str(r["truncateTo"]), str(r["maxOffset"]),
                      str(r["recordsPastTruncateTo"]), str(r["alreadyOnSource"]),
                      str(r["copiesOnOtherReplicas"]), str(r["salvaged"]), human_size(r["salvagedBytes"]))
        con.print(t)
        if s["topics"]:
            tt = Table(title=f"salvaged from {s['clusterName']}/{s['brokerName']}")
            for col in ("topic", "messages", "bytes", "body bytes", "CRC errors"):
                tt.add_column(col, justify="left" if col == "topic" else "right")
            for x in s["topics"]:
                tt.add_row(x["topic"], str(x["messages"]), human_size(x["bytes"]), human_size(x["bodyBytes"]),
                           str(x["crcErrors"]))
            con.print(tt)
    for u in doc["notSalvaged"]:
        con.print(f"not salvaged: {u['store']}: {u['reason']}")
    for p in doc["problems"]:
        con.print(f"problem: {p['file']} position {p['position']} (offset {p['offset']}, "
                  f"{p['length']} bytes): {p['kind']}: {p['reason']}")
    total = f"{doc['messages']} messages ({human_size(doc['bytes'])})"
    if doc["dryRun"]:
        con.print(f"dry run: would write {total} to {doc['out']}")
    else:
        if doc["backup"]:
            con.print(f"previous output moved to {doc['backup']}")
        con.print(f"wrote {total} to {doc['out']}")


@analyze_app.command("commitlog")
def analyze_commitlog_cmd(
    stores: list[str] = typer.Argument(..., metavar="STORE...", help="Store root directories."),
    out: str | None = typer.Option(None, "--out", metavar="DIR", help="Also write Parquet (queues, problems) "
                                                                      "and summary.json here."),
    master: str | None = typer.Option(None, "--master", metavar="URL", envvar="MQCTL_SPARK_MASTER",
                                      help=_MASTER_HELP),
    range_size: str = typer.Option("64M", "--range-size", metavar="SIZE", help=_RANGE_HELP),
    output: Output = output_option(),
) -> None:
    """Per topic and queue: messages, bytes, store times, offsets; every damaged record, file and position."""
    size = _parse_size(range_size)
    from pathlib import Path

    from mqctl.pipeline.analyze import KIND, prepare_analyze, run_analyze
    from mqctl.pipeline.engine import require_spark, spark_session
    from mqctl.pipeline.output import check_out_dir

    require_spark()
    if out is not None:
        check_out_dir(Path(out).absolute(), KIND)
    inp = prepare_analyze(stores, range_size=size)
    with spark_session(master, app_name="mqctl analyze commitlog") as spark:
        doc = run_analyze(spark, inp, out)
    if output is not Output.table:
        echo_doc(output, doc)
        return
    from rich.table import Table

    con = console()
    t = Table(title="queues")
    for col in ("store", "topic", "queue", "messages", "bytes", "first store time (UTC)",
                "last store time (UTC)", "queue offsets", "physical offsets", "CRC errors"):
        t.add_column(col, justify="right" if col in ("queue", "messages", "bytes", "CRC errors") else "left")
    for q in doc["queues"]:
        t.add_row(q["store"], q["topic"], str(q["queueId"]), str(q["messages"]), human_size(q["bytes"]),
                  _time(q["firstStoreTimestamp"]), _time(q["lastStoreTimestamp"]),
                  f"{q['minQueueOffset']}..{q['maxQueueOffset']}",
                  f"{q['minPhysicalOffset']}..{q['maxPhysicalOffset']}", str(q["crcErrors"]))
    con.print(t)
    if doc["problems"]:
        pt = Table(title="damaged records")
        for col in ("file", "position", "offset", "length", "kind", "reason"):
            pt.add_column(col, justify="right" if col in ("position", "offset", "length") else "left")
        for p in doc["problems"]:
            pt.add_row(p["file"], str(p["position"]), str(p["offset"]), str(p["length"]), p["kind"],
                       p["reason"])
        con.print(pt)
    for u in doc["notAnalyzed"]:
        con.print(f"not analyzed: {u['store']}: {u['reason']}")
    for s in doc["stores"]:
        con.print(f"{s['store']}: {s['messages']} messages in {s['queues']} queues of {s['topics']} topics, "
                  f"{s['problems']} problems")
    if doc["out"]:
        con.print(f"wrote {doc['out']}")
