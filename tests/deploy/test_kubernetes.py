"""deploy/kubernetes: every manifest valid against Kubernetes' own schemas (kubernetes-validate, its
bundled schemas, offline), the pieces fit together (names, ports, probes, Secret keys, volumes, the
image's user), and the pods' command, environment and configuration start a group of three: run here
exactly as the kubelet would run them, the pods' DNS names and IPs replaced by 127.0.0.1 and free ports,
their volumes by directories, and nothing else."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from mqctl.localgroup import free_port, metadata, wait_until, watch_log

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy/kubernetes"
POD_IP = "<the pod's IP>"  # what the kubelet's downward API gives, made 127.0.0.1 below
KUBERNETES_VERSION = "1.30.0"  # the oldest release whose schemas the manifests must satisfy too


def manifests() -> dict[str, dict[str, Any]]:
    """kind/name -> resource, from every file of deploy/kubernetes."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return out


def test_every_manifest_is_valid_for_kubernetes() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    found = manifests()
    assert set(found) == {
        "ConfigMap/mqctl",
        "Secret/mqctl",
        "Service/mqctl-peers",
        "Service/mqctl",
        "PodDisruptionBudget/mqctl",
        "StatefulSet/mqctl",
    }
    for version in (KUBERNETES_VERSION, kv.utils.latest_version()):
        for doc in found.values():
            kv.validate(doc, version, strict=True)  # raises on any error, e.g. an unknown field
    # the same check refuses a manifest with a mistake in it
    broken = copy.deepcopy(found["StatefulSet/mqctl"])
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/ready"
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, KUBERNETES_VERSION, strict=True)
    broken = copy.deepcopy(found["PodDisruptionBudget/mqctl"])
    broken["spec"]["maxUnavailable"] = [1]
    with pytest.raises(kv.ValidationError):
        kv.validate(broken, KUBERNETES_VERSION, strict=True)


