"""`mqctl recover guard STORE`: before a broker starts, save what RocketMQ would cut from its store.

When a broker of a broker set in controller mode starts as a slave, RocketMQ 5.3.3's
``AutoSwitchHAClient.doTruncate`` (store/ha/autoswitch) takes the master's epoch entries and max offset
from the HA handshake (``AutoSwitchHAConnection``: ``epochCache.getAllEntries()`` and
``getMaxPhyOffset()``), builds two ``EpochFileCache``s whose last entry ends at each side's max offset
(``setLastEpochEntryEndOffset``), and ``localEpochCache.findConsistentPoint(masterEpochCache)``: the local
epochs newest first, the first one the master holds with the same startOffset gives
``min(localEnd, masterEnd)``. Then ``truncateFiles(point)``: everything past it is gone, silently, with no
copy. An empty local epoch cache skips the truncation; no consistent point (-1) fails the handshake
and truncates nothing.

The guard asks the controller group for the master (GetReplicaInfo), asks that master for its epoch
entries and max offset (GET_BROKER_EPOCH_CACHE, 1007: the same entries and offset the handshake
carries), reads the store's epoch file and computes the same point. It reads only what the decision
needs: ``brokerIdentity``, ``epochFileCheckpoint``, the commitlog's file names and the one record at the
point (a valid record there means the store holds bytes past it); only when bytes would be lost does it
read the store's tail, with `mqctl recover salvage`'s code and Parquet layout, into a directory of
its own under ``--out``, written whole or not at all (a temporary directory, fsync, rename). The store
is only read.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.camel import camel_fields
from mqctl.errors import MqctlError, StoreError
from mqctl.pipeline.outdir import HIDDEN, SUMMARY_FILE
from mqctl.store.epochfile import LONG_MAX, EpochEntry, find_consistent_point, read_epoch_file
from mqctl.store.identity import read_identity

__all__ = [
    "EXIT_CANNOT_DECIDE",
    "EXIT_NO_ROOM",
    "EXIT_SAVED",
    "EXIT_UNVERIFIED",
    "CannotDecide",
    "GuardResult",
    "MasterView",
    "NoRoom",
    "guard",
    "verify_salvage",
]

EXIT_SAVED = 10  # bytes would be lost; they are saved (now or by an earlier run): may start
EXIT_CANNOT_DECIDE = 11  # controller or master unreachable, no master, store unreadable: refused
EXIT_NO_ROOM = 12  # bytes would be lost and --out has no room for them: refused
EXIT_UNVERIFIED = 13  # cannot decide, but --allow-unverified: may start, nothing saved
GUARD_FILE = "guard.json"
GUARD_KIND = "mqctl-guard"
TMP_PREFIX = ".guard-tmp-"
RULE = (
    "AutoSwitchHAClient.doTruncate (RocketMQ 5.3.3): EpochFileCache.findConsistentPoint of the local "
    "epochs (last one ending at the store's max offset) against the master's (last one ending at its "
    "max offset): newest local epoch first, the first the master has with the same startOffset gives "
    "min(localEnd, masterEnd); truncateFiles(point)"
)


class CannotDecide(MqctlError):
    """The guard cannot tell what the broker would lose: refuse the start (unless --allow-unverified)."""

    exit_code = EXIT_CANNOT_DECIDE


class NoRoom(MqctlError):
    """Bytes would be lost and --out cannot hold them: refuse the start; nothing partial is left."""

    exit_code = EXIT_NO_ROOM


@dataclass
class MasterView:
    """What the controller and the master said: the master's id, address, epoch, entries, max offset."""

    broker_id: int | None
    address: str
    master_epoch: int
    entries: list[EpochEntry]
    max_offset: int
    cluster_name: str = ""
    broker_name: str = ""


