"""`mqctl recover replay SALVAGE_DIR`: publish a salvage's messages to the broker set they came from.

Each message is sent with SEND_MESSAGE_V2 to the master of its broker set (the salvage's `brokerName`
partition), to its topic and original queue (modulo the topic's write queues), with its body, flag,
compression bits, born timestamp and every stored property (UNIQ_KEY, KEYS, TAGS, ...), plus
MQCTL_ORIGIN_BORN_TIMESTAMP and MQCTL_ORIGIN_BORN_HOST.

Never twice: before a message is sent, the master's index is asked for its UNIQ_KEY (QUERY_MESSAGE
with `_UNIQUE_KEY_QUERY`); a message it has is `alreadyPresent`. A checkpoint in
SALVAGE_DIR/.mqctl-replay/checkpoint.log records, fsynced per batch, the intent before a batch is sent
(`S key`) and each outcome after (`D key status`): a rerun skips what is done, and a message whose
intent has no outcome (the process was killed, the broker went away) is looked up again before it
could be sent again; one without UNIQ_KEY cannot be looked up and is reported failed, not resent.
"""

from __future__ import annotations

import functools
import json
import os
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mqctl.errors import MqctlError, StoreError, UnreachableError, UsageError
from mqctl.remoting.namesrv import cluster_info

__all__ = ["CHECKPOINT", "ReplayOptions", "load_salvage", "replay"]

CHECKPOINT = ".mqctl-replay/checkpoint.log"
BATCH = 256
SYSTEM_TOPIC_PREFIXES = ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_", "rmq_sys_")
COLUMNS = (
    "topic",
    "queueId",
    "flag",
    "sysFlag",
    "bornTimestamp",
    "bornHost",
    "reconsumeTimes",
    "uniqKey",
    "rawProperties",
    "body",
    "messageKey",
    "crcOk",
)


class ReplayRefused(MqctlError):
    """Some messages could not be published (the broker refused them, or their topic is missing)."""

    exit_code = 3


@dataclass
class ReplayOptions:
    namesrv: list[str] | None = None  # name servers: the broker set's master and the topics' routes
    broker_addr: str | None = None  # or this broker directly (it must be of the salvage's set)
    rate: float | None = None  # messages per second at most
    dry_run: bool = False
    group: str = "mqctl_replay"
    timeout: float = 5.0
    window: int = 64  # requests in flight
    busy_retries: int = 10
    namesrv_text: str = "NAMESRV"
    include_crc_errors: bool = False  # send messages whose body fails its CRC too
    tls_ca: str | None = None  # TLS to brokers and name servers (tls.enable)
    tls_cert: str | None = None
    tls_key: str | None = None
    access_key: str | None = None  # ACL signing (AclClientRPCHook)
    secret_key: str | None = None


@dataclass
class SetReport:
    cluster_name: str
    broker_name: str
    target: str = ""
    messages: int = 0
    sent: int = 0
    already_present: int = 0
    done_earlier: int = 0
    would_send: int = 0
    failed: int = 0
    topics: dict[str, dict[str, int]] = field(default_factory=dict)

    def count(self, topic: str, what: str) -> None:
        t = self.topics.setdefault(
            topic,
            {"messages": 0, "sent": 0, "alreadyPresent": 0, "doneEarlier": 0, "wouldSend": 0, "failed": 0},
        )
        t[what] += 1


# --- the salvage --------------------------------------------------------------------------------


