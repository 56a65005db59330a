"""HeartbeatStream on real `mqctl serve` processes (issue 17): many beats on one long-lived stream,
each message's beats answered in order with exactly what a unary Heartbeat answers; its slots,
its idle timeout, undecodable messages; ControllerClient's heartbeats on it, after a leadership
transfer and after a leader kill.

Heartbeats are accepted on every node (each keeps its own table, so that a new leader already knows
who is alive, docs/serve.md#liveness-and-elections): a follower answers a beat as the unary call
does, with success and the leader's address, not CONTROLLER_NOT_LEADER.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from harness import TEST_CLUSTER, register_broker

from mqctl.client import ControllerClient
from mqctl.errors import Code
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.peerlimits import IdleStreams
from mqctl.v1 import controller_pb2 as pb
from mqctl.v1 import controller_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

STREAM = "/mqctl.v1.Controller/HeartbeatStream"
LEASE_MS = 1500  # the LocalCluster nodes' --heartbeat-timeout


def _own_connection(address: str) -> grpc.Channel:
    """A channel with its own TCP connection (grpc shares connections between equal channels)."""
    return grpc.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


class RawStream:
    """A HeartbeatStream call driven message by message (bytes on the wire, as a hostile client may
    send them); ``beats`` sends one message and waits for its answer."""

    def __init__(self, channel: grpc.Channel) -> None:
        self._out: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.call = channel.stream_stream(STREAM)(iter(self._out.get, None), timeout=60)

    def send(self, data: bytes) -> None:
        self._out.put(data)

    def beats(self, *beats: pb.HeartbeatRequest) -> list[pb.HeartbeatResponse]:
        self.send(pb.HeartbeatStreamRequest(beats=list(beats)).SerializeToString())
        return list(pb.HeartbeatStreamResponse.FromString(next(self.call)).answers)

    def close(self) -> None:
        self._out.put(None)
        self.call.cancel()


def _beat(
    name: str, broker_id: int, epoch: int | None, address: str = "127.0.0.1:9000"
) -> pb.HeartbeatRequest:
    return pb.HeartbeatRequest(
        cluster_name=TEST_CLUSTER,
        broker_addr=address,
        broker_name=name,
        broker_id=broker_id,
        epoch=1,
        max_offset=100,
        heartbeat_timeout_mills=LEASE_MS,
        **({} if epoch is None else {"broker_epoch": epoch}),
    )


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[str, int]]]:
    """Three nodes; broker-a and broker-b (one replica each) registered: name -> brokerEpoch."""
    cluster = LocalCluster(str(tmp_path_factory.mktemp("heartbeat-stream")), size=3)
    with cluster:
        cluster.start()
        with ControllerClient(cluster.addresses, timeout=20) as client:
            epochs = {
                name: register_broker(client, name, f"127.0.0.1:{port}")[1]
                for name, port in (("broker-a", 9000), ("broker-b", 9001))
            }
        yield cluster, epochs


def _alive(client: ControllerClient, name: str) -> bool:
    table = client.get_sync_state_data([name]).replicas_info_table
    info = table[name]
    return any(r.alive for r in [*info.in_sync_replicas, *info.not_in_sync_replicas] if r.broker_id == 1)


def test_beats_on_one_stream_keep_a_broker_alive(group: Any) -> None:
    """Beats every 0.2 s on one stream keep broker-a alive for three leases; silent, it is dead."""
    cluster, epochs = group
    leader = cluster.wait_for_leader()
    channel = _own_connection(leader.grpc_address)
    stream = RawStream(channel)
    stop = threading.Event()
    answers: list[int] = []

    def beat() -> None:
        while not stop.wait(0.2):
            answers.extend(a.code for a in stream.beats(_beat("broker-a", 1, epochs["broker-a"])))

    beater = threading.Thread(target=beat, daemon=True)
    beater.start()
    try:
        with ControllerClient(leader.grpc_address, timeout=20) as client:
            wait_until(lambda: len(answers) >= 3 * LEASE_MS // 200, what="three leases of beats")
            assert _alive(client, "broker-a")
            assert set(answers) == {0}
            stop.set()
            beater.join(5)
            wait_until(lambda: not _alive(client, "broker-a"), what="broker-a dead once silent")
    finally:
        stop.set()
        stream.close()
        channel.close()


def test_answers_in_order_as_the_unary_call_answers(group: Any) -> None:
    """One message with four beats: four answers, in order, each what Heartbeat answers for it, on
    the leader and on a follower (a follower keeps its own table and accepts beats, and names the
    leader in ``leader_address``)."""
    cluster, epochs = group
    leader = cluster.wait_for_leader()
    follower = next(n for n in cluster.nodes if n is not leader)
    beats = [
        _beat("broker-a", 1, epochs["broker-a"]),
        _beat("broker-a", 1, epochs["broker-a"] - 1),  # stale brokerEpoch
        pb.HeartbeatRequest(cluster_name=TEST_CLUSTER, broker_name="broker-b"),  # no brokerId
        _beat("broker-b", 1, epochs["broker-b"], "127.0.0.1:9001"),
    ]
    for node in (leader, follower):
        channel = _own_connection(node.grpc_address)
        stream = RawStream(channel)
        try:
            answers = stream.beats(*beats)
            unary = [pb_grpc.ControllerStub(channel).Heartbeat(b, timeout=10) for b in beats]
            assert [(a.code, a.remark, a.leader_address) for a in answers] == [
                (u.code, u.remark, u.leader_address) for u in unary
            ]
            assert [a.code for a in answers] == [
                0,
                Code.STALE_BROKER_EPOCH,
                Code.CONTROLLER_INVALID_REQUEST,
                0,
            ]
            # a follower names the leader, where the beats count
            expected = "" if node is leader else leader.grpc_address
            assert {a.leader_address for a in answers} == {expected}
            assert stream.beats() == []  # no beats: a keep-alive, answered with no answers
        finally:
            stream.close()
            channel.close()


def test_an_undecodable_message_ends_the_stream_with_invalid_argument(group: Any) -> None:
    """After one good message, bytes that are not a HeartbeatStreamRequest: INVALID_ARGUMENT, one
    warning line in the node's log, no traceback (the suite fails on one)."""
    cluster, epochs = group
    leader = cluster.wait_for_leader()
    channel = _own_connection(leader.grpc_address)
    stream = RawStream(channel)
    try:
        assert [a.code for a in stream.beats(_beat("broker-a", 1, epochs["broker-a"]))] == [0]
        stream.send(b"\x0a\xff\xff\xff\xff\x0f")  # a beat whose length runs past the message
        with pytest.raises(grpc.RpcError) as err:
            next(stream.call)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid mqctl.v1.HeartbeatStreamRequest message" in str(err.value.details())
        wait_until(
            lambda: "undecodable HeartbeatStream request" in leader.log_text(), what="the node's warning line"
        )
        assert "Traceback" not in leader.log_text()
    finally:
        stream.close()
        channel.close()