@dataclass
class GuardResult:
    store: str
    outcome: str  # nothing-to-lose | saved | already-saved | would-save | unverified
    exit_code: int
    reason: str = ""
    cluster_name: str | None = None
    broker_name: str | None = None
    broker_id: int | None = None
    local_epochs: list[EpochEntry] = field(default_factory=list)
    master: MasterView | None = None
    consistent_point: int | None = None
    max_offset: int | None = None
    bytes_to_lose: int = 0
    salvage: str | None = None
    messages: int | None = None
    digest: str | None = None
    replay: str | None = None
    read_bytes: int = 0  # commitlog bytes the decision read (the tail's salvage apart)

    def to_dict(self) -> dict[str, Any]:
        m = self.master
        return {
            **camel_fields(
                self, "store", "outcome", "exit_code", "reason", "cluster_name", "broker_name", "broker_id"
            ),
            "localEpochs": [{"epoch": e.epoch, "startOffset": e.start_offset} for e in self.local_epochs],
            "master": None
            if m is None
            else {
                "brokerId": m.broker_id,
                "address": m.address,
                "masterEpoch": m.master_epoch,
                "maxOffset": m.max_offset,
                "epochs": [{"epoch": e.epoch, "startOffset": e.start_offset} for e in m.entries],
            },
            **camel_fields(
                self,
                "consistent_point",
                "max_offset",
                "bytes_to_lose",
                "salvage",
                "messages",
                "digest",
                "replay",
            ),
            "decisionReadBytes": self.read_bytes,
            "rule": RULE,
        }


def loss_pointer(
    cluster: str | None,
    broker: str | None,
    old_master_id: int | None,
    new_max: int | None,
    old_max: int | None,
) -> dict[str, str] | None:
    """What to run after an election that lost bytes (for history, health --doctor and the status
    page): the guard before the old master restarts, and the replay of what it will save. The salvage's
    name is the guard's (the consistent point is where the new master's epoch starts: its maxOffset at
    the election; the end, the old master's last reported maxOffset, when its store ends there)."""
    if old_master_id is None or new_max is None or old_max is None or old_max <= new_max:
        return None
    name = salvage_name(cluster or "CLUSTER", broker or "BROKER", old_master_id, new_max, old_max)
    return {
        "salvageName": name,
        "guard": f"mqctl recover guard STORE_OF_BROKER_{old_master_id} --out DIR (before broker "
        f"{old_master_id} of {broker} restarts; it saves DIR/{name})",
        "replay": f"mqctl recover replay DIR/{name} -n NAMESRV",
    }


# --- the store, read only as far as the decision needs ------------------------------------------


@dataclass
class _Local:
    identity: Any
    entries: list[EpochEntry]
    log: Any  # CommitLog or None (no commitlog files)


def _read_local(store: Path) -> _Local:
    """brokerIdentity, the epoch file (.bak fallback, CRC checked) and the commitlog's file list."""
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLog  # lazy: start-up

    if not store.is_dir():
        raise StoreError(f"{store}: no such store directory")
    ident = read_identity(store)
    entries = read_epoch_file(store).entries
    log = None
    cl = store / COMMITLOG_DIR
    if cl.is_dir() and any(True for _ in os.scandir(cl)):
        try:
            log = CommitLog(cl)
        except StoreError as exc:
            if "no commitlog files" not in str(exc) and "empty directory" not in str(exc):
                raise
    elif cl.exists() and not cl.is_dir():
        raise StoreError(f"{cl}: not a directory")
    return _Local(ident, entries, log)


def _record_at(log: Any, offset: int) -> tuple[bool, int]:
    """Whether a whole, valid record starts at `offset` (RocketMQ's blank end-of-file marker there: the
    next file's first record); and the bytes read to tell."""
    from mqctl.store.commitlog import BLANK_MAGIC, RecordError, decode_record  # lazy: start-up

    read = 0
    for _ in range(2):
        i = log.file_for(offset)
        if i < 0:
            return False, read
        lf = log.files[i]
        pos = offset - lf.start
        if pos >= lf.size:
            return False, read
        try:
            with open(lf.path, "rb") as fh:
                head = os.pread(fh.fileno(), 8, pos)
                read += len(head)
                if len(head) < 8:
                    return False, read
                total = int.from_bytes(head[:4], "big", signed=True)
                magic = int.from_bytes(head[4:], "big")
                if magic == BLANK_MAGIC:
                    offset = lf.start + log.file_size
                    continue
                if total < 8 or total > (1 << 30) or pos + total > lf.size:
                    return False, read
                buf = os.pread(fh.fileno(), total, pos)
                read += len(buf)
        except OSError as exc:
            raise StoreError(f"{lf.path}: cannot read: {exc.strerror or exc}") from None
        try:
            decode_record(buf, 0, offset)
        except RecordError:
            return False, read
        return True, read
    return False, read


