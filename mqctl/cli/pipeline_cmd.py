"""`mqctl recover salvage` and `mqctl analyze commitlog`: the data pipeline (docs/pipeline.md), on Spark
or in this process (--engine).

Only typer is imported here; pyspark, numpy, pyarrow, rich and the pipeline modules load inside the
commands (`mqctl --help` never starts or imports Spark). The commands check for what the chosen engine
needs (numpy and pyarrow; pyspark, pandas and java for Spark) first and exit 9 with the install command
when one is missing.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from mqctl.cli import sub_app
from mqctl.cli.common import (
    console,
    dry_run_option,
    engine_option,
    human_size,
    output_option,
    printing,
    show_doc,
    spark_master_option,
    stores_argument,
)
from mqctl.cli.recover_cmd import recover_app
from mqctl.cli.render import Output, cells
from mqctl.errors import UsageError

analyze_app = sub_app("analyze", "Analyse commitlogs across a fleet of stores (Spark).")

_MASTER_HELP = (
    "Spark master URL (default: local[*], an in-process Spark; env MQCTL_SPARK_MASTER). With a "
    "cluster, the executors must see the store paths and have mqctl[spark] installed."
)
_RANGE_HELP = (
    "Bytes of commitlog per range (a Spark task reads a few), e.g. 64M or 512K (default: "
    "about 3 ranges per Spark core; 64M in process)."
)
_ENGINE_HELP = (
    "auto (default): Spark for a cluster --master, or when Spark with its start-up is estimated "
    "to be done sooner than this process (on 2 cores: salvage above about 3 GiB, analyze above "
    "about 16 GiB); local: in this process, no JVM; spark. Both give the same files."
)
_QUIET_HELP = "No progress bar and no engine line on stderr."
_OVERWRITE_HELP = "Replace a previous output in DIR (moved to DIR/.mqctl-backup-<UTC time> when it differs)."
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMGT]?)(I?B)?\s*$", re.IGNORECASE)


def _parse_size(text: str) -> int:

    m = _SIZE_RE.match(text)
    if not m or int(m.group(1)) <= 0:
        raise UsageError(f"--range-size must be a positive size like 65536, 512K or 64M, not {text!r}")
    return int(m.group(1)) << (10 * " KMGT".index((m.group(2) or " ").upper()))


def _range_size_opt() -> Any:
    return typer.Option(None, "--range-size", metavar="SIZE", help=_RANGE_HELP)


def _overwrite_opt() -> Any:
    return typer.Option(False, "--overwrite", help=_OVERWRITE_HELP)


def _quiet_opt() -> Any:
    return typer.Option(False, "--quiet", "-q", help=_QUIET_HELP)


def _begin(range_size: str | None, engine: str, master: str | None, quiet: bool, overwrite: bool) -> _Job:
    """What a job command does first (after naming the record walker): read --range-size and --engine,
    and check the in-process engine's packages."""
    size = None if range_size is None else _parse_size(range_size)
    eng = _engine(engine)

    from mqctl.pipeline.engine import require_local  # lazy: start-up

    require_local()
    return _Job(eng, master, size, quiet, overwrite)


def _engine(engine: str) -> str:
    from mqctl.pipeline.engine import ENGINES  # lazy: start-up

    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    return engine