def test_threads_share_the_client_s_stream_each_beat_gets_its_own_answer(group: Any) -> None:
    """Eight threads beat at once on one client (their beats share messages): every beat gets its own
    answer, success or 2100 for the ones sent with a stale brokerEpoch, all on one stream."""
    from mqctl.errors import ControllerError

    cluster, epochs = group
    with ControllerClient(cluster.addresses, timeout=20) as client:
        wrong: list[str] = []

        def beats(thread: int) -> None:
            name = ("broker-a", "broker-b")[thread % 2]
            for i in range(40):
                stale = (thread + i) % 3 == 0
                try:
                    client.heartbeat(
                        TEST_CLUSTER,
                        "127.0.0.1:9000",
                        name,
                        1,
                        1,
                        100,
                        heartbeat_timeout_mills=60_000,
                        broker_epoch=epochs[name] - 1 if stale else epochs[name],
                    )
                    if stale:
                        wrong.append(f"thread {thread} beat {i}: a stale beat succeeded")
                except ControllerError as exc:
                    if not stale or exc.code != Code.STALE_BROKER_EPOCH:
                        wrong.append(f"thread {thread} beat {i}: {exc}")

        threads = [threading.Thread(target=beats, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not wrong, wrong[:5]
        stream = client._heartbeats._stream
        assert stream is not None and not stream.dead and not stream.pending


def test_the_client_s_stream_follows_a_leadership_transfer(group: Any) -> None:
    """The leadership moves while the old leader lives on as a follower: it still takes the beats
    but names the new leader, and the client's next beat goes there on a new stream."""
    cluster, epochs = group
    leader = cluster.wait_for_leader()
    other = next(n for n in cluster.nodes if n is not leader)
    with (
        ControllerClient(cluster.addresses, timeout=20) as beater,
        ControllerClient(cluster.addresses, timeout=20) as admin,
    ):

        def beat() -> None:
            beater.heartbeat(
                TEST_CLUSTER,
                "127.0.0.1:9000",
                "broker-a",
                1,
                1,
                100,
                heartbeat_timeout_mills=LEASE_MS,
                broker_epoch=epochs["broker-a"],
            )

        beat()
        first = beater._heartbeats._stream
        assert first is not None and first.target == leader.grpc_address
        admin.change_quorum("transfer", other.raft_address)
        wait_until(lambda: cluster.leader() is other, what="the leadership transferred")
        wait_until(
            lambda: beat() or beater._heartbeats._stream.target == other.grpc_address,
            what="the client's stream at the new leader",
        )
        assert first.dead


def test_the_client_beats_on_one_stream_and_follows_a_new_leader(group: Any) -> None:
    """ControllerClient.heartbeat sends every beat on one stream to the leader; the leader is killed:
    the next beat is answered by the new leader, on a new stream there, which keeps broker-a alive."""
    cluster, epochs = group
    leader = cluster.wait_for_leader()
    with ControllerClient(cluster.addresses, timeout=20) as client:
        for _ in range(20):
            client.heartbeat(
                TEST_CLUSTER,
                "127.0.0.1:9000",
                "broker-a",
                1,
                1,
                100,
                heartbeat_timeout_mills=LEASE_MS,
                broker_epoch=epochs["broker-a"],
            )
        first = client._heartbeats._stream
        assert first is not None and first.target == leader.grpc_address
        leader.kill()
        ack = client.heartbeat(
            TEST_CLUSTER,
            "127.0.0.1:9000",
            "broker-a",
            1,
            1,
            100,
            heartbeat_timeout_mills=LEASE_MS,
            broker_epoch=epochs["broker-a"],
        )
        assert ack.remark == "Heart beat success"
        new = cluster.wait_for_leader(exclude=leader)
        moved = client._heartbeats._stream
        assert moved is not None and moved is not first and moved.target == new.grpc_address
        assert first.dead
        for _ in range(3):
            client.heartbeat(
                TEST_CLUSTER,
                "127.0.0.1:9000",
                "broker-a",
                1,
                1,
                100,
                heartbeat_timeout_mills=LEASE_MS,
                broker_epoch=epochs["broker-a"],
            )
        assert _alive(client, "broker-a")


def _single_node(base: str, *args: str) -> Iterator[Any]:
    cluster = LocalCluster(base, size=1, extra_args=list(args))
    with cluster:
        cluster.start()
        with ControllerClient(cluster.addresses, timeout=20) as client:
            register_broker(client, "broker-a", "127.0.0.1:9000")
        yield cluster.nodes[0]


@pytest.fixture
def limited(tmp_path: Any) -> Iterator[Any]:
    """One node: at most 2 heartbeat streams, 1 per connection."""
    yield from _single_node(
        str(tmp_path), "--grpc-max-heartbeat-streams", "2", "--grpc-max-heartbeat-streams-per-connection", "1"
    )


@pytest.fixture
def impatient(tmp_path: Any) -> Iterator[Any]:
    """One node that cancels a heartbeat stream idle for 1 s."""
    yield from _single_node(str(tmp_path), "--grpc-heartbeat-stream-idle", "1s")


def test_stream_limits_refuse_with_resource_exhausted(limited: Any) -> None:
    """A second stream on a connection, a third on the node: RESOURCE_EXHAUSTED naming the option;
    the client then beats with unary calls. An ended stream gives its slot back."""
    channels = [_own_connection(limited.grpc_address) for _ in range(3)]
    streams: list[RawStream] = []
    try:
        streams.append(RawStream(channels[0]))
        assert [a.code for a in streams[0].beats(_beat("broker-a", 1, None))] == [0]
        for channel, option in (
            (channels[0], "--grpc-max-heartbeat-streams-per-connection"),
            (channels[1], None),
            (channels[2], "--grpc-max-heartbeat-streams"),
        ):
            streams.append(RawStream(channel))
            if option is None:
                assert [a.code for a in streams[-1].beats(_beat("broker-a", 1, None))] == [0]
                continue
            with pytest.raises(grpc.RpcError) as err:
                streams[-1].beats(_beat("broker-a", 1, None))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert f"({option})" in str(err.value.details())
        with ControllerClient(limited.grpc_address, timeout=10) as client:
            ack = client.heartbeat(
                TEST_CLUSTER, "127.0.0.1:9000", "broker-a", 1, heartbeat_timeout_mills=LEASE_MS
            )
            assert ack.remark == "Heart beat success"
            assert client._heartbeats._unary_until > time.monotonic()  # unary calls for a while
        streams[0].close()

        def slot_back() -> bool:
            streams.append(RawStream(channels[2]))
            try:
                return [a.code for a in streams[-1].beats(_beat("broker-a", 1, None))] == [0]
            except grpc.RpcError:
                return False

        wait_until(slot_back, what="a slot given back")
    finally:
        for s in streams:
            s.close()
        for ch in channels:
            ch.close()


def test_an_idle_stream_is_cancelled(impatient: Any) -> None:
    """A stream that sends nothing for the idle time (1 s here) is cancelled (and logged, at most a
    line a minute per client address); a ControllerClient whose stream went idle beats again on a
    new one."""
    channel = _own_connection(impatient.grpc_address)
    stream = RawStream(channel)
    try:
        assert [a.code for a in stream.beats(_beat("broker-a", 1, None))] == [0]
        with pytest.raises(grpc.RpcError) as err:
            next(stream.call)  # nothing sent: waits until the node cancels the stream
        assert err.value.code() == grpc.StatusCode.CANCELLED
    finally:
        stream.close()
        channel.close()
    with ControllerClient(impatient.grpc_address, timeout=10) as client:
        client.heartbeat(TEST_CLUSTER, "127.0.0.1:9000", "broker-a", 1, heartbeat_timeout_mills=LEASE_MS)
        first = client._heartbeats._stream
        assert first is not None
        wait_until(lambda: first.dead, what="the client's idle stream cancelled")
        client.heartbeat(TEST_CLUSTER, "127.0.0.1:9000", "broker-a", 1, heartbeat_timeout_mills=LEASE_MS)
        assert client._heartbeats._stream is not first


def test_idle_streams_bookkeeping() -> None:
    """IdleStreams: only streams that have not moved for the idle time are cancelled, once."""
    now = [0.0]
    cancelled: list[str] = []
    idle = IdleStreams(1.0, clock=lambda: now[0])
    a = idle.enter("127.0.0.1:50001", lambda: cancelled.append("a"))
    b = idle.enter("127.0.0.1:50002", lambda: cancelled.append("b"))
    now[0] = 0.6
    idle.touch(b)
    now[0] = 1.2
    assert idle.sweep() == {"127.0.0.1:50001": 1} and cancelled == ["a"]
    assert idle.sweep() == {} and idle.open() == 1
    idle.leave(a)  # leaving after being cancelled is harmless
    idle.leave(b)
    now[0] = 5.0
    assert idle.sweep() == {} and cancelled == ["a"] and idle.open() == 0


def test_a_node_without_the_stream_gets_unary_heartbeats() -> None:
    """A node of a release before HeartbeatStream (a real gRPC server that serves GetMetadata and
    Heartbeat only, over the real core) answers the stream UNIMPLEMENTED: the client's beats go as
    unary calls from then on, without an error."""
    from concurrent import futures

    from grpc_fixtures import CoreNode

    from mqctl.grpc.server import SERVICE_NAME, ControllerServicer

    node = CoreNode()
    servicer = ControllerServicer(node)
    old = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
        for name, request, response in (
            ("GetMetadata", pb.GetMetadataRequest, pb.GetMetadataResponse),
            ("Heartbeat", pb.HeartbeatRequest, pb.HeartbeatResponse),
        )
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=4),
        handlers=[grpc.method_handlers_generic_handler(SERVICE_NAME, old)],
        options=[("grpc.so_reuseport", 0)],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    node.address = f"127.0.0.1:{port}"
    try:
        with ControllerClient(node.address, timeout=10) as client:
            for _ in range(3):
                ack = client.heartbeat(
                    TEST_CLUSTER, "127.0.0.1:9000", "broker-a", 1, heartbeat_timeout_mills=LEASE_MS
                )
                assert ack.remark == "Heart beat success"
            assert client._heartbeats._unary_until == float("inf")
        assert node.methods_called() == ["Heartbeat"] * 3
    finally:
        server.stop(None)
        servicer.watch_pool.shutdown(wait=False)
        servicer.heartbeat_pool.shutdown(wait=False)