# --- the salvage directory ------------------------------------------------------------------------


def salvage_name(cluster: str, broker: str, broker_id: int | None, point: int, end: int) -> str:
    q = urllib.parse.quote
    return f"{q(cluster, safe='')}_{q(broker, safe='')}_{broker_id}_{point}-{end}"


def content_digest(root: Path) -> str:
    """The salvage's digest (summary.json `digest`): its files but summary.json and guard.json, as
    `tree_digest` computed it before they were written."""

    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        rel = p.relative_to(root)
        if rel.parts[0].startswith(HIDDEN) or rel.as_posix() in (SUMMARY_FILE, GUARD_FILE):
            continue
        h.update(f"{rel.as_posix()}\0".encode())
        with open(p, "rb") as fh:
            h.update(hashlib.file_digest(fh, "sha256").digest())
    return h.hexdigest()


def verify_salvage(root: Path) -> dict[str, Any]:
    """summary.json and guard.json of a guard's salvage whose files match its digest; StoreError
    naming what is wrong otherwise."""

    try:
        summary = json.loads((root / SUMMARY_FILE).read_text())
        meta = json.loads((root / GUARD_FILE).read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{root}: not a complete guard salvage ({exc})") from None
    if not isinstance(summary, dict) or not isinstance(meta, dict) or meta.get("kind") != GUARD_KIND:
        raise StoreError(f"{root}: not a guard salvage ({GUARD_FILE} of kind {GUARD_KIND} missing)")
    got = content_digest(root)
    if got != summary.get("digest") or got != meta.get("digest"):
        raise StoreError(
            f"{root}: its files do not match its digest {summary.get('digest')} (found {got}): "
            f"damaged or incomplete"
        )
    return meta


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirs, files in os.walk(root, topdown=False):
        for name in files:
            fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(dirpath))


def _fsync_dir(d: Path) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _no_room(exc: BaseException) -> bool:
    return (
        (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT))
        or "No space left on device" in str(exc)
        or "Disk quota exceeded" in str(exc)
    )


