"""Faults injected into broker agents from outside, through what the agents are given: their controller
client and their peers. The broker library has no fault hooks.

* ``Network``: agents started through it (``Network.agent``) can be cut off (``isolate``): while cut,
  every controller call of the agent fails with UNAVAILABLE, the role changes pushed to it are dropped,
  and its peer calls fail both ways (its own, and the other agents' calls to it; an answer that arrives
  after the cut is dropped too). Its threads keep running.
* ``CrashAt``: a controller client that kills its agent (``AgentStopped``, the agent stops without any
  cleanup) at one step of the persistent broker id design (``CRASH_POINTS``), at a controller call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from mqctl.broker.agent import BrokerAgent, make_client
from mqctl.broker.config import AgentConfig
from mqctl.broker.peers import FetchRequest, FetchResponse, GrpcPeers, LocalPeers, Peers, PeerUnavailable
from mqctl.broker.registration import AgentStopped
from mqctl.errors import Code, ControllerError
from mqctl.store.epochfile import EpochCacheView

__all__ = ["CRASH_POINTS", "CrashAt", "Link", "Network"]


class Link:
    """One agent's connection to the network; ``cut`` while it is isolated."""

    def __init__(self, network: Network) -> None:
        self.network = network
        self.cut = False
        self.agent: BrokerAgent | None = None


class Network:
    """The agents of a simulation or a test, and which of them are cut off."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._links: list[Link] = []

    def agent(
        self, config: AgentConfig, *, client_factory: Callable[[], Any] | None = None, **kw: Any
    ) -> BrokerAgent:
        """A BrokerAgent (not started) on its own link, its controller client from ``client_factory``
        (default: mqctl.broker.agent.make_client)."""
        link = Link(self)
        inner = client_factory or (lambda: make_client(config))

        def peers() -> Peers:
            return _LinkedPeers(link, LocalPeers() if config.peer_transport == "local" else GrpcPeers())

        agent = BrokerAgent(
            config, client_factory=lambda: _LinkedClient(link, inner()), peers_factory=peers, **kw
        )
        link.agent = agent
        with self._lock:
            self._links = [li for li in self._links if li.agent is not None and li.agent.alive]
            self._links.append(link)
        return agent

    def link_of(self, agent: BrokerAgent) -> Link | None:
        with self._lock:
            return next((li for li in self._links if li.agent is agent), None)

    def isolate(self, agent: BrokerAgent, on: bool = True) -> None:
        """Cut ``agent`` off (or reconnect it): its controller and peer traffic, both directions."""
        link = self.link_of(agent)
        if link is None:
            raise ValueError(f"{agent.name} was not started through this network")
        link.cut = on

    def is_isolated(self, agent: BrokerAgent) -> bool:
        link = self.link_of(agent)
        return link is not None and link.cut

    def cut_address(self, address: str) -> bool:
        with self._lock:
            return any(li.cut and li.agent is not None and li.agent.address == address for li in self._links)


class _LinkedClient:
    """The agent's controller client, failing with UNAVAILABLE while its link is cut."""

    def __init__(self, link: Link, inner: Any) -> None:
        self._link = link
        self._inner = inner

    def _check(self) -> None:
        if self._link.cut:
            name = self._link.agent.name if self._link.agent is not None else "agent"
            raise ControllerError(Code.UNAVAILABLE, f"{name} is isolated")

    def __getattr__(self, attr: str) -> Any:
        target = getattr(self._inner, attr)
        if not callable(target) or attr == "close":
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            self._check()
            return target(*args, **kwargs)

        return call

    def watch_role_changes(self, *args: Any, **kwargs: Any) -> _LinkedWatch:
        self._check()
        return _LinkedWatch(self._link, self._inner.watch_role_changes(*args, **kwargs))


class _LinkedWatch:
    """A role-change stream whose changes are lost while the link is cut."""

    def __init__(self, link: Link, inner: Any) -> None:
        self._link = link
        self._inner = inner

    def __iter__(self) -> Iterator[Any]:
        for change in self._inner:
            if not self._link.cut:
                yield change

    def close(self) -> None:
        self._inner.close()


class _LinkedPeers:
    """The agent's peers: a call fails while either end is cut, before it is sent or when it returns."""

    def __init__(self, link: Link, inner: Peers) -> None:
        self._link = link
        self._inner = inner

    def _check(self, address: str) -> None:
        if self._link.cut or self._link.network.cut_address(address):
            raise PeerUnavailable(f"{address}: unreachable (isolated)")

    def epoch_cache(self, address: str, timeout: float) -> EpochCacheView:
        self._check(address)
        answer = self._inner.epoch_cache(address, timeout)
        self._check(address)
        return answer

    def fetch(self, address: str, request: FetchRequest, timeout: float) -> FetchResponse:
        self._check(address)
        answer = self._inner.fetch(address, request, timeout)
        self._check(address)
        return answer

    def close(self) -> None:
        self._inner.close()


# The steps of the persistent broker id design (mqctl.broker.registration) where a crash leaves
# distinct files behind, each at a controller call of the agent.
CRASH_POINTS = (
    "before_temp_file",  # GetNextBrokerId answered, the temp file not written yet
    "after_temp_file",  # temp file written, ApplyBrokerId not sent
    "after_apply_refused",  # ApplyBrokerId answered 2014, the temp file not deleted yet
    "after_apply_accepted",  # ApplyBrokerId answered SUCCESS, brokerIdentity not written yet
    "before_register",  # brokerIdentity written, the temp file deleted, RegisterBroker not sent
)


class CrashAt:
    """A controller client that kills its agent once, at ``point`` (one of CRASH_POINTS)."""

    def __init__(self, point: str, inner: Any) -> None:
        if point not in CRASH_POINTS:
            raise ValueError(f"unknown crash point {point!r}: one of {', '.join(CRASH_POINTS)}")
        self.point = point
        self.fired = threading.Event()
        self._inner = inner

    def _crash(self, point: str) -> None:
        if point == self.point and not self.fired.is_set():
            self.fired.set()
            raise AgentStopped(f"crashed at {point}")

    def get_next_broker_id(self, *args: Any, **kwargs: Any) -> Any:
        answer = self._inner.get_next_broker_id(*args, **kwargs)
        self._crash("before_temp_file")
        return answer

    def apply_broker_id(self, *args: Any, **kwargs: Any) -> Any:
        self._crash("after_temp_file")
        try:
            answer = self._inner.apply_broker_id(*args, **kwargs)
        except ControllerError as exc:
            if exc.code == Code.CONTROLLER_BROKER_ID_INVALID:
                self._crash("after_apply_refused")
            raise
        self._crash("after_apply_accepted")
        return answer

    def register_broker(self, *args: Any, **kwargs: Any) -> Any:
        self._crash("before_register")
        return self._inner.register_broker(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._inner, attr)
