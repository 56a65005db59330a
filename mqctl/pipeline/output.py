"""Output directories of the pipeline commands: refuse foreign content, deterministic file names,
replace a previous output only after moving it to a backup when its content differs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

from mqctl.errors import UsageError

SUMMARY_FILE = "summary.json"

__all__ = ["SUMMARY_FILE", "check_out_dir", "tree_digest", "normalise_spark_output", "install_output"]


def check_out_dir(out: Path, kind: str) -> None:
    """Refuse a DIR that holds anything but a previous output of the same command."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory; choose a new or empty directory for --out")
    if out.is_dir() and any(p for p in out.iterdir() if not p.name.startswith(".mqctl-tmp-")):
        try:
            prev = json.loads((out / SUMMARY_FILE).read_text())
        except (OSError, ValueError):
            prev = None
        if not isinstance(prev, dict) or prev.get("kind") != kind:
            what = kind.replace("mqctl-", "")
            raise UsageError(f"{out}: not empty and not the output of a previous {what} (no {SUMMARY_FILE} "
                             f"of kind {kind}); choose a new or empty directory for --out")


def tree_digest(root: Path) -> str:
    """Digest of an output tree by content: Parquet files by their decoded rows and schema, since
    Spark's Parquet writer does not produce identical footers from one JVM to the next (the order of
    the encodings list), so two runs over the same stores must compare equal."""
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(root).as_posix()}\0".encode())
        if p.suffix == ".parquet":
            h.update(_parquet_content_digest(p))
        else:
            h.update(hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def _parquet_content_digest(path: Path) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return hashlib.sha256(sink.getvalue().to_pybytes()).digest()


def normalise_spark_output(root: Path) -> None:
    """Spark names files part-<n>-<uuid>...: rename them part-00000.parquet, ... per directory (in
    Spark's order) and drop the _SUCCESS / .crc side files, so reruns give identical trees."""
    for d in sorted({p.parent for p in root.rglob("*")} | {root}):
        for junk in list(d.glob(".*.crc")) + list(d.glob("_SUCCESS")) + list(d.glob("._SUCCESS.crc")):
            junk.unlink()
        parts = sorted(d.glob("part-*.parquet"))
        for i, p in enumerate(parts):
            p.rename(d / f".renaming-{i:05d}")
        for i in range(len(parts)):
            (d / f".renaming-{i:05d}").rename(d / f"part-{i:05d}.parquet")


def install_output(tmp: Path, out: Path, names: tuple[str, ...], digest: str) -> str | None:
    """Move tmp/<names> into out. A previous output with another digest goes to a backup first."""
    backup: Path | None = None
    try:
        prev = json.loads((out / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        prev = None
    if isinstance(prev, dict) and prev.get("digest") != digest:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backup = out.parent / f"{out.name}.{prev.get('kind', 'mqctl').replace('mqctl-', '')}-backup-{stamp}"
        n = 1
        while backup.exists():
            n += 1
            backup = backup.with_name(f"{backup.name.split('~')[0]}~{n}")
        backup.mkdir(parents=True)
        for name in names:
            if (out / name).exists():
                os.replace(out / name, backup / name)
    for name in names:
        dst = out / name
        if dst.is_dir():
            shutil.rmtree(dst)
        elif dst.exists():
            dst.unlink()
        if (tmp / name).exists():
            os.replace(tmp / name, dst)
    return None if backup is None else str(backup)
