"""Output directories of the pipeline commands: refuse what is not ours, write every Parquet file through
one pyarrow writer (the same bytes from either engine), replace a previous output only with --overwrite
and after moving it to a backup inside DIR when its content differs. Nothing is written outside DIR."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mqctl.errors import UsageError

SUMMARY_FILE = "summary.json"
HIDDEN = ".mqctl-"  # our own temporary and backup directories inside DIR
ROW_GROUP_ROWS = 32768  # a row group ends after this many rows or ROW_GROUP_BYTES of records
ROW_GROUP_BYTES = 64 << 20

__all__ = [
    "SUMMARY_FILE",
    "PartWriter",
    "check_out_dir",
    "install_output",
    "row_groups",
    "tree_digest",
    "write_parquet",
]


def check_out_dir(out: Path, kind: str, *, overwrite: bool = False) -> None:
    """Refuse a DIR that is not a directory, whose parent does not exist, that holds anything without
    --overwrite, or that holds anything but a previous output of the same command."""
    what = kind.replace("mqctl-", "")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out}: exists and is not a directory; choose a new or empty directory for --out")
    if not out.parent.is_dir():
        raise UsageError(
            f"{out.parent}: no such directory; create it first (--out is created, its parents are not)"
        )
    if not (out.is_dir() and any(p for p in out.iterdir() if not p.name.startswith(HIDDEN))):
        return
    try:
        prev = json.loads((out / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        prev = None
    if not isinstance(prev, dict) or prev.get("kind") != kind:
        raise UsageError(
            f"{out}: not empty and not the output of a previous {what} (no {SUMMARY_FILE} of "
            f"kind {kind}); choose a new or empty directory for --out"
        )
    if not overwrite:
        raise UsageError(
            f"{out}: holds a previous {what}; add --overwrite to replace it (a different result "
            f"is first moved to {out}/{HIDDEN}backup-<UTC time>) or choose another --out"
        )


def tree_digest(root: Path) -> str:
    """sha256 over the names and bytes of an output tree, without our hidden directories (every file is
    written by this module's writer: the same rows give the same bytes, on either engine)."""
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        rel = p.relative_to(root)
        if rel.parts[0].startswith(HIDDEN):
            continue
        h.update(f"{rel.as_posix()}\0".encode())
        with open(p, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


class PartWriter:
    """One Parquet file from a stream of record batches, row groups cut by the rows themselves (every
    ROW_GROUP_ROWS rows or ROW_GROUP_BYTES of `size`), never by how the batches arrived: the local engine
    and Spark's executors feed the same rows in different batches and get the same file."""

    def __init__(
        self,
        path: Path,
        schema: Any,
        size_column: str | None = None,
        *,
        plain: tuple[str, ...] = (),
        no_statistics: tuple[str, ...] = (),
    ) -> None:
        """`plain`: columns not dictionary-encoded (values mostly distinct: trying costs CPU for nothing);
        `no_statistics`: columns without min/max (bodies)."""
        import pyarrow.parquet as pq  # lazy: pyarrow

        path.parent.mkdir(parents=True, exist_ok=True)
        self.schema, self.size_column = schema, size_column
        names = schema.names
        self._w = pq.ParquetWriter(
            str(path),
            schema,
            compression="snappy",
            use_dictionary=[n for n in names if n not in plain] if plain else True,
            write_statistics=[n for n in names if n not in no_statistics] if no_statistics else True,
        )
        self._pending: list[Any] = []
        self._rows = self._bytes = 0
        self.rows = 0

    def write(self, batch: Any) -> None:
        import numpy as np  # lazy: numpy

        batch = _conform(batch, self.schema)
        sizes = (
            batch.column(self.size_column).to_numpy(zero_copy_only=False).astype(np.int64)
            if self.size_column
            else np.zeros(batch.num_rows, dtype=np.int64)
        )
        for i, j in row_groups(sizes, self._rows, self._bytes):
            self._pending.append(batch.slice(i, j - i))
            self._rows += j - i
            self._bytes += int(sizes[i:j].sum())
            if self._rows >= ROW_GROUP_ROWS or self._bytes >= ROW_GROUP_BYTES:
                self._flush()

    def _flush(self) -> None:
        import pyarrow as pa  # lazy: pyarrow

        if self._rows:
            # one contiguous chunk per column: Parquet pages break at chunk boundaries too (a batch cut
            # by `row_groups` is one already: no copy)
            table = pa.Table.from_batches(self._pending, schema=self.schema)
            if len(self._pending) > 1:
                table = table.combine_chunks()
            self._w.write_table(table, row_group_size=table.num_rows)
            self.rows += table.num_rows
        self._pending, self._rows, self._bytes = [], 0, 0

    def close(self) -> None:
        self._flush()
        self._w.close()


def row_groups(sizes: Any, rows: int = 0, nbytes: int = 0) -> list[tuple[int, int]]:
    """[i, j) spans of rows with record sizes `sizes` that end where PartWriter ends its row groups
    (after ROW_GROUP_ROWS rows, or at the row that reaches ROW_GROUP_BYTES), the first one continuing a
    row group that has `rows` rows and `nbytes` bytes already; the last span may end short of one."""
    import numpy as np  # lazy: numpy

    cum = np.cumsum(sizes, dtype=np.int64)
    out, i, n = [], 0, len(cum)
    while i < n:
        base = int(cum[i - 1]) if i else 0
        room = ROW_GROUP_ROWS - rows
        j = min(i + room, n, int(np.searchsorted(cum, base + ROW_GROUP_BYTES - nbytes, side="left")) + 1)
        out.append((i, j))
        i, rows, nbytes = j, 0, 0
    return out


def _conform(batch: Any, schema: Any) -> Any:
    """The batch with exactly `schema`'s types and nullability (Spark's Arrow batches name map fields
    and flag nullability its own way)."""
    import pyarrow as pa  # lazy: pyarrow

    if batch.schema.equals(schema):
        return batch
    return pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in schema], schema=schema)


def write_parquet(path: Path, schema: Any, batches: Iterable[Any], size_column: str | None = None) -> int:
    w = PartWriter(path, schema, size_column)
    try:
        for b in batches:
            w.write(b)
    finally:
        w.close()
    return w.rows


def install_output(tmp: Path, out: Path, names: tuple[str, ...], digest: str) -> str | None:
    """Move tmp/<names> into out. A previous output with another digest goes to out/.mqctl-backup-<UTC
    time> first (inside DIR: nothing is written outside it)."""
    backup: Path | None = None
    try:
        prev = json.loads((out / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        prev = None
    if isinstance(prev, dict) and prev.get("digest") != digest:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backup = out / f"{HIDDEN}backup-{stamp}"
        n = 1
        while backup.exists():
            n += 1
            backup = out / f"{HIDDEN}backup-{stamp}~{n}"
        backup.mkdir()
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
