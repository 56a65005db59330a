"""The simulated disk: mqctl's journal (mqctl/raft/journal.py) on files kept in memory.

The file layer is `mqctl.raft.storage.Storage`'s, in its crash simulator's semantics
(MQCTL_CRASH_SIM): a write or truncation stays pending until the file's `sync`; a rename and a
directory fsync are durable at once. What the simulator adds:

* a *process crash* keeps the pending bytes (they were in the kernel's page cache); a *power
  loss* drops them, and a *torn write* lands a prefix of the first pending write (a sector that
  was half written when the power went);
* every fsync takes simulated time: a blocking one (a follower's, term and vote, truncation)
  holds its node for that long, one of the journal's sync thread (`sync_soon`) completes later
  as an event; a slow or stalled disk is a long latency;
* the journal's sync thread is an object the simulator drives (`SimSyncer`), not a thread.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mqctl.raft.journal import DurableJournal, JournalFactory
from mqctl.raft.storage import File, Storage

if TYPE_CHECKING:
    from mqctl.dsim.world import SimNode


class Inode:
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data = bytearray()


class Disk:
    """One node's disk: durable names and contents, and the files open on it."""

    def __init__(self) -> None:
        self.names: dict[str, Inode] = {}
        self.open_files: list[SimFile] = []

    def crash(self) -> None:
        """The process died: what it wrote reached the page cache and stays."""
        for f in self.open_files:
            f.flush_pending()
            f.closed = True
        self.open_files = []

    def power_loss(self, torn_at: float | None) -> int:
        """The machine lost power: unsynced bytes are gone. With `torn_at` (0..1) the first pending
        write of each file lands that fraction of its bytes. Returns the bytes dropped."""
        lost = 0
        for f in self.open_files:
            lost += sum(len(d) or 1 for _, _, d in f.pending)
            if torn_at is not None and f.pending and f.pending[0][0] == "w":
                _, offset, data = f.pending[0]
                part = data[: int(len(data) * torn_at)]
                if part:
                    f.write_now(part, offset)
            f.pending = []
            f.closed = True
        self.open_files = []
        return lost


class SimFile(File):
    """An open file of the simulated disk (the crash simulator's SimFile, in memory)."""

    def __init__(self, storage: SimStorage, path: str, inode: Inode) -> None:
        super().__init__(storage, path, 0)
        self.inode = inode
        self.pending: list[tuple[str, int, bytes]] = []
        self.closed = False
        self.sim: SimStorage = storage

    def pwrite(self, data: bytes, offset: int) -> None:
        self.sim.check(self.path)
        self.pending.append(("w", offset, bytes(data)))

    def truncate(self, size: int) -> None:
        self.sim.check(self.path)
        self.pending.append(("t", size, b""))

    def write_now(self, data: bytes, offset: int) -> None:
        buf = self.inode.data
        if len(buf) < offset:
            buf.extend(bytes(offset - len(buf)))
        buf[offset : offset + len(data)] = data

    def flush_pending(self) -> None:
        for op, offset, data in self.pending:
            if op == "t":
                del self.inode.data[offset:]
            else:
                self.write_now(data, offset)
        self.pending = []

    def sync(self) -> None:
        self.sim.check(self.path, sync=True)
        if self.closed:
            raise OSError(errno.EBADF, "closed (replaced by a compaction)", self.path)
        self.flush_pending()

    def deleted(self) -> bool:
        return False

    def close(self) -> None:
        self.pending = []  # never synced: lost, as on a power loss
        self.closed = True
        if self in self.sim.disk.open_files:
            self.sim.disk.open_files.remove(self)