def container(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    (c,) = found["StatefulSet/mqctl"]["spec"]["template"]["spec"]["containers"]
    return c  # type: ignore[no-any-return]


def test_the_pieces_fit_together() -> None:
    found = manifests()
    sts = found["StatefulSet/mqctl"]
    pod = sts["spec"]["template"]["spec"]
    c = container(found)
    labels = sts["spec"]["template"]["metadata"]["labels"]
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["selector"]["matchLabels"].items() <= labels.items()
    headless = found["Service/" + sts["spec"]["serviceName"]]["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    for svc in ("Service/mqctl-peers", "Service/mqctl"):
        spec = found[svc]["spec"]
        assert spec["selector"].items() <= labels.items()
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert all(p["targetPort"] in ports and ports[p["targetPort"]] == p["port"] for p in spec["ports"])
    pdb = found["PodDisruptionBudget/mqctl"]["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["selector"]["matchLabels"].items() <= labels.items()
    # probes on /ready and /health of the metrics port, which MQCTL_METRICS_ADDRESS listens on
    env = {e["name"]: e for e in c["env"]}
    assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/health"
    metrics_port = {p["name"]: p["containerPort"] for p in c["ports"]}[c["readinessProbe"]["httpGet"]["port"]]
    assert env["MQCTL_METRICS_ADDRESS"]["value"].endswith(f":{metrics_port}")
    # the Secret holds every key the pods read from it
    secret = found["Secret/mqctl"]["stringData"]
    refs = [e["valueFrom"]["secretKeyRef"] for e in c["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    assert {r["name"] for r in refs} == {"mqctl"} and {r["key"] for r in refs} == set(secret)
    assert "MQCTL_CLUSTER_SECRET" in env
    # the data directory is on the PersistentVolumeClaim; the config file is the ConfigMap's
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    toml = found["ConfigMap/mqctl"]["data"]["controller.toml"]
    data_dir = re.search(r'(?m)^data_dir = "(.*)"', toml)
    assert data_dir and data_dir.group(1).startswith(mounts[claim["metadata"]["name"]] + "/")
    assert f"--config {mounts['config']}/controller.toml" in c["args"][0]
    # non-root, as the image's user
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True and c["securityContext"]["allowPrivilegeEscalation"] is False
    image = (ROOT / "deploy/Containerfile").read_text()
    user = re.search(r"(?m)^USER (\d+):(\d+)$", image)
    assert user and int(user.group(1)) == security["runAsUser"] != 0
    assert int(user.group(2)) == security["runAsGroup"] == security["fsGroup"]
    assert re.search(r"(?m)^COPY dist/mqctl-\*\.whl ", image)  # what `python -m build` makes


def test_peer_names_are_looked_up_again_soon() -> None:
    """A pod that was rescheduled has a new IP under the same name; the nodes that dial it must not use
    the old one for pysyncobj's default ten minutes."""
    from mqctl.controller.raftlog import make_conf

    conf = make_conf(None, secret=None)
    assert conf.dnsCacheTime <= 10 and conf.dnsFailCacheTime <= 2


def kubelet_env(c: dict[str, Any], pod: str, pod_ip: str, secret: dict[str, str]) -> dict[str, str]:
    """The container's environment as the kubelet makes it: the downward API's fields, the Secret's
    keys, and $(VAR) expanded from the variables defined before."""
    fields = {"metadata.name": pod, "status.podIP": pod_ip}
    env: dict[str, str] = {}
    for e in c["env"]:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        elif "fieldRef" in e["valueFrom"]:
            env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            env[e["name"]] = secret[e["valueFrom"]["secretKeyRef"]["key"]]
    return env


@pytest.mark.slow
def test_the_pods_commands_start_a_group_of_three(tmp_path: Path) -> None:
    found = manifests()
    c = container(found)
    secret = found["Secret/mqctl"]["stringData"]
    toml = found["ConfigMap/mqctl"]["data"]["controller.toml"]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    ports: dict[tuple[int, str], str] = {}

    def port(pod: int, p: str) -> str:
        return ports.setdefault((pod, p), str(free_port()))

    def local(text: str, pod: int) -> str:
        """Pod DNS names, and this pod's IP (POD_IP), as 127.0.0.1 with free ports."""
        text = re.sub(
            r"mqctl-(\d)\.mqctl-peers:(\d+)", lambda m: "127.0.0.1:" + port(int(m.group(1)), m.group(2)), text
        )
        text = re.sub(re.escape(POD_IP) + r":(\d+)", lambda m: "127.0.0.1:" + port(pod, m.group(1)), text)
        return re.sub(
            r"(?m)^remoting_port = (\d+)", lambda m: "remoting_port = " + port(pod, m.group(1)), text
        )

    procs: list[subprocess.Popen[bytes]] = []
    envs = []
    for i in range(3):
        pod = f"mqctl-{i}"
        volume = tmp_path / pod / "volume"  # the PersistentVolumeClaim
        volume.mkdir(parents=True)
        config_dir = tmp_path / pod / "config"  # the ConfigMap's mount
        config_dir.mkdir()
        (config_dir / "controller.toml").write_text(
            local(toml, i).replace(f'"{mounts["data"]}/', f'"{volume}/')
        )
        env = {k: local(v, i) for k, v in kubelet_env(c, pod, POD_IP, secret).items()}
        script = local(c["args"][0], i).replace(
            f"{mounts['config']}/controller.toml", str(config_dir / "controller.toml")
        )
        env.update(
            PATH=f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
            MQCTL_PARENT_PID=str(os.getpid()),
            HOME=str(tmp_path / pod),
        )
        envs.append((c["command"], script, env))
    # every pod's own addresses are its own ports; the names of the others, theirs
    raft = [f"127.0.0.1:{port(i, '9880')}" for i in range(3)]
    assert [e["MQCTL_RAFT"] for _, _, e in envs] == raft
    metrics = [e["MQCTL_METRICS_ADDRESS"] for _, _, e in envs]
    probe = c["readinessProbe"]["httpGet"]["path"]
    live = c["livenessProbe"]["httpGet"]["path"]

    def start(i: int) -> None:
        command, script, env = envs[i]
        log_path = tmp_path / f"mqctl-{i}.log"
        watch_log(str(log_path))
        with open(log_path, "ab") as log:
            p = subprocess.Popen([*command, script], stdout=log, stderr=subprocess.STDOUT, env=env)
        if len(procs) > i:
            procs[i] = p
        else:
            procs.append(p)

    def answers(address: str, path: str) -> bool:
        try:
            with urllib.request.urlopen(f"http://{address}{path}", timeout=2) as answer:
                return bool(answer.status == 200)
        except urllib.error.HTTPError:
            return False

    try:
        for i in range(3):
            start(i)
        for m in metrics:
            wait_until(lambda m=m: answers(m, probe), 60, what=f"readiness probe {probe} of {m}")
        remoting: set[str] = set()
        for i, (_, _, env) in enumerate(envs):
            meta = metadata(env["MQCTL_LISTEN"])
            assert sorted(p["raft_address"] for p in meta["peers"]) == sorted(raft)
            me = [p for p in meta["peers"] if p["is_self"]]
            # it publishes its stable name (here its loopback port), not its IP
            assert me[0]["grpc_address"] == env["MQCTL_ADVERTISE"]
            # RocketMQ's remoting door of the pod names its leader by the published remoting address
            proc = subprocess.run(
                [
                    str(Path(sys.executable).with_name("mqctl")),
                    "getControllerMetaData",
                    "--protocol",
                    "remoting",
                    "-a",
                    env["MQCTL_ADVERTISE_REMOTING"],
                    "-o",
                    "json",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                env={**env, "MQCTL_TOKEN": ""},
            )
            assert proc.returncode == 0, proc.stderr
            remoting.add(json.loads(proc.stdout)["controllerLeaderAddress"])
            assert answers(metrics[i], live)
        (leader,) = [i for i, (_, _, env) in enumerate(envs) if metadata(env["MQCTL_LISTEN"])["is_leader"]]
        assert remoting == {envs[leader][2]["MQCTL_ADVERTISE_REMOTING"]}
        # a pod deleted (SIGTERM) while it leads hands its leadership over; recreated, it is ready again
        procs[leader].send_signal(signal.SIGTERM)
        assert procs[leader].wait(30) == 0
        log = (tmp_path / f"mqctl-{leader}.log").read_text()
        assert "handed the leadership over to 127.0.0.1:" in log, log[-3000:]
        start(leader)
        wait_until(lambda: answers(metrics[leader], probe), 60, what="the recreated pod's readiness")
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