def load_salvage(root: Path) -> tuple[dict[str, Any], list[tuple[str, str, list[Path]]]]:
    """summary.json (checked against the files' digest) and, per broker set, its part files in order.
    StoreError (exit 4) when it is not a salvage, or is cut or corrupt."""
    from mqctl.pipeline.guard import content_digest  # lazy: start-up

    if not root.is_dir():
        raise StoreError(f"{root}: no such salvage directory")
    try:
        summary = json.loads((root / "summary.json").read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{root}: not a salvage (summary.json: {exc})") from None
    if not isinstance(summary, dict) or summary.get("kind") != "mqctl-salvage":
        raise StoreError(f"{root}: not a salvage (summary.json is not of kind mqctl-salvage)")
    got = content_digest(root)
    if got != summary.get("digest"):
        raise StoreError(
            f"{root}: its files do not match its digest (summary.json says "
            f"{summary.get('digest')}, the files give {got}): cut or corrupt, not replayed"
        )
    sets = []
    msgs = root / "messages"
    for cdir in sorted(msgs.glob("clusterName=*")):
        for bdir in sorted(cdir.glob("brokerName=*")):
            c = urllib.parse.unquote(cdir.name.split("=", 1)[1])
            b = urllib.parse.unquote(bdir.name.split("=", 1)[1])
            sets.append((c, b, sorted(bdir.glob("part-*.parquet"))))
    return summary, sets


def _rows(parts: list[Path]) -> Iterator[list[dict[str, Any]]]:
    import pyarrow.parquet as pq  # lazy: pyarrow

    for part in parts:
        try:
            f = pq.ParquetFile(part)
            for batch in f.iter_batches(batch_size=BATCH, columns=list(COLUMNS)):
                yield batch.to_pylist()
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise StoreError(f"{part}: cannot read: {exc}") from None


# --- the checkpoint -----------------------------------------------------------------------------


class Checkpoint:
    """Intents and outcomes, one line each, appended and fsynced per batch, to `path`; what every
    checkpoint file of the directory says is read first (a Spark run writes one per part file)."""

    def __init__(self, path: Path, dry_run: bool) -> None:
        self.path = path
        self.done: dict[str, str] = {}
        self.intents: set[str] = set()
        for f in sorted(path.parent.glob("checkpoint*.log")) if path.parent.is_dir() else []:
            for ln in f.read_text(errors="replace").splitlines():
                parts = ln.split("\t")
                if len(parts) >= 2 and parts[0] == "S":
                    self.intents.add(parts[1])
                elif len(parts) >= 3 and parts[0] == "D":
                    self.done[parts[1]] = parts[2]
        self.intents -= set(self.done)
        self._fh = None
        if not dry_run:
            path.parent.mkdir(exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def write(self, lines: list[str]) -> None:
        if self._fh is None or not lines:
            return
        self._fh.write("".join(ln + "\n" for ln in lines))
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


# --- the replay ---------------------------------------------------------------------------------


def connector(opts: ReplayOptions) -> tuple[Callable[[str], Any], Callable[[], None]]:
    """(connect(address), close()): one RemotingConnection per address, with the options' TLS and ACL."""
    # lazy: start-up
    from mqctl.auth import client_context
    from mqctl.remoting.acl import AclCredentials
    from mqctl.remoting.client import RemotingConnection

    tls = (
        client_context(opts.tls_ca, opts.tls_cert, opts.tls_key)
        if (opts.tls_ca or opts.tls_cert or opts.tls_key)
        else None
    )
    acl = AclCredentials(opts.access_key, opts.secret_key or "") if opts.access_key else None
    conns: dict[str, RemotingConnection] = {}

    def connect(address: str) -> RemotingConnection:
        c = conns.get(address)
        if c is None or c.closed:
            c = conns[address] = RemotingConnection(
                address, connect_timeout=min(3.0, opts.timeout), tls=tls, acl=acl
            )
        return c

    def close() -> None:
        for c in conns.values():
            c.close()

    return connect, close


def replay(root: str | os.PathLike[str], opts: ReplayOptions, spark: Any = None) -> dict[str, Any]:
    """Publish the salvage at `root`: in this process, or on Spark (`spark`, a session: one task per
    part file, each with its own connection and checkpoint file). Returns the report; raises
    MqctlError for what stops it (the report so far in `exc.report`)."""
    rootp = Path(root).absolute()
    summary, sets = load_salvage(rootp)
    reports: list[SetReport] = []
    failures: list[dict[str, Any]] = []
    missing: dict[tuple[str, str], dict[str, Any]] = {}
    error: MqctlError | None = None
    if spark is not None:
        error = _on_spark(spark, rootp, sets, opts, reports, failures, missing)
    else:
        ck = Checkpoint(rootp / CHECKPOINT, opts.dry_run)
        connect, close = connector(opts)
        try:
            for c, b, parts in sets:
                rep = SetReport(c, b)
                reports.append(rep)
                _SetReplay(rep, parts, opts, connect, ck, failures, missing).run()
        except MqctlError as exc:
            error = exc
        finally:
            ck.close()
            close()
    doc = _report(rootp, reports, failures, missing, opts, summary)
    if error is not None:
        error.report = doc  # type: ignore[attr-defined]
        raise error
    return doc


def _task(root: str, opts: ReplayOptions, task: tuple[str, str, str, int]) -> dict[str, Any]:
    """One part file on an executor: its own connection and checkpoint file; the outcome as a dict (an
    error too: a task never fails, so Spark does not run it again)."""
    c, b, part, idx = task
    rep = SetReport(c, b)
    failures: list[dict[str, Any]] = []
    missing: dict[tuple[str, str], dict[str, Any]] = {}
    ck = Checkpoint(Path(root) / f".mqctl-replay/checkpoint-{idx:05d}.log", opts.dry_run)
    connect, close = connector(opts)
    error = None
    try:
        _SetReplay(rep, [Path(part)], opts, connect, ck, failures, missing).run()
    except MqctlError as exc:
        error = {"message": str(exc), "exitCode": exc.exit_code}
    finally:
        ck.close()
        close()
    return {"rep": dict(vars(rep)), "failures": failures, "missing": list(missing.values()), "error": error}


def _on_spark(
    spark: Any,
    root: Path,
    sets: list[tuple[str, str, list[Path]]],
    opts: ReplayOptions,
    reports: list[SetReport],
    failures: list[dict[str, Any]],
    missing: dict[tuple[str, str], dict[str, Any]],
) -> MqctlError | None:

    parts = [(c, b, str(p)) for c, b, ps in sets for p in ps]
    tasks = [(c, b, p, i) for i, (c, b, p) in enumerate(parts)]
    by_set = {(c, b): SetReport(c, b) for c, b, _ in sets}
    reports.extend(by_set.values())
    if not tasks:
        return None
    sc = spark.sparkContext
    results = sc.parallelize(tasks, len(tasks)).map(functools.partial(_task, str(root), opts)).collect()
    error: MqctlError | None = None
    for res in results:
        r = res["rep"]
        agg = by_set[(r["cluster_name"], r["broker_name"])]
        agg.target = agg.target or r["target"]
        for k in ("messages", "sent", "already_present", "done_earlier", "would_send", "failed"):
            setattr(agg, k, getattr(agg, k) + r[k])
        for t, counts in r["topics"].items():
            mine = agg.topics.setdefault(t, dict.fromkeys(counts, 0))
            for k, v in counts.items():
                mine[k] = mine.get(k, 0) + v
        failures.extend(res["failures"])
        for m in res["missing"]:
            have = missing.setdefault((m["brokerName"], m["topic"]), {**m, "messages": 0})
            have["messages"] += m["messages"]
        if res["error"] is not None and error is None:
            error = MqctlError(res["error"]["message"])
            error.exit_code = res["error"]["exitCode"]
    return error


def _report(
    root: Path,
    reports: list[SetReport],
    failures: list[dict[str, Any]],
    missing: dict[tuple[str, str], dict[str, Any]],
    opts: ReplayOptions,
    summary: dict[str, Any],
) -> dict[str, Any]:
    tot = {
        k: sum(getattr(r, a) for r in reports)
        for k, a in (
            ("messages", "messages"),
            ("sent", "sent"),
            ("alreadyPresent", "already_present"),
            ("doneEarlier", "done_earlier"),
            ("wouldSend", "would_send"),
            ("failed", "failed"),
        )
    }
    return {
        "salvage": str(root),
        "digest": summary.get("digest"),
        "dryRun": opts.dry_run,
        "checkpoint": str(root / CHECKPOINT),
        **tot,
        "brokerSets": [
            {
                "clusterName": r.cluster_name,
                "brokerName": r.broker_name,
                "target": r.target,
                "messages": r.messages,
                "sent": r.sent,
                "alreadyPresent": r.already_present,
                "doneEarlier": r.done_earlier,
                "wouldSend": r.would_send,
                "failed": r.failed,
                "topics": [{"topic": t, **v} for t, v in sorted(r.topics.items())],
            }
            for r in reports
        ],
        "missingTopics": sorted(missing.values(), key=lambda d: (d["brokerName"], d["topic"])),
        "failures": failures[:1000],
        "failuresOmitted": max(0, len(failures) - 1000),
    }


class _SetReplay:
    def __init__(
        self,
        rep: SetReport,
        parts: list[Path],
        opts: ReplayOptions,
        connect: Callable[[str], Any],
        ck: Checkpoint,
        failures: list[dict[str, Any]],
        missing: dict[tuple[str, str], dict[str, Any]],
    ) -> None:
        self.rep, self.parts, self.opts, self.connect, self.ck = rep, parts, opts, connect, ck
        self.failures, self.missing = failures, missing
        self.topic_state: dict[str, tuple[int, str | None]] = {}  # topic -> (write queues, why not)
        self.max_queue: dict[str, int] = {}
        self.sent_n = 0
        self.started = time.monotonic()

    # where to

    def _target(self) -> Any:
        from mqctl.remoting.client import RemotingError  # lazy: start-up

        o, b = self.opts, self.rep.broker_name
        if o.broker_addr:
            from mqctl.remoting import headers  # lazy: start-up

            conn = self._conn(o.broker_addr)
            try:
                ans = conn.invoke(headers.GET_BROKER_EPOCH_CACHE, None, b"", timeout=o.timeout)
            except RemotingError as exc:
                raise UnreachableError(f"{o.broker_addr}: {exc}") from None
            if ans.code == 0:
                got = headers.read_epoch_cache(ans.body).get("broker_name", "")
                if got and got != b:
                    raise UsageError(
                        f"the salvage is of broker set {b}, the broker at {o.broker_addr} is of "
                        f"{got}: not replayed (a salvage goes back to its own broker set)"
                    )
            self.rep.target = o.broker_addr
            return conn
        info = self._cluster_info()
        replicas = info.replicas(b)
        masters = [a for bid, a in replicas if bid == 0]
        if not replicas:
            known = sorted(info.broker_addrs)
            raise UsageError(
                f"the salvage is of broker set {b}, which the name server does not list (it "
                f"lists {', '.join(known) or 'none'}): not replayed (a salvage goes back to its "
                f"own broker set)"
            )
        if not masters:
            raise UnreachableError(
                f"broker set {b} has no master now (the name server lists only "
                f"{', '.join(a for _, a in replicas)}): run replay again once one is "
                f"elected"
            )
        self.rep.target = masters[0]
        return self._conn(masters[0])

    def _conn(self, address: str) -> Any:
        from mqctl.remoting.client import RemotingError  # lazy: start-up

        try:
            return self.connect(address)
        except RemotingError as exc:
            raise UnreachableError(str(exc)) from None

    def _cluster_info(self) -> Any:

        assert self.opts.namesrv
        return cluster_info(";".join(self.opts.namesrv), self.opts.timeout, connect=self._conn)

    def _topic(self, topic: str) -> tuple[int, str | None]:
        """(write queue count, None) or (0, why the topic cannot take the set's messages)."""
        st = self.topic_state.get(topic)
        if st is not None:
            return st
        if topic.startswith(SYSTEM_TOPIC_PREFIXES):
            st = (0, f"system topic {topic}: not replayed (its messages are the broker's own)")
        elif not self.opts.namesrv:
            st = (1 << 30, None)  # the broker says when it lacks the topic
        else:
            st = self._route(topic)
        self.topic_state[topic] = st
        return st

    def _route(self, topic: str) -> tuple[int, str | None]:
        # lazy: start-up
        from mqctl.remoting import producer as P
        from mqctl.remoting.client import RemotingError

        last = ""
        for ns in self.opts.namesrv or []:
            try:
                ans = self._conn(ns).invoke(
                    P.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, b"", timeout=self.opts.timeout
                )
            except (RemotingError, UnreachableError) as exc:
                last = str(exc)
                continue
            if ans.code == P.TOPIC_NOT_EXIST:
                return 0, "missing"
            if ans.code != 0:
                last = f"{ns}: {P.code_name(ans.code)}: {ans.remark or ''}"
                continue
            route = P.read_route(ans.body)
            for q in route.get("queueDatas") or []:
                if q.get("brokerName") == self.rep.broker_name:
                    if not int(q.get("perm", 6)) & 2:
                        return 0, f"topic {topic} is not writable on broker set {self.rep.broker_name}"
                    return max(1, int(q.get("writeQueueNums", 1))), None
            return 0, "missing"
        raise UnreachableError(f"no name server answered for topic {topic}: {last}")

    # the batches

    def run(self) -> None:
        conn = self._target()
        rows_seen = False
        for rows in _rows(self.parts):
            rows_seen = True
            self._batch(conn, rows)
        if not rows_seen:
            return

    def _fail(self, row: dict[str, Any], reason: str) -> None:
        self.rep.failed += 1
        self.rep.count(row["topic"], "failed")
        self.failures.append(
            {
                "brokerName": self.rep.broker_name,
                "topic": row["topic"],
                "messageKey": row["messageKey"],
                "uniqKey": row["uniqKey"],
                "reason": reason,
            }
        )

    def _missing(self, row: dict[str, Any]) -> None:
        t, b = row["topic"], self.rep.broker_name
        m = self.missing.get((b, t))
        if m is None:
            queues = max(self.max_queue.get(t, 0) + 1, 4)
            m = self.missing[(b, t)] = {
                "brokerName": b,
                "topic": t,
                "messages": 0,
                "create": f"mqadmin updateTopic -n '{self.opts.namesrv_text}' -c {self.rep.cluster_name} "
                f"-t {t} -r {queues} -w {queues}",
            }
        m["messages"] += 1
        self._fail(
            row, f"topic {t} does not exist on broker set {b}: create it ({m['create']}) and replay again"
        )

    def _batch(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        rep = self.rep
        todo = []
        for r in rows:
            rep.messages += 1
            rep.count(r["topic"], "messages")
            self.max_queue[r["topic"]] = max(self.max_queue.get(r["topic"], 0), int(r["queueId"] or 0))
            key = r["messageKey"]
            if self.ck.done.get(key) in ("sent", "present"):
                rep.done_earlier += 1
                rep.count(r["topic"], "doneEarlier")
                continue
            nq, why = self._topic(r["topic"])
            if why == "missing":
                self._missing(r)
                continue
            if why is not None:
                self._fail(r, why)
                continue
            if r.get("crcOk") is False and not self.opts.include_crc_errors:
                self._fail(
                    r,
                    "its body does not match its BODYCRC (crcOk false in the salvage): not sent "
                    "(--include-crc-errors sends it as stored)",
                )
                continue
            if not r["uniqKey"] and key in self.ck.intents:
                self._fail(
                    r,
                    "outcome of an earlier send unknown and no UNIQ_KEY to look it up: not sent "
                    "again (check the topic for it)",
                )
                continue
            todo.append((r, nq))
        todo = self._not_present(conn, todo)
        if self.opts.dry_run:
            for r, _ in todo:
                rep.would_send += 1
                rep.count(r["topic"], "wouldSend")
            return
        self.ck.write([f"S\t{r['messageKey']}" for r, _ in todo])
        self._send(conn, todo)

    def _not_present(
        self, conn: Any, todo: list[tuple[dict[str, Any], int]]
    ) -> list[tuple[dict[str, Any], int]]:
        """Those whose UNIQ_KEY the master's index does not have (QUERY_MESSAGE, the batch's lookups
        in one write)."""
        # lazy: start-up
        from mqctl.remoting import producer as P
        from mqctl.remoting.client import RemotingError

        out, done_lines = [], []
        asked = [(r, nq) for r, nq in todo if r["uniqKey"]]
        out = [(r, nq) for r, nq in todo if not r["uniqKey"]]
        try:
            pend = (
                conn.requests(
                    [(P.QUERY_MESSAGE, P.query_uniq_header(r["topic"], r["uniqKey"]), b"") for r, _ in asked]
                )
                if asked
                else []
            )
            for (r, nq), p in zip(asked, pend, strict=True):
                ans = conn.answer(p, timeout=self.opts.timeout)
                if ans.code == 0 and r["uniqKey"] in P.stored_uniq_keys(ans.body):
                    self.rep.already_present += 1
                    self.rep.count(r["topic"], "alreadyPresent")
                    done_lines.append(f"D\t{r['messageKey']}\tpresent")
                elif ans.code in (0, P.QUERY_NOT_FOUND):
                    out.append((r, nq))
                else:
                    raise ReplayRefused(
                        f"{conn.address} refused the lookups by UNIQ_KEY (QUERY_MESSAGE "
                        f"answered {P.code_name(ans.code)}: {ans.remark or ''}): not sent"
                    )
        except RemotingError as exc:
            raise UnreachableError(f"{conn.address}: {exc}") from None
        finally:
            self.ck.write(done_lines)
        return out

    def _pace(self) -> None:
        if self.opts.rate:
            due = self.started + self.sent_n / self.opts.rate
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
        self.sent_n += 1

    def _send(self, conn: Any, todo: list[tuple[dict[str, Any], int]]) -> None:
        """SEND_MESSAGE_V2 for each, a window at a time in one write (one at a time with --rate), the
        next window sent before the answers of the previous are read; the busy ones again after a
        backoff."""
        from mqctl.remoting.client import RemotingError  # lazy: start-up

        o = self.opts
        lines: list[str] = []
        queue = [(r, nq, 0) for r, nq in todo]
        step = 1 if o.rate else max(1, o.window)
        try:
            while queue:
                retry: list[tuple[dict[str, Any], int, int]] = []
                flying: list[list[tuple[dict[str, Any], int, int, Any]]] = []
                for i in range(0, len(queue), step):
                    chunk = queue[i : i + step]
                    reqs = []
                    for r, nq, _ in chunk:
                        self._pace()
                        reqs.append(self._request(r, nq))
                    flying.append(
                        [
                            (r, nq, tries, p)
                            for (r, nq, tries), p in zip(chunk, conn.requests(reqs), strict=True)
                        ]
                    )
                    if sum(len(f) for f in flying) > o.window:
                        for item in flying.pop(0):
                            self._collect(conn, item, lines, retry)
                for f in flying:
                    for item in f:
                        self._collect(conn, item, lines, retry)
                if retry:
                    worst = max(t for _, _, t in retry)
                    time.sleep(min(5.0, 0.1 * (2 ** (worst - 1))))
                queue = retry
        except RemotingError as exc:
            raise UnreachableError(
                f"{conn.address}: {exc} (the messages sent so far are in the checkpoint; "
                f"run replay again to go on)"
            ) from None
        finally:
            self.ck.write(lines)

    def _request(self, r: dict[str, Any], nq: int) -> tuple[int, dict[str, str], bytes]:
        # lazy: start-up
        from mqctl.remoting import producer as P
        from mqctl.store.commitlog import decode_properties

        o = self.opts
        props = decode_properties(bytes(r["rawProperties"] or b""))
        props["MQCTL_ORIGIN_BORN_TIMESTAMP"] = str(r["bornTimestamp"])
        props["MQCTL_ORIGIN_BORN_HOST"] = str(r["bornHost"])
        hdr = P.send_header(
            group=o.group,
            topic=r["topic"],
            queue_id=int(r["queueId"] or 0) % nq,
            sys_flag=int(r["sysFlag"]),
            born_timestamp=int(r["bornTimestamp"]),
            flag=int(r["flag"]),
            properties=P.properties_string(props),
            broker_name=self.rep.broker_name,
            reconsume_times=int(r["reconsumeTimes"] or 0),
        )
        return P.SEND_MESSAGE_V2, hdr, bytes(r["body"] or b"")

    def _collect(
        self,
        conn: Any,
        item: tuple[dict[str, Any], int, int, Any],
        lines: list[str],
        retry: list[tuple[dict[str, Any], int, int]],
    ) -> None:
        from mqctl.remoting import producer as P  # lazy: start-up

        r, nq, tries, p = item
        ans = conn.answer(p, timeout=self.opts.timeout)
        if ans.code in P.STORED:
            self.rep.sent += 1
            self.rep.count(r["topic"], "sent")
            msg_id = (ans.ext_fields or {}).get("msgId", "")
            lines.append(f"D\t{r['messageKey']}\tsent\t{msg_id}")
        elif ans.code in P.BUSY and tries < self.opts.busy_retries:
            retry.append((r, nq, tries + 1))
        elif ans.code == P.TOPIC_NOT_EXIST:
            self._missing(r)
        else:
            self._fail(r, f"{conn.address} refused it: {P.code_name(ans.code)}: {ans.remark or ''}")