class SimStorage(Storage):
    """Storage on a `Disk`; each fsync costs its node simulated time (`on_sync`)."""

    def __init__(self, disk: Disk, on_sync: Callable[[str], None]) -> None:
        super().__init__(crash_sim=False, fault_inject=False)
        self.disk = disk
        self.on_sync = on_sync

    def describe(self) -> str:
        return "simulated"

    def check(self, path: str, *, directory: bool = False, sync: bool = False) -> None:
        if sync:
            self.on_sync(path)

    def open(self, path: str, *, create: bool = False, truncate: bool = False) -> File:
        inode = self.disk.names.get(path)
        if inode is None:
            if not create:
                raise FileNotFoundError(errno.ENOENT, "No such file", path)
            inode = self.disk.names[path] = Inode()
        elif truncate:
            inode.data = bytearray()
        f = SimFile(self, path, inode)
        self.disk.open_files.append(f)
        return f

    def read(self, path: str) -> bytes | None:
        inode = self.disk.names.get(path)
        return None if inode is None else bytes(inode.data)

    def rename(self, src: str, dst: str) -> None:
        self.disk.names[dst] = self.disk.names.pop(src)

    def fsync_dir(self, directory: str) -> None:
        self.check(directory, directory=True, sync=True)

    def remove(self, path: str) -> None:
        self.disk.names.pop(path, None)


class SimSyncer:
    """The journal's sync thread (journal._Syncer), driven by the simulator: a sync asked for
    completes after the disk's latency, as an event; one at a time, the latest ask next."""

    def __init__(self, journal: SimJournal) -> None:
        self.journal = journal
        self.node = journal.node
        self.busy = False
        self.next: tuple[File, int, int] | None = None
        self.hint: int | None = None
        self.done: tuple[int, int, OSError | None] | None = None
        self.gen = self.node.generation

    def request_sync(self, file: File, end: int, gen: int) -> None:
        self.next = (file, end, gen)
        self._start()

    def request_hint(self, hint: int) -> None:
        self.hint = hint
        self._start()

    def _start(self) -> None:
        if self.busy:
            return
        self.busy = True
        world = self.node.world
        world.after(world.disk_latency(self.node), f"disk {self.node.addr}", self._complete)

    def _complete(self) -> None:
        self.busy = False
        if self.gen != self.node.generation:  # the process died meanwhile
            return
        self._run_once()
        if self.next is not None or self.hint is not None:
            self._start()
        self.node.wake()

    def _run_once(self) -> None:
        sync, hint = self.next, self.hint
        self.next = self.hint = None
        if sync is not None:
            file, end, gen = sync
            error: OSError | None = None
            try:
                with self.node.background():
                    file.sync()
            except OSError as exc:
                error = exc
            kept = self.done
            if kept is None or kept[2] is None or kept[0] != gen:
                self.done = (gen, end, error)
        if hint is not None:
            with self.node.background():
                self.journal._store_hint(hint)

    def take(self) -> tuple[int, int, OSError | None] | None:
        done, self.done = self.done, None
        return done

    def stop(self) -> None:
        while self.next is not None or self.hint is not None:
            self._run_once()


class SimJournal(DurableJournal):
    """mqctl's durable journal with the simulator's sync thread. `lie_durable` is a planted bug of
    the mutation tests (tests/dsim): the journal reports entries durable before they are."""

    def __init__(self, path: str, storage: Storage, node: SimNode) -> None:
        self.node = node
        mutation = node.world.mutation
        lies = ("follower-acks-before-fsync", "leader-counts-before-durable")
        self.lie = mutation if mutation in lies else None
        super().__init__(path, storage)

    def _sync_thread(self) -> Any:
        if self._syncer is None:
            self._syncer = SimSyncer(self)  # type: ignore[assignment]
        return self._syncer

    def _timed_sync(self, file: File) -> None:
        file.sync()

    def durable_index(self) -> int:
        lie = self.lie  # asked on every tick: the run's mutation looked at once
        if lie is not None and len(self):
            leads = self.node.sync is not None and self.node.sync.is_leader()
            if leads == (lie == "leader-counts-before-durable"):
                return int(self[-1][1])
        return super().durable_index()

    def setCurrentTerm(self, term: int, votedForNodeId: str | None) -> None:
        if self.node.world.mutation == "term-vote-not-persisted":
            self._term, self._voted = term, votedForNodeId
            return
        super().setCurrentTerm(term, votedForNodeId)


class SimJournalFactory(JournalFactory):
    def __init__(self, storage: Storage, node: SimNode) -> None:
        super().__init__(storage)
        self.node = node

    def __call__(self, path: str | None) -> Any:
        assert path is not None
        self.journal = self.node.journal = SimJournal(path, self.storage, self.node)
        return self.journal
