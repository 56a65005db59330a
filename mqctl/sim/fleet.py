"""A fleet of RocketMQ brokers over remoting, many per process: the load of bench/bench_scale.py and of
the tests that need thousands of heartbeating brokers (docs/sim.md).

One asyncio loop (uvloop when installed) sends pre-encoded JSON frames, many brokers per connection
(the opaque is the broker's index on its connection, so a frame is encoded once): it applies each
broker's id (1013), registers it (1003), then sends BROKER_HEARTBEAT (904) for every broker once a
second, spread evenly over the second, and times every answer; replica 1 of each broker set asks for
an election (1002) once beating, as a RocketMQ broker with no master does. It follows the controller
leader as a broker does (on 2007 or a lost connection it asks every node, 1005, who leads).

    python -m mqctl.sim.fleet HOST:PORT[,HOST:PORT...] FIRST COUNT [CLUSTER] [LEASE_MS]

prints one JSON line once every broker is registered, then reads commands on stdin: ``report``
(prints one JSON line: round trips per second, errors, lost beats, its CPU, the leader it beats),
``silence INDEX...`` (those brokers stop beating), ``quit``. Each broker listens at its registered
address (127.0.0.1, a port of its own) and the report says when its last 1008 came.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import struct
import sys
import threading
import time
from typing import Any

PER_CONNECTION = 100  # brokers per connection
CALL_OPAQUE = 1_000_000  # a broker's requests use its heartbeat opaque plus this


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (Linux)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def frame(code: int, opaque: int, ext: dict[str, str], body: bytes = b"") -> bytes:
    header = json.dumps(
        {
            "code": code,
            "extFields": ext,
            "flag": 0,
            "language": "JAVA",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": 475,
        },
        separators=(",", ":"),
    ).encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


_OPAQUE = re.compile(rb'"opaque":(-?\d+)')
_CODE = re.compile(rb'"code":(-?\d+)')


class Conn(asyncio.Protocol):
    """One generator connection: frames out, answers matched by opaque."""

    def __init__(self) -> None:
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.waiting: dict[int, tuple[float, asyncio.Future[int] | None]] = {}
        self.latencies: dict[int, list[float]] = {}  # second -> round trips (ms)
        self.errors = 0
        self.lost = 0
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for _, fut in self.waiting.values():
            if fut is not None and not fut.done():
                fut.set_result(-1)
        self.waiting.clear()

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        pos = 0
        now = time.monotonic()
        while len(buf) - pos >= 4:
            (total,) = struct.unpack_from(">i", buf, pos)
            if len(buf) - pos - 4 < total:
                break
            (hlen,) = struct.unpack_from(">i", buf, pos + 4)
            header = buf[pos + 8 : pos + 8 + (hlen & 0xFFFFFF)]
            pos += 4 + total
            m = _OPAQUE.search(header)
            if m is None:
                continue
            sent = self.waiting.pop(int(m.group(1)), None)
            if sent is None:
                continue
            code = int(_CODE.search(header).group(1))  # type: ignore[union-attr]
            started, fut = sent
            if fut is not None:
                if not fut.done():
                    fut.set_result(code)
            else:
                if code != 0:
                    self.errors += 1
                self.latencies.setdefault(int(time.time()), []).append((now - started) * 1000)
        self.buf = buf[pos:]

    def send(self, opaque: int, data: bytes, fut: asyncio.Future[int] | None = None) -> None:
        if self.closed or self.transport is None:
            if fut is not None:
                fut.set_result(-1)
            return
        if opaque in self.waiting and fut is None:
            self.lost += 1  # the previous beat of this broker was never answered
        self.waiting[opaque] = (time.monotonic(), fut)
        self.transport.write(data)


class PushSink(asyncio.Protocol):
    """A broker's own listening address, where the controller pushes NOTIFY_BROKER_ROLE_CHANGED (1008):
    the time of the last one is kept, by broker index."""

    def __init__(self, pushed: dict[int, float], index: int) -> None:
        self.pushed, self.index, self.buf = pushed, index, b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 8:
            (total,) = struct.unpack_from(">i", self.buf, 0)
            if len(self.buf) - 4 < total:
                return
            (hlen,) = struct.unpack_from(">i", self.buf, 4)
            m = _CODE.search(self.buf[8 : 8 + (hlen & 0xFFFFFF)])
            if m is not None and int(m.group(1)) == 1008:
                self.pushed[self.index] = time.time()
            self.buf = self.buf[4 + total :]


async def listen(count: int) -> tuple[list[str], dict[int, float]]:
    """One listening socket on 127.0.0.1 per broker, as a real broker has (its registered address),
    when the file limit allows (raised as far as needed); else addresses nobody listens at, whose
    1008s fail as they would for dead brokers."""

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 1024
    if soft < want and (hard == resource.RLIM_INFINITY or want <= hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        soft = want
    pushed: dict[int, float] = {}
    if soft < want:
        return [f"127.0.0.1:{20000 + i % 40000}" for i in range(count)], pushed
    loop = asyncio.get_running_loop()
    addresses = []
    for i in range(count):
        server = await loop.create_server(lambda i=i: PushSink(pushed, i), "127.0.0.1", 0)  # type: ignore[misc]
        addresses.append(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
    return addresses, pushed


async def find_leader(addresses: list[str]) -> str:
    """The remoting address of the node that says it leads (GET_METADATA_INFO, 1005)."""
    while True:
        for address in addresses:
            host, port = address.rsplit(":", 1)
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), 2)
                writer.write(frame(1005, 1, {}))
                (total,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 2))
                payload = await asyncio.wait_for(reader.readexactly(total), 2)
                writer.close()
            except (OSError, TimeoutError, asyncio.IncompleteReadError):
                continue
            (hlen,) = struct.unpack_from(">i", payload, 0)
            header = json.loads(payload[4 : 4 + (hlen & 0xFFFFFF)])
            if (header.get("extFields") or {}).get("isLeader") == "true":
                return address
        await asyncio.sleep(0.1)


class Fleet:
    """Connections to the current controller leader; follows it when it changes, as a RocketMQ
    broker does (it asks the controllers who leads on 2007 or a lost connection)."""

    def __init__(self, addresses: list[str], count: int) -> None:
        self.addresses = addresses
        self.count = count
        self.conns: list[Conn] = []
        self.leader = ""
        self.lock = asyncio.Lock()
        self.stats = {"latencies": {}, "errors": 0, "lost": 0}  # of connections closed so far

    async def follow(self, seen: list[Conn] | None = None) -> None:
        async with self.lock:
            if seen is not None and self.conns is not seen:
                return  # somebody else followed already
            for c in self.conns:
                for sec, values in c.latencies.items():
                    self.stats["latencies"].setdefault(sec, []).extend(values)  # type: ignore[attr-defined]
                self.stats["errors"] += c.errors  # type: ignore[operator]
                self.stats["lost"] += c.lost  # type: ignore[operator]
                if c.transport is not None:
                    c.transport.close()
            self.leader = await find_leader(self.addresses)
            host, port = self.leader.rsplit(":", 1)
            loop = asyncio.get_running_loop()
            conns = []
            for _ in range(0, self.count, PER_CONNECTION):
                _, proto = await loop.create_connection(Conn, host, int(port))
                conns.append(proto)
            self.conns = conns

    def where(self, i: int) -> tuple[Conn, int]:
        return self.conns[i // PER_CONNECTION], i % PER_CONNECTION


async def worker_main(addresses: list[str], first: int, count: int, cluster: str, lease_ms: int) -> None:
    loop = asyncio.get_running_loop()
    brokers = [(f"scale-{(first + i) // 3:05d}", (first + i) % 3 + 1) for i in range(count)]
    fleet = Fleet(addresses, count)
    own, pushed = await listen(count)
    await fleet.follow()

    async def call(i: int, code: int, ext: dict[str, str], body: bytes = b"") -> int:
        while True:
            conns = fleet.conns
            conn, opaque = fleet.where(i)
            opaque += CALL_OPAQUE  # apart from the broker's heartbeats, which may be in flight too
            fut: asyncio.Future[int] = loop.create_future()
            conn.send(opaque, frame(code, opaque, ext, body), fut)
            try:
                answer = await asyncio.wait_for(fut, 30)
            except TimeoutError:
                answer = -1
            if answer in (-1, 2007):  # connection lost, or not the leader: follow the leader
                await fleet.follow(conns)
                continue
            return answer

    async def register(i: int) -> None:
        name, bid = brokers[i]
        addr = own[i]
        for code_, ext in (
            (
                1013,
                {
                    "clusterName": cluster,
                    "brokerName": name,
                    "appliedBrokerId": str(bid),
                    "registerCheckCode": f"{addr};1",
                },
            ),
            (1003, {"clusterName": cluster, "brokerName": name, "brokerId": str(bid), "brokerAddress": addr}),
        ):
            for _ in range(20):
                code = await call(i, code_, ext)
                if code == 0:
                    break
                await asyncio.sleep(0.5)
            else:
                raise RuntimeError(f"cannot register {name}/{bid} ({code_}): code {code}")

    started = time.monotonic()
    window = asyncio.Semaphore(256)

    async def guarded(i: int) -> None:
        async with window:
            await register(i)

    await asyncio.gather(*(guarded(i) for i in range(count)))
    print(json.dumps({"registered": count, "seconds": time.monotonic() - started}), flush=True)

    beats = []
    for i, (name, bid) in enumerate(brokers):
        beats.append(
            frame(
                904,
                i % PER_CONNECTION,
                {
                    "clusterName": cluster,
                    "brokerAddr": own[i],
                    "brokerName": name,
                    "brokerId": str(bid),
                    "epoch": "1",
                    "maxOffset": "1000",
                    "confirmOffset": "1000",
                    "heartbeatTimeoutMills": str(lease_ms),
                    "electionPriority": "0",
                },
            )
        )
    silenced: set[int] = set()
    last_sent: dict[int, float] = {}

    def report() -> dict[str, Any]:
        out: dict[str, Any] = {
            "latencies": {},
            "errors": fleet.stats["errors"],
            "lost": fleet.stats["lost"],
            "cpu": proc_cpu_seconds(os.getpid()),
            "leader": fleet.leader,
            "last_sent": {str(first + i): t for i, t in last_sent.items() if i in silenced},
            "pushed": {str(first + i): t for i, t in pushed.items()},
        }
        for sec, values in fleet.stats["latencies"].items():  # type: ignore[attr-defined]
            out["latencies"].setdefault(str(sec), []).extend(values)
        for c in fleet.conns:
            for sec, values in c.latencies.items():
                out["latencies"].setdefault(str(sec), []).extend(values)
            out["errors"] += c.errors
            out["lost"] += c.lost
        return out

    def commands() -> None:
        for line in sys.stdin:
            cmd = line.split()
            if cmd and cmd[0] == "silence":
                loop.call_soon_threadsafe(silenced.update, [int(t) - first for t in cmd[1:]])
            elif cmd and cmd[0] == "report":
                print(json.dumps(asyncio.run_coroutine_threadsafe(_async(report), loop).result()), flush=True)
            elif cmd and cmd[0] == "quit":
                os._exit(0)
        os._exit(0)

    threading.Thread(target=commands, daemon=True).start()

    async def elect() -> None:
        """As a RocketMQ broker does once registered and beating: with no master, ask for an
        election (1002) -- here the replica with id 1 of each set, after its first beats; then, as
        its master does once the slaves have caught up, widen the SyncStateSet to the three (1001),
        so that a master that stops beating has a slave to be replaced by."""
        await asyncio.sleep(1.5)
        sem = asyncio.Semaphore(64)

        async def one(i: int) -> None:
            name, bid = brokers[i]
            async with sem:
                elect_ext = {"clusterName": cluster, "brokerName": name, "brokerId": str(bid)}
                if await call(i, 1002, elect_ext) != 0:
                    return
                # the set's first election: master 1 at masterEpoch 1, SyncStateSet {1} at epoch 1
                await call(
                    i,
                    1001,
                    {"clusterName": cluster, "brokerName": name, "masterBrokerId": "1", "masterEpoch": "1"},
                    b'{"syncStateSet":[1,2,3],"syncStateSetEpoch":1}',
                )

        await asyncio.gather(*(one(i) for i, (_, bid) in enumerate(brokers) if bid == 1))

    electing = asyncio.create_task(elect())
    tick = 0.01  # every broker once a second, spread evenly over the second
    i = 0
    owed = 0.0
    next_at = time.monotonic()
    while True:
        if any(c.closed for c in fleet.conns):
            await fleet.follow(fleet.conns)
        owed += count * tick
        while owed >= 1:
            owed -= 1
            if i not in silenced:
                conn, opaque = fleet.where(i)
                conn.send(opaque, beats[i])
                last_sent[i] = time.time()
            i = (i + 1) % count
        next_at += tick
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    del electing


async def _async(fn: Any) -> Any:
    return fn()


def main(argv: list[str]) -> None:
    addresses, first, count = argv[0].split(","), int(argv[1]), int(argv[2])
    cluster = argv[3] if len(argv) > 3 else "FleetCluster"
    lease_ms = int(argv[4]) if len(argv) > 4 else 10_000
    try:
        import uvloop  # lazy: optional uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(worker_main(addresses, first, count, cluster, lease_ms))


if __name__ == "__main__":
    main(sys.argv[1:])
