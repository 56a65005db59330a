"""`mqctl recover replay` on the wire (issue 31): what tests/e2e/test_rocketmq_guard.py cannot make a real
broker do on demand. A broker on loopback that speaks RocketMQ remoting (mqctl.remoting.codec frames,
TLS with mqctl.auth's server context) answers GET_BROKER_EPOCH_CACHE, QUERY_MESSAGE by
UNIQ_KEY (the stored records, as a broker's index answers) and SEND_MESSAGE_V2, and injects flow control
(FLOW_CONTROL 215, SYSTEM_BUSY 2) and checks ACL signatures as RocketMQ's AclClientRPCHook makes them.
The installed binary replays a salvage written by the guard's writer."""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mqctl.auth import server_context
from mqctl.remoting import codec, headers
from mqctl.remoting.acl import signature
from mqctl.remoting.codec import RemotingCommand
from mqctl.store.commitlog import Message, decode_properties, encode_record

MQCTL = str(Path(sys.executable).with_name("mqctl"))


class Broker:
    """Broker set `name` on 127.0.0.1: stores what SEND_MESSAGE_V2 sends, answers lookups from it."""

    def __init__(
        self, name: str, *, busy: int = 0, tls: ssl.SSLContext | None = None, secret: str | None = None
    ) -> None:
        self.name, self.busy, self.tls, self.secret = name, busy, tls, secret
        self.stored: list[tuple[dict[str, str], dict[str, str], bytes]] = []  # (header, properties, body)
        self.busy_answers = 0
        self.unsigned = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            if self.tls is not None:
                try:
                    s = self.tls.wrap_socket(s, server_side=True)
                except (OSError, ssl.SSLError):
                    s.close()
                    continue
            threading.Thread(target=self._serve, args=(s,), daemon=True).start()

    def _serve(self, s: socket.socket) -> None:
        def exactly(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = s.recv(n - len(buf))
                if not chunk:
                    raise ConnectionError
                buf += chunk
            return buf

        try:
            while True:
                cmd = codec.decode_frame(exactly(codec.frame_length(exactly(4))))
                s.sendall(codec.encode_frame(self._answer(cmd)))
        except (OSError, ConnectionError, codec.FrameError):
            s.close()

    def _answer(self, cmd: RemotingCommand) -> RemotingCommand:
        ext = dict(cmd.ext_fields or {})

        def answer(
            code: int, body: bytes = b"", remark: str | None = None, fields: dict[str, str] | None = None
        ) -> RemotingCommand:
            return RemotingCommand(
                code=code,
                opaque=cmd.opaque,
                flag=codec.FLAG_RESPONSE,
                remark=remark,
                ext_fields=fields,
                body=body,
                language="JAVA",
            )

        if self.secret is not None:
            sig = ext.get("Signature")
            if ext.get("AccessKey") != "replayer" or sig != signature(ext, cmd.body, self.secret):
                with self.lock:
                    self.unsigned += 1
                return answer(16, remark="No accessKey is configured / signature mismatch")
        if cmd.code == headers.GET_BROKER_EPOCH_CACHE:
            return answer(
                0,
                headers.epoch_cache_body(
                    {
                        "cluster_name": "c",
                        "broker_name": self.name,
                        "broker_id": 0,
                        "epoch_list": [],
                        "max_offset": 0,
                    }
                ),
            )
        if cmd.code == 12:  # QUERY_MESSAGE
            assert ext.get("_UNIQUE_KEY_QUERY") == "true"
            with self.lock:
                hits = [(h, p, b) for h, p, b in self.stored if p.get("UNIQ_KEY") == ext["key"]]
            if not hits:
                return answer(22, remark="can not find message")
            body, pos = b"", 4096
            for h, p, b in hits:
                rec = encode_record(Message(h["b"], b, p), pos)
                body += rec
                pos += len(rec)
            return answer(0, body)
        if cmd.code == 310:  # SEND_MESSAGE_V2
            with self.lock:
                if self.busy_answers < self.busy:
                    self.busy_answers += 1
                    code = 215 if self.busy_answers % 2 else 2
                    return answer(code, remark="[TIMEOUT_CLEAN_QUEUE]broker busy")
                props = decode_properties(ext["i"].encode())
                self.stored.append((ext, props, cmd.body))
                return answer(
                    0,
                    fields={
                        "msgId": f"{len(self.stored):032X}",
                        "queueId": ext["e"],
                        "queueOffset": str(len(self.stored)),
                    },
                )
        return answer(3, remark=f"request code {cmd.code} not supported")

    def close(self) -> None:
        self.sock.close()


def salvage(
    tmp: Path, n: int, *, broker: str = "broker-a", no_uniq: int = 0, corrupt: int | None = None
) -> Path:
    from mqctl.pipeline.guard import _salvage_tail
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter
    from mqctl.store.epochfile import EpochEntry, write_epoch_file
    from mqctl.store.identity import BrokerIdentity, write_identity

    store = tmp / "store"
    store.mkdir()
    write_identity(store, BrokerIdentity("c", broker, 1))
    write_epoch_file(store, [EpochEntry(1, 0)])
    with CommitLogWriter(store / COMMITLOG_DIR, 1 << 20) as w:
        for i in range(n):
            props = {"KEYS": f"k{i}", "TAGS": "t"}
            if i >= no_uniq:
                props["UNIQ_KEY"] = f"U{i:030d}"
            w.append(
                Message(
                    "Topic",
                    f"body {i}".encode(),
                    props,
                    queue_id=i % 3,
                    flag=7,
                    born_timestamp=1_700_000_000_000 + i,
                    born_host=("127.0.0.9", 4000 + i),
                )
            )
    if corrupt is not None:  # one body byte flipped: its BODYCRC no longer matches
        f = next((store / COMMITLOG_DIR).iterdir())
        data = bytearray(f.read_bytes())
        at = data.index(f"body {corrupt}".encode())
        data[at] ^= 0x20
        f.write_bytes(bytes(data))
    (tmp / "out").mkdir()
    path, _ = _salvage_tail(store, 0, tmp / "out", "s", {"bytesToLose": 0})
    return path


def replay(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict, str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")} | (env or {})
    p = subprocess.run(
        [MQCTL, "recover", "replay", *args, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
    )
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {}), p.stderr


def test_flow_control_retried_rate_kept_properties_sent(tmp_path: Path) -> None:
    b = Broker("broker-a", busy=6)
    try:
        s = salvage(tmp_path, 20)
        t0 = time.monotonic()
        code, doc, err = replay(str(s), "--broker-addr", b.address, "--rate", "40")
        took = time.monotonic() - t0
        assert code == 0, (doc, err)
        assert (doc["sent"], doc["failed"], doc["alreadyPresent"]) == (20, 0, 0), doc
        assert b.busy_answers == 6 and len(b.stored) == 20  # retried, each stored once
        assert took >= 19 / 40, took  # --rate 40: 20 sends take >= 0.475 s
        hdr, props, body = next(x for x in b.stored if x[1]["KEYS"] == "k5")
        assert (hdr["b"], hdr["e"], hdr["h"], hdr["g"], body) == (
            "Topic",
            "2",
            "7",
            str(1_700_000_000_005),
            b"body 5",
        )
        assert props["UNIQ_KEY"] == f"U{5:030d}" and props["TAGS"] == "t"
        assert props["MQCTL_ORIGIN_BORN_TIMESTAMP"] == str(1_700_000_000_005)
        assert props["MQCTL_ORIGIN_BORN_HOST"] == "127.0.0.9:4005"
        # again: everything done by the earlier run; with a fresh checkpoint: everything found by UNIQ_KEY
        code, doc, _ = replay(str(s), "--broker-addr", b.address)
        assert code == 0 and (doc["sent"], doc["doneEarlier"]) == (0, 20), doc
        env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")} | {"COLUMNS": "200"}
        y = subprocess.run(
            [MQCTL, "recover", "replay", str(s), "--broker-addr", b.address, "-o", "yaml"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        import yaml

        assert y.returncode == 0 and yaml.safe_load(y.stdout)["doneEarlier"] == 20, y.stdout + y.stderr
        t = subprocess.run(
            [MQCTL, "recover", "replay", str(s), "--broker-addr", b.address],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert t.returncode == 0 and "done by an earlier run 20" in t.stdout, t.stdout + t.stderr
        (s / ".mqctl-replay" / "checkpoint.log").unlink()
        code, doc, _ = replay(str(s), "--broker-addr", b.address, "--dry-run")
        assert code == 0 and (doc["wouldSend"], doc["alreadyPresent"]) == (0, 20), doc
        assert len(b.stored) == 20
    finally:
        b.close()


def test_busy_beyond_the_retries_is_a_failure_and_the_next_run_sends_it(tmp_path: Path) -> None:
    b = Broker("broker-a", busy=1000)
    try:
        s = salvage(tmp_path, 2)
        code, doc, err = replay(str(s), "--broker-addr", b.address, "--retries", "2")
        assert code == 3 and doc["failed"] == 2 and doc["sent"] == 0, (doc, err)
        assert (
            "FLOW_CONTROL (215)" in doc["failures"][0]["reason"]
            or "SYSTEM_BUSY (2)" in doc["failures"][0]["reason"]
        )
        assert err.count("\n") == 1 and "2 of 2 messages were not published" in err
        b.busy = 0
        code, doc, err = replay(str(s), "--broker-addr", b.address)
        assert code == 0 and doc["sent"] == 2, (doc, err)
    finally:
        b.close()


def test_resume_after_an_unknown_outcome_sends_none_twice(tmp_path: Path) -> None:
    """An intent without an outcome (the process died between the send and the checkpoint): looked up
    again; one without UNIQ_KEY is not sent again but reported."""
    b = Broker("broker-a")
    try:
        s = salvage(tmp_path, 6, no_uniq=2)
        code, doc, _ = replay(str(s), "--broker-addr", b.address)
        assert code == 0 and doc["sent"] == 6
        ck = s / ".mqctl-replay" / "checkpoint.log"
        lines = ck.read_text().splitlines()
        # as if killed after sending, before writing outcomes: only the intents remain
        ck.write_text("".join(ln + "\n" for ln in lines if ln.startswith("S\t")))
        code, doc, err = replay(str(s), "--broker-addr", b.address)
        assert code == 3, (doc, err)
        assert (doc["sent"], doc["alreadyPresent"], doc["failed"]) == (0, 4, 2), doc
        assert all("no UNIQ_KEY" in f["reason"] for f in doc["failures"])
        assert len(b.stored) == 6
    finally:
        b.close()


def test_acl_signed_over_tls_and_a_refusing_broker(tmp_path: Path) -> None:
    from tls_pki import write_pki

    pki = write_pki(tmp_path / "pki")
    tls = server_context(pki.server_cert, pki.server_key)
    b = Broker("broker-a", tls=tls, secret="s3cret")
    try:
        s = salvage(tmp_path, 3)
        env = {"MQCTL_ACCESS_KEY": "replayer", "MQCTL_SECRET_KEY": "s3cret"}
        code, doc, err = replay(str(s), "--broker-addr", b.address, "--tls-ca", pki.ca, env=env)
        assert code == 0 and doc["sent"] == 3, (doc, err)
        assert b.unsigned == 0
        # a wrong secret: the broker refuses (NO_PERMISSION) before anything is sent
        (s / ".mqctl-replay" / "checkpoint.log").unlink()
        code, doc, err = replay(
            str(s), "--broker-addr", b.address, "--tls-ca", pki.ca, env={**env, "MQCTL_SECRET_KEY": "wrong"}
        )
        assert code == 3 and "NO_PERMISSION (16)" in err and err.count("\n") == 1, (code, err)
        # no TLS against a TLS port: one line, nothing sent
        code, doc, err = replay(str(s), "--broker-addr", b.address, env=env, timeout=60)
        assert code == 6 and err.count("\n") == 1 and "Traceback" not in err, (code, err)
        assert len(b.stored) == 3
    finally:
        b.close()


def test_salvage_of_another_broker_set(tmp_path: Path) -> None:
    b = Broker("broker-b")
    try:
        s = salvage(tmp_path, 2)
        code, _, err = replay(str(s), "--broker-addr", b.address)
        assert code == 2 and "broker-a" in err and "broker-b" in err and err.count("\n") == 1, err
        assert b.stored == []
    finally:
        b.close()


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_cut_or_corrupt_parquet(tmp_path: Path, damage: str) -> None:
    b = Broker("broker-a")
    try:
        s = salvage(tmp_path, 4)
        part = next((s / "messages").rglob("*.parquet"))
        data = bytearray(part.read_bytes())
        if damage == "truncate":
            data = data[: len(data) - 50]
        else:
            data[len(data) // 2] ^= 0xFF
        part.write_bytes(bytes(data))
        code, _, err = replay(str(s), "--broker-addr", b.address)
        assert code == 4 and "cut or corrupt" in err and err.count("\n") == 1, err
        assert b.stored == []
        code, _, err = replay(str(tmp_path / "nothing"), "--broker-addr", b.address)
        assert code == 4 and "no such salvage" in err, err
    finally:
        b.close()


@pytest.mark.slow
def test_on_spark_one_task_per_part_then_resumed_in_process(tmp_path: Path) -> None:
    """--engine spark: each part file a task with its own connection and checkpoint file; a later run in
    this process reads them all and sends nothing again."""
    import importlib.util

    from mqctl.pipeline.engine import java_executable

    if importlib.util.find_spec("pyspark") is None or java_executable() is None:
        pytest.skip("pyspark or java missing (pip install 'mqctl[spark]')")
    from mqctl.pipeline.guard import _salvage_tail
    from mqctl.store.commitlog import COMMITLOG_DIR, CommitLogWriter
    from mqctl.store.epochfile import EpochEntry, write_epoch_file
    from mqctl.store.identity import BrokerIdentity, write_identity

    store = tmp_path / "store"
    store.mkdir()
    write_identity(store, BrokerIdentity("c", "broker-a", 1))
    with CommitLogWriter(store / COMMITLOG_DIR, 1 << 20) as w:
        offsets = [
            w.append(Message("Topic", f"body {i}".encode(), {"UNIQ_KEY": f"S{i:030d}"}, queue_id=i % 2))
            for i in range(40)
        ]
    write_epoch_file(store, [EpochEntry(1, 0), EpochEntry(2, offsets[25])])  # two epochs: two parts
    (tmp_path / "out").mkdir()
    s, _ = _salvage_tail(store, 0, tmp_path / "out", "s", {"bytesToLose": 0})
    assert len(list((s / "messages").rglob("*.parquet"))) == 2
    b = Broker("broker-a", busy=3)
    try:
        code, doc, err = replay(
            str(s), "--broker-addr", b.address, "--engine", "spark", "--master", "local[2]", timeout=300
        )
        assert code == 0, (doc, err)
        assert (doc["sent"], doc["failed"], doc["messages"]) == (40, 0, 40), doc
        assert sorted(p.name for p in (s / ".mqctl-replay").iterdir()) == [
            "checkpoint-00000.log",
            "checkpoint-00001.log",
        ]
        assert len(b.stored) == 40 and len({p["UNIQ_KEY"] for _, p, _ in b.stored}) == 40
        code, doc, err = replay(str(s), "--broker-addr", b.address, "--engine", "local")
        assert code == 0 and (doc["sent"], doc["doneEarlier"]) == (0, 40), (doc, err)
        assert len(b.stored) == 40
    finally:
        b.close()


def test_a_body_that_fails_its_crc_is_not_sent_unless_asked(tmp_path: Path) -> None:
    b = Broker("broker-a")
    try:
        s = salvage(tmp_path, 5, corrupt=3)
        code, doc, err = replay(str(s), "--broker-addr", b.address)
        assert code == 3 and (doc["sent"], doc["failed"]) == (4, 1), (doc, err)
        assert "BODYCRC" in doc["failures"][0]["reason"]
        code, doc, err = replay(str(s), "--broker-addr", b.address, "--include-crc-errors")
        assert code == 0 and (doc["sent"], doc["doneEarlier"]) == (1, 4), (doc, err)
        assert sorted(body for _, _, body in b.stored) == [
            b"Body 3",
            b"body 0",
            b"body 1",
            b"body 2",
            b"body 4",
        ]
    finally:
        b.close()