@dataclass(frozen=True)
class _Job:
    """How a job command runs, from its shared options: --engine, --master, --range-size (None: sized
    for the engine), --quiet, --overwrite."""

    engine: str
    master: str | None
    range_size: int | None
    quiet: bool
    overwrite: bool

    def run(self, kind: str, inp: Any, run: Any, **kw: Any) -> dict[str, Any]:
        """Pick the engine (saying which on stderr), start Spark if it is Spark, size the ranges, run."""
        from rich.console import Console  # lazy: rich

        # lazy: start-up
        from mqctl.pipeline.engine import (
            choose_engine,
            range_size_for,
            require_spark,
            spark_cores,
            spark_session,
        )

        eng, why = choose_engine(self.engine, self.master, inp.nbytes, kind)
        if not self.quiet:
            Console(stderr=True, highlight=False).print(f"mqctl: {kind} on engine {eng} ({why})")
        progress = False if self.quiet else None
        if eng == "local":
            return run(None, inp, show_progress=progress, overwrite=self.overwrite, **kw)  # type: ignore[no-any-return]
        require_spark()
        with spark_session(self.master, app_name=f"mqctl {kind}") as spark:
            if self.range_size is None:
                inp.cut(range_size_for(inp.nbytes, spark_cores(spark)))
            return run(spark, inp, show_progress=progress, overwrite=self.overwrite, **kw)  # type: ignore[no-any-return]


def _time(ms: int | None) -> str:

    if ms is None:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@recover_app.command("salvage")
@printing(verbose=True)
def salvage_cmd(
    stores: list[str] = stores_argument("Store root directories of the fleet."),
    out: str = typer.Option(..., "--out", metavar="DIR", help="Output directory (Parquet + summary.json)."),
    master: str | None = spark_master_option(_MASTER_HELP),
    full_source: bool = typer.Option(
        False,
        "--full-source",
        help="Compare with every record the source "
        "keeps, not only those after the set's smallest truncateTo.",
    ),
    range_size: str | None = _range_size_opt(),
    engine: str = engine_option(_ENGINE_HELP),
    overwrite: bool = _overwrite_opt(),
    quiet: bool = _quiet_opt(),
    dry_run: bool = dry_run_option("Run the job and show what would be saved; write nothing."),
    output: Output = output_option(),
) -> None:
    """Save to Parquet every message that truncating the plan's replicas would drop and the source lacks."""
    job = _begin(range_size, engine, master, quiet, overwrite)
    # lazy: start-up
    from mqctl.pipeline.outdir import check_out_dir
    from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE
    from mqctl.pipeline.salvage import KIND, prepare, run_salvage

    if not dry_run:
        check_out_dir(Path(out).absolute(), KIND, overwrite=overwrite)
    inp = prepare(stores, range_size=job.range_size or DEFAULT_RANGE_SIZE, full_source=full_source)
    show_doc(output, job.run("recover salvage", inp, run_salvage, out=out, dry_run=dry_run), _render_salvage)


def _say_not(con: Any, done: str, stores: list[dict[str, Any]]) -> None:
    """The stores a job left out, and why."""
    for u in stores:
        con.print(f"not {done}: {u['store']}: {u['reason']}")


def _render_salvage(doc: dict[str, Any]) -> None:
    from rich.table import Table  # lazy: rich

    con = console()
    for s in doc["brokerSets"]:
        t = Table(
            title=f"{s['clusterName']}/{s['brokerName']}: "
            + (
                f"source {s['source']}, compared over [{s['comparedFrom']}, {s['comparedTo']})"
                if s["source"] is not None
                else "every store is empty, nothing to salvage"
            )
        )
        for col in (
            "store",
            "brokerId",
            "truncateTo",
            "maxOffset",
            "records past",
            "on source",
            "on other replica",
            "salvaged",
            "bytes",
        ):
            t.add_column(col, justify="left" if col == "store" else "right")
        for r in s["replicas"]:
            t.add_row(
                r["store"],
                *cells(r, "brokerId", "truncateTo", "maxOffset", "recordsPastTruncateTo", "alreadyOnSource"),
                *cells(r, "copiesOnOtherReplicas", "salvaged"),
                human_size(r["salvagedBytes"]),
            )
        con.print(t)
        if s["topics"]:
            tt = Table(title=f"salvaged from {s['clusterName']}/{s['brokerName']}")
            for col in ("topic", "messages", "bytes", "body bytes", "CRC errors"):
                tt.add_column(col, justify="left" if col == "topic" else "right")
            for x in s["topics"]:
                tt.add_row(
                    *cells(x, "topic", "messages"),
                    *cells(x, "bytes", "bodyBytes", fmt=human_size),
                    str(x["crcErrors"]),
                )
            con.print(tt)
    _say_not(con, "salvaged", doc["notSalvaged"])
    for p in doc["problems"]:
        con.print(
            f"problem: {p['file']} position {p['position']} (offset {p['offset']}, "
            f"{p['length']} bytes): {p['kind']}: {p['reason']}"
        )
    if doc["skippedBytes"]:
        con.print(f"skipped {human_size(doc['skippedBytes'])} that are not records (see the problems)")
    total = f"{doc['messages']} messages ({human_size(doc['bytes'])})"
    if doc["dryRun"]:
        con.print(f"dry run: would write {total} to {doc['out']}")
    else:
        if doc["backup"]:
            con.print(f"previous output moved to {doc['backup']}")
        con.print(f"wrote {total} to {doc['out']}")


