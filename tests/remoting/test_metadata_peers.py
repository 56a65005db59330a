"""CONTROLLER_GET_METADATA_INFO (1005) answers of RocketMQ's two controller modes, as mqctl's remoting
client reads them (mqctl.remoting.headers.parse_peers).

The frames below are what RocketMQ writes: RemotingCommand.createResponseCommandWithHeader(SUCCESS,
new GetMetaDataResponseHeader(...)).encode() with opaque 7, in both serialize types, printed by
tests/interop/java/MetaDataHeaderDriver.java from RocketMQ's own classes (../shared/rocketmq-java/lib);
test_frames_are_rocketmq_s_own_bytes builds them again and compares.

- DLedger (DLedgerController.getControllerMetadata): peers `n0:127.0.0.1:9878;n1:...;` (id ":"
  address, per member of the DLedger peer map; not the `n0-host:port` of controllerDLegerPeers), the
  leader's id as controllerLeaderId;
- JRaft (JRaftController.getControllerMetadata): peers `127.0.0.1:9770;127.0.0.1:9771;...;` (the
  controller RPC address of each peer), the leader's PeerId (its Raft endpoint, 127.0.0.1:9881,
  which is not in the list) as controllerLeaderId and its RPC address as controllerLeaderAddress.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mqctl.api import Metadata
from mqctl.remoting import codec, headers

DLEDGER = (
    "group1",
    "n1",
    "127.0.0.1:9868",
    "false",
    "n0:127.0.0.1:9878;n1:127.0.0.1:9868;n2:127.0.0.1:9858;",
)
JRAFT = (
    "jRaft-Controller",
    "127.0.0.1:9881",
    "127.0.0.1:9771",
    "true",
    "127.0.0.1:9770;127.0.0.1:9771;127.0.0.1:9772;",
)

FRAMES: dict[tuple[str, str], str] = {
    ("JSON", "dledger"): (
        "00000119000001157b22636f6465223a302c226578744669656c6473223a7b22636f6e74726f6c6c65724c6561"
        "6465724964223a226e31222c22636f6e74726f6c6c65724c656164657241646472657373223a223132372e302e"
        "302e313a39383638222c2269734c6561646572223a2266616c7365222c227065657273223a226e303a3132372e"
        "302e302e313a393837383b6e313a3132372e302e302e313a393836383b6e323a3132372e302e302e313a393835"
        "383b222c2267726f7570223a2267726f757031227d2c22666c6167223a312c226c616e6775616765223a224a41"
        "5641222c226f7061717565223a372c2273657269616c697a655479706543757272656e74525043223a224a534f"
        "4e222c2276657273696f6e223a307d"
    ),
    ("JSON", "jraft"): (
        "00000125000001217b22636f6465223a302c226578744669656c6473223a7b22636f6e74726f6c6c65724c6561"
        "6465724964223a223132372e302e302e313a39383831222c22636f6e74726f6c6c65724c656164657241646472"
        "657373223a223132372e302e302e313a39373731222c2269734c6561646572223a2274727565222c2270656572"
        "73223a223132372e302e302e313a393737303b3132372e302e302e313a393737313b3132372e302e302e313a39"
        "3737323b222c2267726f7570223a226a526166742d436f6e74726f6c6c6572227d2c22666c6167223a312c226c"
        "616e6775616765223a224a415641222c226f7061717565223a372c2273657269616c697a655479706543757272"
        "656e74525043223a224a534f4e222c2276657273696f6e223a307d"
    ),
    ("ROCKETMQ", "dledger"): (
        "000000c3010000bf0000000000000000070000000100000000000000aa0012636f6e74726f6c6c65724c656164"
        "65724964000000026e310017636f6e74726f6c6c65724c6561646572416464726573730000000e3132372e302e"
        "302e313a39383638000869734c65616465720000000566616c736500057065657273000000366e303a3132372e"
        "302e302e313a393837383b6e313a3132372e302e302e313a393836383b6e323a3132372e302e302e313a393835"
        "383b000567726f75700000000667726f757031"
    ),
    ("ROCKETMQ", "jraft"): (
        "000000cf010000cb0000000000000000070000000100000000000000b60012636f6e74726f6c6c65724c656164"
        "657249640000000e3132372e302e302e313a393838310017636f6e74726f6c6c65724c656164657241646472"
        "6573730000000e3132372e302e302e313a39373731000869734c65616465720000000474727565000570656572"
        "730000002d3132372e302e302e313a393737303b3132372e302e302e313a393737313b3132372e302e302e313a"
        "393737323b000567726f7570000000106a526166742d436f6e74726f6c6c6572"
    ),
}


def read(serialize_type: str, mode: str) -> dict[str, Any]:
    """The frame as RemotingControllerClient.get_metadata reads it."""
    frame = bytes.fromhex(FRAMES[(serialize_type, mode)])
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    cmd = codec.decode_frame(frame[4:])
    assert (cmd.code, cmd.opaque, cmd.is_response, cmd.body) == (0, 7, True, b"")
    return headers.decode_response("GetMetadata", cmd.ext_fields, cmd.body)


def peers(d: dict[str, Any]) -> list[tuple[str, str, bool]]:
    return [(p["raft_address"], p["grpc_address"], p["is_leader"]) for p in d["peers"]]


@pytest.mark.parametrize("serialize_type", ["JSON", "ROCKETMQ"])
def test_dledger_peers(serialize_type: str) -> None:
    d = read(serialize_type, "dledger")
    assert (d["group"], d["controller_leader_id"], d["controller_leader_address"], d["is_leader"]) == (
        "group1",
        "n1",
        "127.0.0.1:9868",
        False,
    )
    assert peers(d) == [
        ("n0", "127.0.0.1:9878", False),
        ("n1", "127.0.0.1:9868", True),
        ("n2", "127.0.0.1:9858", False),
    ]
    assert all(p["remoting_address"] == p["grpc_address"] for p in d["peers"])


@pytest.mark.parametrize("serialize_type", ["JSON", "ROCKETMQ"])
def test_jraft_peers(serialize_type: str) -> None:
    """Bare RPC addresses, not an id 127.0.0.1 with address 9770; the leader is the peer at
    controllerLeaderAddress, and gets the PeerId of controllerLeaderId."""
    d = read(serialize_type, "jraft")
    assert (d["group"], d["controller_leader_id"], d["controller_leader_address"], d["is_leader"]) == (
        "jRaft-Controller",
        "127.0.0.1:9881",
        "127.0.0.1:9771",
        True,
    )
    assert peers(d) == [
        ("", "127.0.0.1:9770", False),
        ("127.0.0.1:9881", "127.0.0.1:9771", True),
        ("", "127.0.0.1:9772", False),
    ]
    meta = Metadata.from_dict(d)
    assert [p.grpc_address for p in meta.peers] == ["127.0.0.1:9770", "127.0.0.1:9771", "127.0.0.1:9772"]
    assert [p.is_leader for p in meta.peers] == [False, True, False]


def test_other_peer_texts() -> None:
    parse = headers.parse_peers
    # mqctl's own header text (ids are Raft addresses; a node without a remoting door has no address)
    assert [
        (p["raft_address"], p["grpc_address"], p["is_leader"])
        for p in parse("127.0.0.1:9880:127.0.0.1:9878;127.0.0.1:9881:;", "127.0.0.1:9881")
    ] == [("127.0.0.1:9880", "127.0.0.1:9878", False), ("127.0.0.1:9881", "", True)]
    # JRaft without a leader: no leader id, no leader address (null: absent from the header)
    assert [p["is_leader"] for p in parse("127.0.0.1:9770;127.0.0.1:9771;", "")] == [False, False]
    # JRaft writes "null" for a peer without an RPC address
    assert parse("null;", "")[0]["raft_address"] == "null" and parse("null;", "")[0]["grpc_address"] == ""
    # host names and bracketed IPv6 addresses, with and without ids
    assert [
        (p["raft_address"], p["grpc_address"])
        for p in parse("n0:ctrl-0.example:9878;[::1]:9770;n1:[fe80::1]:9868", "")
    ] == [("n0", "ctrl-0.example:9878"), ("", "[::1]:9770"), ("n1", "[fe80::1]:9868")]
    assert parse("", "n0") == [] and parse(" ; ;", "n0") == []


# ----------------------------------------------------------------------------------------------
# The frames are RocketMQ's: built again with RocketMQ's own classes

# ../shared beside the repository, here and in CI ($MQCTL_SHARED_DIR elsewhere), as tests/interop has it
SHARED_LIB = (
    Path(os.environ.get("MQCTL_SHARED_DIR", Path(__file__).resolve().parents[2].parent / "shared"))
    / "rocketmq-java"
    / "lib"
)
DRIVER = Path(__file__).resolve().parents[1] / "interop" / "java" / "MetaDataHeaderDriver.java"


def test_frames_are_rocketmq_s_own_bytes(tmp_path: Path) -> None:
    """Needs java and javac (on every machine of this project, CI included; skipped loudly without
    them, as tests/interop) and RocketMQ's classes (a failure without them)."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            pytest.skip(
                f"!!! {tool} is not on PATH: RocketMQ's GetMetaDataResponseHeader frames are not "
                "checked; install Java 17 (every machine of this project has it) !!!"
            )
    if not (SHARED_LIB / "rocketmq.jar").is_file():
        pytest.fail(
            f"RocketMQ's classes are missing: {SHARED_LIB} (rocketmq-java beside the repository, or "
            "$MQCTL_SHARED_DIR/rocketmq-java)",
            pytrace=False,
        )
    classpath = f"{SHARED_LIB}/*"
    subprocess.run(
        ["javac", "-nowarn", "-cp", classpath, "-d", str(tmp_path), str(DRIVER)],
        check=True,
        capture_output=True,
        timeout=180,
    )
    for (serialize_type, mode), expected in FRAMES.items():
        args = DLEDGER if mode == "dledger" else JRAFT
        proc = subprocess.run(
            [
                "java",
                "-cp",
                f"{tmp_path}{os.pathsep}{classpath}",
                "MetaDataHeaderDriver",
                serialize_type,
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == expected, (serialize_type, mode)
