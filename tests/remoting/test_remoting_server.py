"""The remoting front door of a real `mqctl serve --remoting-port` process: codes, one-way, serialize
types, the token, bodies, and malformed frames that close only their own connection."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from harness import start_remoting, with_remoting_ports
from remoting_fixtures import closed_by_server, raw, recv_frame, request

from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting import codec
from mqctl.remoting.client import RemotingControllerClient
from mqctl.remoting.codec import FLAG_ONEWAY, JSON, ROCKETMQ, RemotingCommand

pytestmark = pytest.mark.slow

TOKEN = "s3cret"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    cluster = LocalCluster(
        str(tmp_path_factory.mktemp("remoting-server")), size=1, extra_args=["--token", TOKEN]
    )
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses)
        yield cluster, addresses[0]


def test_unknown_codes_get_request_code_not_supported(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    with raw(address) as sock:
        for code, stype, opaque in ((9999, JSON, 41), (1007, ROCKETMQ, 42), (1008, JSON, 43)):
            answer = request(sock, RemotingCommand(code=code, opaque=opaque, serialize_type=stype))
            assert (answer.code, answer.remark, answer.opaque) == (
                3,
                f" request type {code} not supported",
                opaque,
            )
            assert answer.is_response and not answer.is_oneway


def test_answers_in_the_server_s_serialize_type_not_the_request_s(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    with raw(address) as sock:
        sock.sendall(codec.encode_frame(RemotingCommand(code=1005, opaque=7, serialize_type=ROCKETMQ)))
        got = recv_frame(sock)
        assert got is not None
        answer, stype = got
        assert stype == JSON and answer.serialize_type == JSON and answer.opaque == 7 and answer.code == 0


def test_one_way_requests_get_no_answer(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    beat = {
        "clusterName": "cluster-a",
        "brokerAddr": "127.0.0.1:9000",
        "brokerName": "lonely",
        "brokerId": "1",
    }
    with raw(address) as sock:
        sock.sendall(
            codec.encode_frame(RemotingCommand(code=904, opaque=11, flag=FLAG_ONEWAY, ext_fields=beat))
        )
        sock.sendall(codec.encode_frame(RemotingCommand(code=9999, opaque=12, flag=FLAG_ONEWAY)))
        answer = request(sock, RemotingCommand(code=904, opaque=13, ext_fields=beat))
        assert (answer.opaque, answer.code, answer.remark) == (13, 0, "Heart beat success")
        # the same heartbeat without brokerId: the core's 2005, as over gRPC
        answer = request(sock, RemotingCommand(code=904, opaque=14, ext_fields={"brokerName": "lonely"}))
        assert (answer.code, answer.remark) == (2005, "Heart beat with empty brokerId")


def test_the_client_s_one_way_heartbeat(node: tuple[LocalCluster, str]) -> None:
    """heartbeat(oneway=True) goes as brokers send it, with no answer awaited, and is applied."""
    _, address = node
    with RemotingControllerClient(address, timeout=10) as c:
        c.apply_broker_id("cluster-a", "one-way", 1, "127.0.0.1:9001;1")
        c.register_broker("cluster-a", "one-way", 1, "127.0.0.1:9001")
        c.heartbeat(
            "cluster-a", "127.0.0.1:9001", "one-way", 1, 3, 700, heartbeat_timeout_mills=60_000, oneway=True
        )

        def beat_seen() -> bool:
            info = c.get_sync_state_data("one-way").replicas_info_table["one-way"]
            r = (*info.in_sync_replicas, *info.not_in_sync_replicas)[0]
            return r.alive and r.max_offset == 700

        wait_until(beat_seen, 10, what="the one-way heartbeat applied")


def test_metadata_names_the_remoting_leader(node: tuple[LocalCluster, str]) -> None:
    cluster, address = node
    with raw(address) as sock:
        answer = request(sock, RemotingCommand(code=1005, opaque=1))
    ext = answer.ext_fields or {}
    raft = cluster.nodes[0].raft_address
    assert ext == {
        "group": "mqctl",
        "controllerLeaderId": raft,
        "controllerLeaderAddress": address,
        "isLeader": "true",
        "peers": f"{raft}:{address};",
    }
    with RemotingControllerClient(address) as client:
        meta = client.get_metadata()
    assert meta.is_leader and meta.controller_leader_address == address and meta.state == "leader"
    assert meta.peers[0].grpc_address == cluster.nodes[0].grpc_address


def test_admin_calls_need_the_token(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    with RemotingControllerClient(address, timeout=5) as anonymous:
        for call in (
            lambda: anonymous.clean_broker_data("cluster-a", "nope", "1"),
            lambda: anonymous.elect_master("cluster-a", "nope", 1, designate_elect=True),
            lambda: anonymous.update_config({"waitFor": 1}),
        ):
            with pytest.raises(ControllerError) as err:
                call()
            assert err.value.code == Code.UNAUTHENTICATED and "mqctlToken" in err.value.remark
        with pytest.raises(ControllerError) as err:  # a broker-triggered election is not an admin call
            anonymous.elect_master("cluster-a", "nope", 1)
        assert err.value.code == Code.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    with RemotingControllerClient(address, token=TOKEN, timeout=5) as admin:
        with pytest.raises(ControllerError) as err:
            admin.clean_broker_data("cluster-a", "nope", "1")
        assert (err.value.code, err.value.remark) == (
            2009,
            "Broker nope is not existed,clean broker data failure.",
        )


def test_config_codes_with_properties_bodies(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    with RemotingControllerClient(address, token=TOKEN, timeout=5) as admin:
        before = admin.get_config().config
        assert before["enableElectUncleanMaster"] == "false"
        admin.update_config({"enableElectUncleanMaster": True})
        assert admin.get_config().config["enableElectUncleanMaster"] == "true"
        admin.update_config({"enableElectUncleanMaster": False})
        # RocketMQ ignores keys it does not have; mqctl also those it does not honour (mqctlNotHonoured)
        admin.update_config({"noSuchKey": "1", "mappedFileSize": "1"})
        assert admin.get_config().config == before
        with pytest.raises(ControllerError) as err:
            admin.update_config({"configStorePath": "/tmp/x"})
        assert (err.value.code, err.value.remark) == (16, "Can not update config in black list.")
    with raw(address) as sock:
        answer = request(sock, RemotingCommand(code=1010, opaque=3))
        lines = answer.body.decode().splitlines()
        assert lines == sorted(lines) and "waitFor=1" in lines and answer.remark is None
        answer = request(
            sock,
            RemotingCommand(code=1009, opaque=4, body=b"waitFor=\\uZZ", ext_fields={"mqctlToken": TOKEN}),
        )
        assert (answer.code, answer.remark) == (1, "string2Properties error")
        answer = request(sock, RemotingCommand(code=1006, opaque=5, body=b'{"not":"a list"}'))
        assert answer.code == 1 and "broker name list" in (answer.remark or "")


def test_unparsable_header_numbers_reach_the_core(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    with raw(address) as sock:
        answer = request(
            sock,
            RemotingCommand(
                code=1013,
                opaque=9,
                ext_fields={
                    "clusterName": "c",
                    "brokerName": "b",
                    "appliedBrokerId": "one",
                    "registerCheckCode": "a:1;1",
                },
            ),
        )
    assert answer.code == Code.CONTROLLER_INVALID_REQUEST and "applied_broker_id" in (answer.remark or "")


BAD_FRAMES = {
    "bad length": struct.pack(">i", 2) + b"\x00\x00",
    "over the maximum": struct.pack(">i", codec.MAX_FRAME) + b"\x00" * 16,
    "header longer than the frame": struct.pack(">i", 8) + codec.mark_protocol_type(100, JSON) + b"{}{}",
    "undecodable JSON": struct.pack(">i", 4 + 9) + codec.mark_protocol_type(9, JSON) + b"{code:1}x",
    "unknown serialize type": struct.pack(">i", 6) + bytes([7, 0, 0, 2]) + b"{}",
    "truncated ROCKETMQ header": struct.pack(">i", 4 + 17)
    + codec.mark_protocol_type(17, ROCKETMQ)
    + b"\x00" * 17,
}


def test_malformed_frames_close_only_their_connection(node: tuple[LocalCluster, str]) -> None:
    cluster, address = node
    with raw(address) as bystander:
        assert request(bystander, RemotingCommand(code=1005, opaque=1)).code == 0
        for what, frame in BAD_FRAMES.items():
            with raw(address, timeout=5) as sock:
                # a valid request first: answered; then the bad frame: the connection closes
                assert request(sock, RemotingCommand(code=1010, opaque=2)).code == 0
                sock.sendall(frame)
                assert closed_by_server(sock), what
        assert request(bystander, RemotingCommand(code=1005, opaque=3)).code == 0
    assert cluster.nodes[0].alive()
    # the reason of each, as the server reads a frame (its length, then the rest)
    reasons = []
    for frame in BAD_FRAMES.values():
        with pytest.raises(codec.FrameError) as err:
            codec.decode_frame(frame[4 : 4 + codec.frame_length(frame[:4])])
        reasons.append(str(err.value))
    for reason in (
        "bad frame length",
        "over the maximum",
        "longer than the frame",
        "undecodable JSON header",
        "unknown serialize type",
        "ROCKETMQ header",
    ):
        assert any(reason in r for r in reasons), (reason, reasons)
    # logged with its reason, at most one line a minute per client address (docs/serve.md#limits)
    lines = [line for line in cluster.nodes[0].log_text().splitlines() if "malformed frame" in line]
    assert len(lines) <= 2, lines
    assert all(any(r in line for r in reasons) for line in lines), lines


def test_rocketmq_serialize_type_from_the_environment(tmp_path) -> None:
    cluster = LocalCluster(str(tmp_path), size=1)
    addresses = with_remoting_ports(cluster)
    with cluster:
        start_remoting(cluster, addresses, env={"ROCKETMQ_SERIALIZE_TYPE": "ROCKETMQ"})
        with raw(addresses[0]) as sock:
            sock.sendall(
                codec.encode_frame(
                    RemotingCommand(code=1012, opaque=5, ext_fields={"clusterName": "c", "brokerName": "b"})
                )
            )
            got = recv_frame(sock)
        assert got is not None
        answer, stype = got
        assert stype == ROCKETMQ and answer.ext_fields == {
            "clusterName": "c",
            "brokerName": "b",
            "nextBrokerId": "1",
        }
        with RemotingControllerClient(addresses[0], serialize_type=ROCKETMQ) as client:
            assert client.get_next_broker_id("c", "b").next_broker_id == 1