@analyze_app.command("commitlog")
@printing(verbose=True)
def analyze_commitlog_cmd(
    stores: list[str] = stores_argument("Store root directories."),
    out: str | None = typer.Option(
        None, "--out", metavar="DIR", help="Also write Parquet (queues, problems) and summary.json here."
    ),
    master: str | None = spark_master_option(_MASTER_HELP),
    range_size: str | None = _range_size_opt(),
    engine: str = engine_option(_ENGINE_HELP),
    overwrite: bool = _overwrite_opt(),
    quiet: bool = _quiet_opt(),
    output: Output = output_option(),
) -> None:
    """Per topic and queue: messages, bytes, store times, offsets; every damaged record, file and position."""
    job = _begin(range_size, engine, master, quiet, overwrite)
    from mqctl.pipeline.analyze import KIND, prepare_analyze, run_analyze  # lazy: numpy

    # lazy: start-up
    from mqctl.pipeline.outdir import check_out_dir
    from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE

    if out is not None:
        check_out_dir(Path(out).absolute(), KIND, overwrite=overwrite)
    inp = prepare_analyze(stores, range_size=job.range_size or DEFAULT_RANGE_SIZE)
    show_doc(output, job.run("analyze commitlog", inp, run_analyze, out=out), _render_analyze)


def _render_analyze(doc: dict[str, Any]) -> None:
    from rich.table import Table  # lazy: rich

    con = console()
    t = Table(title="queues")
    for col in (
        "store",
        "topic",
        "queue",
        "messages",
        "bytes",
        "first store time (UTC)",
        "last store time (UTC)",
        "queue offsets",
        "physical offsets",
        "CRC errors",
    ):
        t.add_column(col, justify="right" if col in ("queue", "messages", "bytes", "CRC errors") else "left")
    for q in doc["queues"]:
        t.add_row(
            *cells(q, "store", "topic", "queueId", "messages"),
            human_size(q["bytes"]),
            *cells(q, "firstStoreTimestamp", "lastStoreTimestamp", fmt=_time),
            f"{q['minQueueOffset']}..{q['maxQueueOffset']}",
            f"{q['minPhysicalOffset']}..{q['maxPhysicalOffset']}",
            str(q["crcErrors"]),
        )
    con.print(t)
    if doc["problems"]:
        pt = Table(title="damaged records")
        for col in ("file", "position", "offset", "length", "kind", "reason"):
            pt.add_column(col, justify="right" if col in ("position", "offset", "length") else "left")
        for p in doc["problems"]:
            pt.add_row(p["file"], *cells(p, "position", "offset", "length"), p["kind"], p["reason"])
        con.print(pt)
    _say_not(con, "analyzed", doc["notAnalyzed"])
    for s in doc["stores"]:
        con.print(
            f"{s['store']}: {s['messages']} messages in {s['queues']} queues of {s['topics']} topics, "
            f"{s['problems']} problems, {human_size(s['skippedBytes'])} skipped"
        )
    if doc["out"]:
        con.print(f"wrote {doc['out']}")
