"""Persistent broker ids (seed 000): crash at every failure point of the design, over several seeds, against
a real controller; identity files of another broker refused without touching anything."""

from __future__ import annotations

import random
import threading

import pytest
from broker_fixtures import CLUSTER, fast_config, snapshot, start_agent

from mqctl.broker.agent import BrokerAgent, Role, make_client
from mqctl.broker.registration import IdentityMismatch
from mqctl.client import ControllerClient
from mqctl.errors import Code, ControllerError
from mqctl.localgroup import wait_until
from mqctl.sim.inject import CRASH_POINTS, CrashAt
from mqctl.store.abort import read_abort
from mqctl.store.identity import (
    BrokerIdentity,
    TempBrokerIdentity,
    read_identity,
    read_temp_identity,
    write_identity,
    write_temp_identity,
)

pytestmark = pytest.mark.slow

# What the store holds when the agent died at each point: (temp file, identity file).
EXPECTED_FILES = {
    "before_temp_file": (False, False),
    "after_temp_file": (True, False),
    "after_apply_refused": (True, False),
    "after_apply_accepted": (True, False),
    "after_identity_file": (True, True),
    "before_register": (False, True),
}


def crash_at(point: str, store, addresses: str, name: str):
    """The agent's controller client kills it at ``point``; "after_identity_file" (brokerIdentity
    written, the temp file not deleted yet: no controller call between) is a crash before RegisterBroker
    with the temp file put back, the files that crash leaves."""

    def client():
        real = make_client(fast_config(store, addresses, name))
        return CrashAt("before_register" if point == "after_identity_file" else point, real)

    return client


def controller_ids(client: ControllerClient, broker_name: str) -> dict[int, str]:
    info = client.get_sync_state_data(broker_name).replicas_info_table[broker_name]
    return {r.broker_id: r.broker_address for r in info.in_sync_replicas + info.not_in_sync_replicas}


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_crash_at_every_registration_point(controller, tmp_path, seed: int) -> None:
    rng = random.Random(seed)
    name = f"reg-{seed}"
    addresses = controller.addresses
    first = start_agent(tmp_path / "b0", addresses, name)
    assert first.registered.wait(30), first.error
    points = [*CRASH_POINTS, "after_identity_file"]
    rng.shuffle(points)
    stores = {p: tmp_path / f"b-{p}" for p in points}
    for p, store in stores.items():
        if p == "after_apply_refused":
            # a broker that died after its temp file while another broker took the id: its apply is refused
            store.mkdir()
            taken = first.broker_id or 1
            write_temp_identity(store, TempBrokerIdentity(CLUSTER, name, taken, "127.0.0.1:30919;1"))
    racers = [tmp_path / f"r{i}" for i in range(2)]  # brokers without faults, racing for the same ids
    started: dict[str, BrokerAgent] = {}
    lock = threading.Lock()

    def launch(key: str, store, client_factory) -> None:
        threading.Event().wait(rng.random() * 0.05)
        agent = start_agent(store, addresses, name, client_factory=client_factory)
        with lock:
            started[key] = agent

    threads = [
        threading.Thread(target=launch, args=(p, stores[p], crash_at(p, stores[p], addresses, name)))
        for p in points
    ]
    threads += [threading.Thread(target=launch, args=(f"racer{i}", s, None)) for i, s in enumerate(racers)]
    rng.shuffle(threads)
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    agents = [first]
    try:
        for p in points:
            agent = started[p]
            assert agent.finished.wait(30), f"{p}: the agent did not die"
            assert agent.role == Role.CRASHED, (p, agent.role, agent.error)
            if p == "after_identity_file":
                ident = read_identity(stores[p])
                assert ident is not None
                write_temp_identity(
                    stores[p], TempBrokerIdentity(CLUSTER, name, ident.broker_id, f"{agent.address};1")
                )
            has_temp = read_temp_identity(stores[p]) is not None
            has_ident = read_identity(stores[p]) is not None
            assert (has_temp, has_ident) == EXPECTED_FILES[p], p
            assert read_abort(stores[p]) is not None, f"{p}: a crash leaves the abort file"
        # restart every crashed broker without faults
        restarted = [start_agent(stores[p], addresses, name) for p in points]
        agents += restarted + [started[f"racer{i}"] for i in range(len(racers))]
        for a in agents:
            assert a.registered.wait(30), f"{a.name} stuck: {a.error}"
        ids = {}
        for a in agents:
            ident = read_identity(a.root)
            assert ident is not None and ident.broker_id == a.broker_id
            assert (ident.cluster_name, ident.broker_name) == (CLUSTER, name)
            assert read_temp_identity(a.root) is None, f"{a.name}: temp file left behind"
            holder = ids.get(ident.broker_id)
            assert holder is None, f"id {ident.broker_id} held by {holder and holder.name} and {a.name}"
            ids[ident.broker_id] = a
        with ControllerClient(addresses) as client:
            registered = wait_until(lambda: controller_ids(client, name), 10, what="replicas")
            assert set(registered) == set(ids), "every controller id belongs to exactly one broker"
            # the controller knows each broker at its current address (RegisterBroker updated it)
            wait_until(
                lambda: all(controller_ids(client, name)[i] == a.address for i, a in ids.items()),
                10,
                what="current addresses",
            )
    finally:
        for a in agents + list(started.values()):
            a.stop()


def test_restart_with_identity_goes_straight_to_register(controller, tmp_path) -> None:
    name = "reg-restart"
    agent = start_agent(tmp_path / "b", controller.addresses, name)
    assert agent.registered.wait(30)
    bid, epoch = agent.broker_id, agent.broker_epoch
    agent.stop()
    with ControllerClient(controller.addresses) as client:
        before = client.get_next_broker_id(CLUSTER, name).next_broker_id
        again = start_agent(tmp_path / "b", controller.addresses, name)
        try:
            assert again.registered.wait(30)
            assert again.broker_id == bid and again.broker_epoch > epoch
            assert client.get_next_broker_id(CLUSTER, name).next_broker_id == before, "no new id was applied"
        finally:
            again.stop()


@pytest.mark.parametrize("which", ["identity", "temp"])
def test_identity_of_another_broker_is_refused_untouched(controller, tmp_path, which: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    if which == "identity":
        write_identity(store, BrokerIdentity("other-cluster", "other-broker", 3))
    else:
        write_temp_identity(store, TempBrokerIdentity(CLUSTER, "other-broker", 3, "127.0.0.1:30911;1"))
    (store / "epochFileCheckpoint").write_bytes(b"1\n0\n1-0\n")
    before = snapshot(store)
    agent = BrokerAgent(fast_config(store, controller.addresses, "reg-mismatch"))
    with pytest.raises(IdentityMismatch) as info:
        agent.start()
    msg = str(info.value)
    assert "other-broker" in msg and "reg-mismatch" in msg and "nothing was changed" in msg
    assert snapshot(store) == before
    with ControllerClient(controller.addresses) as client, pytest.raises(ControllerError) as err:
        client.get_replica_info("reg-mismatch")
    assert err.value.code == Code.CONTROLLER_BROKER_METADATA_NOT_EXIST
