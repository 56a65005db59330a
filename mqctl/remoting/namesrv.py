"""RocketMQ name servers, as mqadmin's ``-n/--namesrvAddr`` uses them for the controller commands.

mqadmin asks a name server for GET_BROKER_CLUSTER_INFO (106, an empty request) and reads the
ClusterInfo it answers (``brokerAddrTable``: each broker set's cluster and ``brokerAddrs``, broker id
-> address, the master as id 0; ``clusterAddrTable``: cluster -> broker set names), then:

- getSyncStateSet ``-c CLUSTER``: the cluster's broker set names (CommandUtil.fetchBrokerNameByClusterName,
  an unknown cluster is an error), asked of the controller;
- getBrokerEpoch ``-b NAME`` / ``-c CLUSTER``: the addresses of every broker of the set or of the cluster
  (CommandUtil.fetchMasterAndSlaveAddrByBrokerName / ...ByClusterName), each asked for its epoch cache.

``-n`` is a ``;`` list (``192.168.0.1:9876;192.168.0.2:9876``); the servers are asked in turn until one
answers, as RocketMQ's client moves to the next name server when one fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mqctl.errors import NotFoundError, UnreachableError

if TYPE_CHECKING:
    from mqctl.remoting.client import RemotingConnection

__all__ = ["NO_CLUSTER", "ClusterInfo", "cluster_info"]

# CommandUtil.ERROR_MESSAGE, what mqadmin says of a cluster the name server does not know
NO_CLUSTER = "Make sure the specified clusterName exists or the name server connected to is correct."


@dataclass
class ClusterInfo:
    """A name server's ClusterInfo (mqctl.remoting.headers.read_cluster_info), in the body's order."""

    broker_addrs: dict[str, dict[int, str]] = field(default_factory=dict)  # set name -> id -> address
    cluster_of: dict[str, str] = field(default_factory=dict)  # set name -> cluster
    clusters: dict[str, list[str]] = field(default_factory=dict)  # cluster -> set names
    answered_by: str = ""

    @classmethod
    def from_dict(cls, d: dict[str, object], answered_by: str = "") -> ClusterInfo:
        table = d.get("broker_addr_table") or {}
        assert isinstance(table, dict)
        clusters = d.get("cluster_addr_table") or {}
        assert isinstance(clusters, dict)
        return cls(
            broker_addrs={n: dict(b["broker_addrs"]) for n, b in table.items()},
            cluster_of={n: b["cluster"] for n, b in table.items()},
            clusters={c: list(names) for c, names in clusters.items()},
            answered_by=answered_by,
        )

    def broker_names(self, cluster: str) -> list[str]:
        """The broker sets of ``cluster`` (NotFoundError with mqadmin's words when it has none)."""
        names = self.clusters.get(cluster) or []
        if not names:
            known = ", ".join(sorted(self.clusters)) or "none"
            raise NotFoundError(
                f"cluster {cluster} not found on the name server {self.answered_by}: "
                f"{NO_CLUSTER} (clusters: {known})"
            )
        return list(names)

    def replicas(self, broker_name: str) -> list[tuple[int, str]]:
        """(broker id, address) of every broker of the set, as the name server knows them (the
        master is id 0); empty for a set it does not know."""
        return sorted(self.broker_addrs.get(broker_name, {}).items())


def cluster_info(
    addresses: str | list[str],
    timeout: float = 5.0,
    connect: Callable[[str], RemotingConnection] | None = None,
) -> ClusterInfo:
    """GET_BROKER_CLUSTER_INFO (106) of the first name server of ``addresses`` that answers.
    ``connect``: the connection to use for an address (a RemotingControllerClient's ``connection``,
    with its TLS and ACL settings, as mqadmin's one client config serves the name server too; the
    caller closes it); by default a plain connection, closed after the call."""
    # lazy: start-up
    from mqctl.api import parse_addresses
    from mqctl.remoting import codec, headers
    from mqctl.remoting.client import RemotingConnection, RemotingError

    errors = []
    for address in parse_addresses(addresses):
        try:
            if connect is not None:
                answer = connect(address).invoke(headers.GET_BROKER_CLUSTER_INFO, None, b"", timeout=timeout)
            else:
                with RemotingConnection(address, connect_timeout=min(3.0, timeout)) as conn:
                    answer = conn.invoke(headers.GET_BROKER_CLUSTER_INFO, None, b"", timeout=timeout)
        except (RemotingError, codec.FrameError) as exc:
            errors.append(str(exc))
            continue
        if answer.code != 0:
            errors.append(f"{address}: code {answer.code}: {answer.remark or ''}")
            continue
        try:
            return ClusterInfo.from_dict(
                headers.read_cluster_info(answer.body) if answer.body else {}, answered_by=address
            )
        except codec.BodyError as exc:
            errors.append(f"{address}: {exc}")
    raise UnreachableError(
        "no name server answered GET_BROKER_CLUSTER_INFO (-n/--namesrvAddr): " + "; ".join(errors[-3:])
    )
