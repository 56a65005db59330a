"""A simulated RocketMQ 5.1.1+ broker starting on a store (run as its own process by the tests).

It does what ReplicasManager does at start, through ControllerClient: hold `<store>/lock`; use
brokerIdentity or get the next id, write brokerIdentity-temp, apply it, write brokerIdentity;
register with the store's max offset; heartbeat (tests/harness.py's Beater); a master asks to be elected
and appends (masterEpoch, maxOffset) to its epoch file once it is. Prints `ready id=N`, runs until
stdin closes.

usage: simbroker.py STORE CONTROLLER CLUSTER BROKER_NAME ADDRESS master|slave
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: tests/harness.py

from harness import Beater

from mqctl.client import ControllerClient
from mqctl.errors import ControllerError
from mqctl.recover.inspect import inspect_store
from mqctl.store.epochfile import EpochEntry, read_epoch_file, write_epoch_file
from mqctl.store.identity import (
    BrokerIdentity,
    TempBrokerIdentity,
    read_identity,
    temp_identity_path,
    write_identity,
    write_temp_identity,
)


def main() -> None:
    store, controller, cluster, name, address, role = sys.argv[1:7]
    root = Path(store)
    fd = os.open(root / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    rep = inspect_store(root)
    client = ControllerClient(controller, timeout=20)
    ident = read_identity(root)
    if ident is None:
        nid = client.get_next_broker_id(cluster, name).next_broker_id
        code = f"{address};{int(time.time() * 1000)}"
        write_temp_identity(root, TempBrokerIdentity(cluster, name, nid, code))
        client.apply_broker_id(cluster, name, nid, code)
        write_identity(root, BrokerIdentity(cluster, name, nid))
        temp_identity_path(root).unlink()
        ident = BrokerIdentity(cluster, name, nid)
    bid = ident.broker_id
    epochs = read_epoch_file(root).entries
    last = epochs[-1].epoch if epochs else 0
    client.register_broker(cluster, name, bid, address, epoch=last, max_offset=rep.max_offset)
    beater = Beater(client, period=0.2, cluster_name=cluster)
    beater.beat(name, bid, address, epoch=last, max_offset=rep.max_offset)
    if role == "master":
        deadline = time.monotonic() + 30
        while True:
            try:
                res = client.elect_master(cluster, name, bid)
                master, epoch = res.master_broker_id, res.master_epoch
            except ControllerError as exc:
                info = client.get_replica_info(name) if exc.code == 2011 else None
                master = info.master_broker_id if info else None
                epoch = info.master_epoch if info else None
            if master == bid and epoch is not None:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"not elected: master {master}")
            time.sleep(0.2)
        if not epochs or epochs[-1].epoch < epoch:
            write_epoch_file(root, [*epochs, EpochEntry(epoch, rep.max_offset)])
    print(f"ready id={bid}", flush=True)
    sys.stdin.read()
    beater.stop()
    client.close()
    os.close(fd)


if __name__ == "__main__":
    main()
