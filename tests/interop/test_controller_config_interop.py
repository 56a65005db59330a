"""GET_CONTROLLER_CONFIG (1010) and UPDATE_CONTROLLER_CONFIG (1009) of a real `mqctl serve --remoting-port`
against what RocketMQ's own classes say (../shared/rocketmq-java/lib, compiled unchanged):

- the keys and default values RocketMQ's controller answers, printed by
  tests/interop/java/ControllerConfigDriver.java (ControllerManager's Configuration of ControllerConfig
  and NettyServerConfig), against mqctl's answer on the wire;
- RocketMQ's mqadmin getControllerConfig / updateControllerConfig (lib/mqadmin.jar) against mqctl;
- mqctl's own getControllerConfig / updateControllerConfig over remoting.

The Java driver is compiled by conftest.py (java_classes) with the other drivers of java/.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import start_remoting
from interop_fixtures import CLASSPATH, JVM_OPTS, mqadmin, remoting_cluster

from mqctl.controller import core
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import LocalCluster, wait_until
from mqctl.remoting import codec
from mqctl.remoting.client import RemotingControllerClient
from mqctl.remoting.codec import RemotingCommand

pytestmark = pytest.mark.slow

# Keys whose values depend on the machine or the deployment: compared by key (and by the shape of the
# value), not by value. Each with the reason.
BY_KEY_ONLY: dict[str, str] = {
    "rocketmqHome": "RocketMQ: $ROCKETMQ_HOME, the installation; mqctl: the node's data directory",
    "configStorePath": "RocketMQ: ~/controller/controller.properties; mqctl: the Raft journal in the data "
    "directory (the config is replicated through the Raft log)",
    "controllerStorePath": "the data directory of the node",
    "listenPort": "the port the node serves RocketMQ remoting on (RocketMQ's ControllerStartup: 19876)",
    "controllerDLegerGroup": "the controller group's name (mqctl: --group)",
    "controllerDLegerPeers": "the members of the group (mqctl: Raft addresses, which are its node ids)",
    "controllerDLegerSelfId": "the node's id in the group (mqctl: its Raft address)",
    "jraftConfig": "Object.toString() of a JraftConfig: class name @ identity hash code",
}
VALUE_SHAPES: dict[str, str] = {
    "rocketmqHome": r".+",
    "configStorePath": r".+",
    "controllerStorePath": r".+",
    "listenPort": r"[1-9][0-9]*",
    "controllerDLegerGroup": r".+",
    "controllerDLegerPeers": r"[^;-]+-[^;]+(;[^;-]+-[^;]+)*",
    "controllerDLegerSelfId": r".+",
    "jraftConfig": r"org\.apache\.rocketmq\.common\.JraftConfig@[0-9a-f]+",
}
# mqctl's own keys, next to RocketMQ's
MQCTL_KEYS = {
    "waitFor",
    "heartbeatTimeoutMillis",
    "controllerGroup",
    "raftAddress",
    "raftPeers",
    "listenAddress",
    "remotingAddress",
    "historyMaxEntries",
    core.NOT_HONOURED_KEY,
}


def rocketmq_config(classes: Path, *args: str) -> tuple[str, dict[str, str]]:
    proc = subprocess.run(
        ["java", *JVM_OPTS, "-cp", f"{classes}:{CLASSPATH}", "ControllerConfigDriver", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, codec.properties_loads(proc.stdout.encode())


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, str]]:
    """One `mqctl serve --remoting-port` node with every config default (LocalCluster's short heartbeat
    timeout and scan interval taken out)."""
    cluster, addresses = remoting_cluster(str(tmp_path_factory.mktemp("config-interop")), 1)
    args = cluster.nodes[0].args
    for flag in ("--heartbeat-timeout", "--scan-interval"):
        i = args.index(flag)
        del args[i : i + 2]
    with cluster:
        start_remoting(cluster, addresses)
        yield cluster, addresses[0]


def ask(address: str, cmd: RemotingCommand) -> RemotingCommand:
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(codec.encode_frame(cmd))
        data = b""
        while len(data) < 4 or len(data) < 4 + int.from_bytes(data[:4], "big"):
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            data += chunk
    return codec.decode_frame(data[4 : 4 + int.from_bytes(data[:4], "big")])


def test_get_controller_config_has_rocketmq_s_keys_and_defaults(
    java_classes: Path, node: tuple[LocalCluster, str]
) -> None:
    cluster, address = node
    default_text, defaults = rocketmq_config(java_classes)
    _, deployment = rocketmq_config(java_classes, "deployment")
    # RocketMQ's answer: sorted key=value lines, no escaping (MixAll.properties2String(p, true))
    lines = default_text.splitlines()
    assert lines == sorted(lines) and all("=" in line for line in lines)

    answer = ask(address, RemotingCommand(code=1010, opaque=5))
    assert (answer.code, answer.remark, answer.ext_fields) == (0, None, None)
    text = answer.body.decode("utf-8")
    assert text.endswith("\n") and text.splitlines() == sorted(text.splitlines())
    mqctl = codec.properties_loads(answer.body)
    assert text == "".join(f"{k}={v}\n" for k, v in sorted(mqctl.items()))

    # every key of a RocketMQ DLedger controller, plus mqctl's own
    assert set(mqctl) - MQCTL_KEYS == set(deployment)
    assert set(defaults) <= set(deployment)
    # rocketmqHome (without $ROCKETMQ_HOME) and the DLedger settings come from the deployment
    assert set(deployment) - set(defaults) <= set(BY_KEY_ONLY)
    for key, value in sorted(deployment.items()):
        if key in BY_KEY_ONLY:
            assert re.fullmatch(VALUE_SHAPES[key], mqctl[key]), (key, mqctl[key], BY_KEY_ONLY[key])
            assert re.fullmatch(VALUE_SHAPES[key], value), (key, value)
        else:
            assert mqctl[key] == value, (key, mqctl[key], value)
            assert defaults[key] == value, key

    # mqctl's values for the deployment keys
    n = cluster.nodes[0]
    assert mqctl["listenPort"] == address.rpartition(":")[2]
    assert mqctl["controllerDLegerSelfId"] == n.raft_address == mqctl["raftAddress"]
    assert mqctl["controllerDLegerPeers"] == f"{n.raft_address}-{n.raft_address}"
    assert mqctl["controllerStorePath"] == mqctl["rocketmqHome"] == n.data_dir
    assert mqctl["controllerDLegerGroup"] == mqctl["controllerGroup"] == "mqctl"
    assert mqctl["remotingAddress"] == address and mqctl["listenAddress"] == n.grpc_address
    # what an update does not change, named; the rest is honoured or black-listed
    not_honoured = mqctl[core.NOT_HONOURED_KEY].split(";")
    assert not_honoured == sorted(not_honoured) and set(not_honoured) <= set(deployment)
    assert {"controllerThreadPoolNums", "mappedFileSize", "serverWorkerThreads", "listenPort"} <= set(
        not_honoured
    )
    rest = set(deployment) - set(not_honoured)
    assert rest == {
        "enableElectUncleanMaster",
        "scanNotActiveBrokerInterval",
        "configBlackList",
        "configStorePath",
        "rocketmqHome",
        "notifyBrokerRoleChanged",
    }


def test_update_controller_config_as_rocketmq(node: tuple[LocalCluster, str]) -> None:
    """Unparsable body 1, black-listed key 16, unknown and not honoured keys ignored (SUCCESS, named in
    the node's log), honoured keys changed."""
    cluster, address = node
    answer = ask(address, RemotingCommand(code=1009, opaque=6, body=b"waitFor=\\u12"))
    assert (answer.code, answer.remark) == (Code.SYSTEM_ERROR, "string2Properties error")
    for body in (b"rocketmqHome=/x", b"configBlackList=", b"configStorePath=/x\nwaitFor=2"):
        answer = ask(address, RemotingCommand(code=1009, opaque=7, body=body))
        assert (answer.code, answer.remark) == (Code.NO_PERMISSION, "Can not update config in black list.")
    # RocketMQ reads the body as UTF-8 with replacement characters: not a reason to refuse it
    answer = ask(address, RemotingCommand(code=1009, opaque=8, body=b"noSuch\xffKey=1\n"))
    assert (answer.code, answer.remark) == (0, None)
    with RemotingControllerClient(address, timeout=10) as client:
        before = client.get_config().config
        assert before["waitFor"] == "1" and before["mappedFileSize"] == "1073741824"
        client.update_config(
            {
                "noSuchKey": "1",
                "mappedFileSize": "4096",
                "notifyBrokerRoleChanged": "false",
                "controllerThreadPoolNums": "x",
                "scanNotActiveBrokerInterval": "4000",
            }
        )
        after = client.get_config().config
        assert after == {**before, "scanNotActiveBrokerInterval": "4000", "notifyBrokerRoleChanged": "false"}
        client.update_config({"notifyBrokerRoleChanged": "true"})
        with pytest.raises(ControllerError) as err:  # a value mqctl cannot use: 2005 (controller-rules.md)
            client.update_config({"waitFor": "many"})
        assert err.value.code == Code.CONTROLLER_INVALID_REQUEST and "waitFor" in err.value.remark
        client.update_config({"scanNotActiveBrokerInterval": "5000"})
    logged = (
        "UpdateConfig: ignored controllerThreadPoolNums (not honoured by mqctl), mappedFileSize (not "
        "honoured by mqctl), noSuchKey (unknown key)"
    )
    wait_until(lambda: logged in cluster.nodes[0].log_text(), 10, what="the ignored keys in the node's log")


def test_rocketmq_s_mqadmin_reads_and_updates_the_config(
    java_tools: None, node: tuple[LocalCluster, str]
) -> None:
    _, address = node
    proc = mqadmin("getControllerConfig", "-a", address)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"============{address}============"
    shown = {}
    for line in lines[1:]:
        key, sep, value = line.partition("=  ")  # "%-50s=  %s"
        assert sep, line
        shown[key.rstrip()] = value
    with RemotingControllerClient(address, timeout=10) as client:
        assert shown == client.get_config().config

        key = "enableElectUncleanMaster"
        proc = mqadmin("updateControllerConfig", "-a", address, "-k", key, "-v", "true")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert proc.stdout == f"update controller config success![{address}]\n{key} : true\n"
        assert client.get_config().config["enableElectUncleanMaster"] == "true"
        # an unknown key: ignored, as by RocketMQ's controller
        proc = mqadmin("updateControllerConfig", "-a", address, "-k", "noSuchKey", "-v", "1")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "noSuchKey" not in client.get_config().config
        proc = mqadmin("updateControllerConfig", "-a", address, "-k", "configStorePath", "-v", "/tmp/x")
        assert proc.returncode == 1 and "CODE: 16" in proc.stdout + proc.stderr
        assert "Can not update config in black list." in proc.stdout + proc.stderr
        client.update_config({"enableElectUncleanMaster": "false"})


def mqctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mqctl", *args], capture_output=True, text=True, timeout=60)


def test_mqctl_s_config_commands_over_remoting(node: tuple[LocalCluster, str]) -> None:
    _, address = node
    a = ["-a", address, "--protocol", "remoting"]
    proc = mqctl("getControllerConfig", *a, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    config = doc["controllers"][0]["config"]
    assert doc["controllers"][0]["address"] == address and "error" not in doc["controllers"][0]
    assert config["mappedFileSize"] == "1073741824" and core.NOT_HONOURED_KEY in config
    proc = mqctl("getControllerConfig", *a, "--no-color")
    assert proc.returncode == 0, proc.stderr
    assert "serverWorkerThreads" in proc.stdout and "mqctlNotHonoured" in proc.stdout
    proc = mqctl("updateControllerConfig", *a, "-k", "waitFor", "-v", "2", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["value"] == "2"
    proc = mqctl("updateControllerConfig", *a, "-k", "rocketmqHome", "-v", "/x")
    assert proc.returncode == 3 and "NO_PERMISSION (16)" in proc.stderr
    proc = mqctl("updateControllerConfig", *a, "-k", "waitFor", "-v", "1")
    assert proc.returncode == 0, proc.stderr