def _salvage_tail(
    store: Path, point: int, out: Path, name: str, decision: dict[str, Any]
) -> tuple[Path, dict[str, Any]]:
    """The store's records from `point` to the end of its files, as `recover salvage` writes them
    (one broker set, this replica, nothing to compare against: the new master is elsewhere), into
    out/name, via out/.guard-tmp-name-PID, fsynced, renamed."""
    # lazy: start-up
    from mqctl.pipeline.engine import require_local
    from mqctl.pipeline.ranges import DEFAULT_RANGE_SIZE
    from mqctl.pipeline.salvage import SalvageInput, run_salvage
    from mqctl.recover.inspect import inspect_store

    require_local()
    rep = inspect_store(store, keep_chains=True)
    c, b = rep.cluster_name or "", rep.broker_name or ""
    inp = SalvageInput(plan={"brokerSets": [], "unmatched": []})
    if rep.scan is not None:
        inp.chains.update(rep.scan.chains)
        rep.scan.chains = {}
    meta = {
        "clusterName": c,
        "brokerName": b,
        "store": rep.path,
        "brokerId": rep.broker_id,
        "rank": 0,
        "epochs": [(e.start_offset, e.epoch) for e in rep.epochs],
        "setId": 0,
        "storeId": 0,
    }
    inp.specs.append(("candidate", rep.path, point, None, meta))
    inp.sets.append(
        {
            "clusterName": c,
            "brokerName": b,
            "source": None,
            "comparedFrom": None,
            "comparedTo": None,
            "replicas": [
                {
                    "store": rep.path,
                    "brokerId": rep.broker_id,
                    "state": rep.state,
                    "truncateTo": point,
                    "maxOffset": rep.max_offset,
                    "bytesRead": max(0, rep.min_offset + rep.total_bytes - point),
                }
            ],
        }
    )
    inp.cut(DEFAULT_RANGE_SIZE)
    tmp = out / f"{TMP_PREFIX}{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    try:
        doc = run_salvage(None, inp, tmp, show_progress=False)
        meta_doc = {
            "kind": GUARD_KIND,
            **decision,
            "digest": doc["digest"],
            "messages": doc["messages"],
            "savedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / GUARD_FILE).write_text(json.dumps(meta_doc, indent=2) + "\n")
        _fsync_tree(tmp)
        final = out / name
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():
                raise
            # another guard of the same store got there first: its salvage stands if it is whole
            verify_salvage(final)
            shutil.rmtree(tmp, ignore_errors=True)
        _fsync_dir(out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if _no_room(exc):
            raise NoRoom(
                f"{out}: no room for the {decision['bytesToLose']} bytes to save ({exc}); nothing "
                f"was left there, the broker must not start"
            ) from None
        raise
    return final, doc


def _free_bytes(d: Path) -> int:
    st = os.statvfs(d)
    return st.f_bavail * st.f_frsize


# --- the decision -------------------------------------------------------------------------------


def guard(
    store: str | os.PathLike[str],
    *,
    out: str | os.PathLike[str] | None,
    ask_master: Callable[[str], MasterView],
    broker_name: str | None = None,
    dry_run: bool = False,
    allow_unverified: bool = False,
    replay_hint: str = "",
) -> GuardResult:
    """Decide, and save when bytes would be lost. `ask_master(brokerName)` asks the controller and the
    master (raises MqctlError when it cannot). CannotDecide / NoRoom for a refused start (CannotDecide
    is turned into an `unverified` result with allow_unverified)."""
    root = Path(store).absolute()
    res = GuardResult(str(root), "nothing-to-lose", 0)
    try:
        _decide(root, res, ask_master, broker_name)
    except MqctlError as exc:
        if isinstance(exc, NoRoom):
            raise
        why = str(exc)
        if not isinstance(exc, CannotDecide):
            why = f"cannot decide: {why}"
        if not allow_unverified:
            raise CannotDecide(why) from None
        res.outcome, res.exit_code, res.reason = "unverified", EXIT_UNVERIFIED, why
        return res
    if res.bytes_to_lose <= 0:
        return res
    assert res.consistent_point is not None and res.max_offset is not None
    name = salvage_name(
        res.cluster_name or "", res.broker_name or "", res.broker_id, res.consistent_point, res.max_offset
    )
    outp = None if out is None else Path(out).absolute()
    if outp is None:
        raise CannotDecide(
            f"{res.bytes_to_lose} bytes past offset {res.consistent_point} would be lost and "
            f"no --out directory is given to save them to"
        )
    res.replay = f"mqctl recover replay {outp / name}{replay_hint}"
    final = outp / name
    if final.exists():
        try:
            meta = verify_salvage(final)
        except StoreError as exc:
            if dry_run:
                res.reason = f"an earlier salvage is damaged and would be saved again: {exc}"
            else:
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
                aside = outp / f"{name}.damaged-{stamp}"
                os.rename(final, aside)
                res.reason = f"an earlier salvage was damaged and moved to {aside}: {exc}"
        else:
            res.outcome, res.exit_code = "already-saved", EXIT_SAVED
            res.salvage, res.digest, res.messages = str(final), meta.get("digest"), meta.get("messages")
            res.reason = "saved by an earlier run (its files match its digest)"
            return res
    if dry_run:
        res.outcome, res.exit_code = "would-save", EXIT_SAVED
        res.salvage = str(final)
        return res
    if not outp.is_dir():
        raise CannotDecide(f"{outp}: --out is not a directory (create it first)")
    need = res.bytes_to_lose + (1 << 20)
    free = _free_bytes(outp)
    if free < need:
        raise NoRoom(
            f"{outp}: no room: {free} bytes free, the {res.bytes_to_lose} bytes past offset "
            f"{res.consistent_point} need about {need}; nothing was written, the broker must not "
            f"start"
        )
    skip = ("salvage", "digest", "messages", "outcome", "exitCode", "reason")
    decision = {k: v for k, v in res.to_dict().items() if k not in skip}
    path, doc = _salvage_tail(root, res.consistent_point, outp, name, decision)
    res.outcome, res.exit_code = "saved", EXIT_SAVED
    res.salvage, res.digest, res.messages = str(path), doc["digest"], doc["messages"]
    return res


def _decide(
    root: Path, res: GuardResult, ask_master: Callable[[str], MasterView], broker_name: str | None
) -> None:
    try:
        local = _read_local(root)
    except StoreError as exc:
        raise CannotDecide(f"cannot decide: the store cannot be read: {exc}") from None
    ident = local.identity
    res.local_epochs = local.entries
    if ident is not None:
        res.cluster_name, res.broker_name = ident.cluster_name, ident.broker_name
        res.broker_id = ident.broker_id
    if local.log is None:
        res.reason = "the store holds no commitlog files: nothing to lose"
        return
    if not local.entries:
        res.reason = (
            "the store has no epoch entries: RocketMQ skips the truncation ('Slave local "
            "epochCache is empty, skip truncate log')"
        )
        return
    name = broker_name or res.broker_name
    if not name:
        raise CannotDecide("cannot decide: the store has no brokerIdentity and no --broker-name was given")
    if res.broker_name and broker_name and broker_name != res.broker_name:
        raise CannotDecide(
            f"cannot decide: --broker-name {broker_name} but the store belongs to {res.broker_name}"
        )
    res.broker_name = name
    master = ask_master(name)
    res.master = master
    if master.broker_name and master.broker_name != name:
        raise CannotDecide(
            f"cannot decide: the master at {master.address} answers for broker set "
            f"{master.broker_name}, not {name}"
        )
    if res.broker_id is not None and master.broker_id == res.broker_id:
        res.reason = (
            f"this broker (id {res.broker_id}) is the master the controller names: it starts as "
            f"master and truncates nothing"
        )
        return
    # the point with this store's max offset unknown (its last epoch ends at Long.MAX_VALUE): where the
    # store and the master part, if the store holds anything there
    point = find_consistent_point(local.entries, LONG_MAX, master.entries, master.max_offset)
    if point < 0:
        raise CannotDecide(
            f"cannot decide: no consistent point between the store's epochs "
            f"{[e.line() for e in local.entries]} and the master's "
            f"{[e.line() for e in master.entries]} (RocketMQ's handshake fails: the store "
            f"does not belong to this master's history)"
        )
    res.consistent_point = point
    has, n = _record_at(local.log, point)
    res.read_bytes = n
    if not has:
        res.reason = f"no record at or past the consistent point {point}: nothing to lose"
        return
    # bytes would be lost: the store's max offset, as RocketMQ's recovery finds it
    from mqctl.recover.inspect import inspect_store  # lazy: start-up

    try:
        rep = inspect_store(root)
    except StoreError as exc:
        raise CannotDecide(f"cannot decide: the store cannot be read: {exc}") from None
    exact = find_consistent_point(local.entries, rep.max_offset, master.entries, master.max_offset)
    res.consistent_point = exact
    res.max_offset = rep.max_offset
    res.bytes_to_lose = max(0, rep.max_offset - exact)
    res.reason = (
        f"the master's history parts from this store at {exact}: RocketMQ would truncate "
        f"{res.bytes_to_lose} bytes"
    )
    if res.bytes_to_lose <= 0:
        res.reason = f"the store ends at {rep.max_offset}, at or before the consistent point: nothing to lose"
