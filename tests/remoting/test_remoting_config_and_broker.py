"""`mqctl serve --remoting-port` settings, and GET_BROKER_EPOCH_CACHE (1007) asked of a broker."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest
from remoting_fixtures import recv_frame

from mqctl.controller.config import ServeConfig, load
from mqctl.errors import UsageError
from mqctl.localgroup import free_port
from mqctl.remoting import codec, headers
from mqctl.remoting.client import RemotingControllerClient
from mqctl.remoting.codec import FLAG_RESPONSE, RemotingCommand


def test_remoting_port_is_off_by_default_and_follows_the_hosts() -> None:
    assert ServeConfig().remoting_port == 0 and ServeConfig().remoting_listen() == ""
    cfg = load({"remoting_port": "9878", "listen": "0.0.0.0:9877", "advertise": "127.0.0.1:9877"}, environ={})
    assert (cfg.remoting_listen(), cfg.remoting_advertise()) == ("0.0.0.0:9878", "127.0.0.1:9878")
    assert load({}, environ={"MQCTL_REMOTING_PORT": "9000"}).remoting_advertise() == "127.0.0.1:9000"
    with pytest.raises(UsageError, match="remoting_port"):
        load({"remoting_port": "70000"}, environ={})
    with pytest.raises(UsageError, match="not an integer"):
        load({"remoting_port": "x"}, environ={})


# ----------------------------------------------------------------------------------------------
# GET_BROKER_EPOCH_CACHE (1007): a RocketMQ broker cannot be started here, so a stand-in answers
# exactly as AdminBrokerProcessor does (EpochEntryCache body in fastjson, or code 1 outside
# controller mode).

EPOCH_BODY = (
    b'{"brokerId":0,"brokerName":"broker-a","clusterName":"DefaultCluster","epochList":['
    b'{"endOffset":300,"epoch":1,"startOffset":0},{"endOffset":9223372036854775807,"epoch":2,'
    b'"startOffset":300}],"maxOffset":700}'
)


@pytest.fixture
def broker() -> Iterator[tuple[str, list[RemotingCommand]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    seen: list[RemotingCommand] = []
    mode = {"controller": True}

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                got = recv_frame(conn)
                if got is None:
                    continue
                cmd = got[0]
                seen.append(cmd)
                if cmd.code == headers.GET_BROKER_EPOCH_CACHE and mode["controller"]:
                    answer = RemotingCommand(
                        code=0, language="JAVA", opaque=cmd.opaque, flag=FLAG_RESPONSE, body=EPOCH_BODY
                    )
                elif cmd.code == headers.GET_BROKER_EPOCH_CACHE:
                    answer = RemotingCommand(
                        code=1,
                        language="JAVA",
                        opaque=cmd.opaque,
                        flag=FLAG_RESPONSE,
                        remark="this request only for controllerMode ",
                    )
                else:
                    answer = RemotingCommand(code=3, opaque=cmd.opaque, flag=FLAG_RESPONSE)
                conn.sendall(codec.encode_frame(answer))
                mode["controller"] = False  # the next broker is not in controller mode

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}", seen
    server.close()
    thread.join(5)


def test_get_broker_epoch_cache(broker: tuple[str, list[RemotingCommand]]) -> None:
    address, seen = broker
    with RemotingControllerClient("127.0.0.1:1", timeout=5) as client:
        cache = client.get_broker_epoch_cache(address)
        assert seen[0].code == 1007 and seen[0].ext_fields is None and not seen[0].body
        assert cache.error is None
        assert (cache.cluster_name, cache.broker_name, cache.broker_id, cache.max_offset) == (
            "DefaultCluster",
            "broker-a",
            0,
            700,
        )
        # mqadmin getBrokerEpoch: the last entry's endOffset is the broker's maxOffset
        assert [(e.epoch, e.start_offset) for e in cache.entries] == [(1, 0), (2, 300)]
        assert cache.ends() == [300, 700]
        refused = client.get_broker_epoch_cache(address)
        assert refused.error == f"{address}: code 1: this request only for controllerMode "
        unreachable = client.get_broker_epoch_cache(f"127.0.0.1:{free_port()}")
        assert unreachable.error is not None and "cannot connect" in unreachable.error


@pytest.fixture
def netty_broker() -> Iterator[str]:
    """A stand-in RocketMQ broker in controller mode that, like NettyDecoder, closes a connection whose
    first bytes are not a remoting frame (a gRPC client's HTTP/2 preface reads as a 1.3 GB length)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.settimeout(10)
                    prefix = conn.recv(4, socket.MSG_WAITALL)
                    if len(prefix) < 4 or not 4 <= int.from_bytes(prefix, "big") <= codec.MAX_FRAME:
                        continue  # TooLongFrameException: the channel is closed
                    payload = conn.recv(int.from_bytes(prefix, "big"), socket.MSG_WAITALL)
                    cmd = codec.decode_frame(payload)
                    code = 0 if cmd.code == headers.GET_BROKER_EPOCH_CACHE else 3
                    conn.sendall(
                        codec.encode_frame(
                            RemotingCommand(
                                code=code,
                                language="JAVA",
                                opaque=cmd.opaque,
                                flag=FLAG_RESPONSE,
                                body=EPOCH_BODY if code == 0 else b"",
                            )
                        )
                    )
                except OSError:
                    continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()
    thread.join(5)


@pytest.mark.slow
def test_get_broker_epoch_auto_falls_back_to_remoting(netty_broker: str) -> None:
    """docs/admin.md: with --protocol auto (the default) `getBrokerEpoch --broker-addr` tries mqctl's
    gRPC broker service, then GET_BROKER_EPOCH_CACHE, so it works against a RocketMQ broker."""
    import json
    import os
    from pathlib import Path

    mqctl = str(Path(sys.executable).with_name("mqctl"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQCTL_")}
    proc = subprocess.run(
        [mqctl, "getBrokerEpoch", "--broker-addr", netty_broker, "-o", "json", "--timeout", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    (doc,) = json.loads(proc.stdout)["brokers"]
    assert (doc["brokerName"], doc["brokerId"], doc["maxOffset"]) == ("broker-a", 0, 700)
    assert doc["epochs"][-1] == {"epoch": 2, "startOffset": 300, "endOffset": 700}


def test_broker_options_are_refused_over_remoting() -> None:
    with (
        RemotingControllerClient("127.0.0.1:1", timeout=1) as client,
        pytest.raises(UsageError, match=r"^broker options are a gRPC-only extension"),
    ):
        client.register_broker("DefaultCluster", "broker-a", 1, "127.0.0.1:10911", options={"k": "v"})
