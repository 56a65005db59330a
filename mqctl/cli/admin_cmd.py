"""Admin commands: mqadmin's controller commands with their option letters, plus long names.

getSyncStateSet, getBrokerEpoch, getControllerMetaData, electMaster, cleanBrokerMetadata,
getControllerConfig, updateControllerConfig (kebab-case aliases: get-sync-state-set, ...) and
``quorum status|add|remove|transfer``. Data collection lives in mqctl.admin, rendering in
mqctl.cli.render; grpc is imported only when a command runs. Exit codes: docs/codes.md.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer

from mqctl.cli import common, render, root_app, sub_app
from mqctl.cli.common import (
    broker_name_option,
    cluster_option,
    console,
    dry_run_option,
    echo_doc,
    env_option,
    namesrv_option,
    output_option,
    printing,
    store_option,
)
from mqctl.cli.render import AdminOutput, Output
from mqctl.errors import (
    Code,
    ControllerError,
    DegradedError,
    MqctlError,
    NotFoundError,
    RefusedError,
    UnhealthyError,
    UnreachableError,
    UsageError,
)

if TYPE_CHECKING:
    from mqctl.client import ControllerClient, ReplicasInfo
    from mqctl.store.epochfile import EpochCacheView

DEFAULT_CONTROLLER = "127.0.0.1:9878"
F = TypeVar("F", bound=Callable[..., Any])

quorum_app = sub_app("quorum", "The controller group: status, membership and leadership.")


# --- shared options ----------------------------------------------------------------------------


def _addr_opt(default: str | None = DEFAULT_CONTROLLER, without: str = "no controller is asked") -> Any:
    return typer.Option(
        default,
        "-a",
        "--controller-addr",
        "--controllerAddress",
        envvar="MQCTL_CONTROLLER",
        help="controller gRPC addresses, 'h:p;h:p' or 'h:p,h:p' (any node: followers "
        "forward to the leader)" + ("" if default else f"; none: {without}"),
    )


def _namesrv_opt(used: bool = False) -> Any:
    why = (
        "with -c, asked for the cluster's broker sets (GET_BROKER_CLUSTER_INFO)"
        if used
        else "accepted as mqadmin accepts it; this command does not need it"
    )
    return namesrv_option(f"RocketMQ name servers, 'h:p;h:p' (mqadmin's -n): {why}")


def _watch_opt() -> Any:
    return typer.Option(
        None,
        "-i",
        "--watch",
        "--interval",
        metavar="SECONDS",
        help="redraw every SECONDS until Ctrl-C (mqadmin's interval)",
    )


def _protocol_opt() -> Any:
    return typer.Option(
        "auto",
        "--protocol",
        envvar="MQCTL_PROTOCOL",
        metavar="auto|grpc|remoting",
        help="how to talk to -a: mqctl's gRPC, RocketMQ remoting (a RocketMQ controller, or "
        "mqctl serve --remoting-port), or auto (gRPC, then remoting)",
    )


class Conn:
    """How to reach the controllers named by -a: gRPC (mqctl) or RocketMQ remoting."""

    def __init__(
        self,
        addr: str,
        token: str | None,
        tls_ca: str | None,
        tls_cert: str | None,
        tls_key: str | None,
        timeout: float,
        protocol: str = "auto",
        access_key: str | None = None,
        secret_key: str | None = None,
        tls_server_name: str | None = None,
    ) -> None:
        from mqctl.api import parse_addresses  # lazy: start-up

        self.addresses = parse_addresses(addr) if addr else []  # none: a command that may go without
        self.token = token
        self.tls_ca, self.tls_cert, self.tls_key = tls_ca, tls_cert, tls_key
        self.tls_server_name = tls_server_name or None
        if bool(access_key) != bool(secret_key):
            raise UsageError("--access-key and --secret-key go together (MQCTL_ACCESS_KEY, MQCTL_SECRET_KEY)")
        self.access_key, self.secret_key = access_key or None, secret_key or None
        self.timeout = timeout
        if timeout <= 0:
            raise UsageError(f"--timeout must be positive, got {timeout}")
        if protocol not in PROTOCOLS:
            raise UsageError(f"--protocol must be one of {', '.join(PROTOCOLS)}, not {protocol!r}")
        self.requested_protocol = protocol  # what --protocol said (for broker calls)
        self.protocol = protocol  # auto becomes grpc or remoting at the first client()
        # --timeout is the whole command's deadline: every client made here stops there (a watch
        # gives each redraw a new one: renew)
        self.deadline = time.monotonic() + timeout
        self._clients: list[Any] = []
        global _current
        _current = self

    def security(self) -> dict[str, Any]:
        """--token and --tls-* as ControllerClient's keywords, for the clients a command makes on
        its own (mqctl sim's brokers): the same options reach the controller the same way."""
        return {
            "token": self.token,
            "tls_ca": self.tls_ca,
            "tls_cert": self.tls_cert,
            "tls_key": self.tls_key,
            "server_name": self.tls_server_name,
        }

    def renew(self) -> None:
        """A new deadline, --timeout from now, for this connection's clients (each redraw of -i)."""
        self.deadline = time.monotonic() + self.timeout
        for c in self._clients:
            c.deadline = self.deadline

    def _bound(self, client: Any) -> Any:
        client.deadline = self.deadline
        self._clients.append(client)
        return client

    def client(self, addresses: list[str] | None = None, timeout: float | None = None) -> ControllerClient:
        return cast("ControllerClient", self._bound(self._client(addresses, timeout)))

    def _client(self, addresses: list[str] | None = None, timeout: float | None = None) -> ControllerClient:
        targets = addresses or self.addresses
        seconds = timeout if timeout is not None else self.timeout
        if self.protocol == "auto":
            started = time.monotonic()
            probe = self._grpc(targets, min(seconds, 3.0))
            try:
                answered = _answers_grpc(probe, targets)
            except BaseException:
                probe.close()
                raise
            self.protocol = "grpc" if answered else "remoting"
            if answered:  # gRPC answered: keep the probe's open channel, with the whole --timeout
                probe.timeout = seconds
                return probe
            probe.close()
            # gRPC did not answer: remoting gets what is left, so that a controller that does not
            # answer at all costs --timeout seconds, not the probe's plus --timeout
            seconds = max(0.001, seconds - (time.monotonic() - started))
        if self.protocol == "remoting":
            # same methods and result types as ControllerClient (mqctl/remoting/client.py)
            return cast("ControllerClient", self.remoting(targets, seconds))
        return self._grpc(targets, seconds)

    def remoting(self, targets: list[str], seconds: float, *, brokers: bool = False) -> Any:
        """A RemotingControllerClient with this connection's token, TLS and ACL options (``brokers``:
        for RocketMQ brokers, whose certificates do not carry --tls-server-name)."""
        from mqctl.remoting.client import RemotingControllerClient  # lazy: start-up

        security = self.security()
        if brokers:
            security["server_name"] = None
        return RemotingControllerClient(
            targets, timeout=seconds, access_key=self.access_key, secret_key=self.secret_key, **security
        )

    def _grpc(self, targets: list[str], seconds: float) -> ControllerClient:
        from mqctl.client import ControllerClient  # lazy: grpc, protobuf

        return ControllerClient(targets, timeout=seconds, **self.security())


PROTOCOLS = ("auto", "grpc", "remoting")
_current: Conn | None = None  # the running command's connection (its deadline is renewed per redraw)


def _answers_grpc(probe: ControllerClient, addresses: list[str]) -> bool:
    """auto: gRPC when any address answers GetMetadata over gRPC, else RocketMQ remoting."""
    for address in addresses:
        try:
            probe.get_metadata(address)
            return True
        except UsageError:  # a Raft port, said at once (mqctl.address.is_raft_port)
            raise
        except MqctlError:
            continue
    return False


_CONNECTION_OPTIONS: dict[str, tuple[type, Callable[[], Any]]] = {
    "addr": (str, _addr_opt),
    "token": (
        str,
        functools.partial(env_option, "--token", "bearer token for admin calls (the controller's --token)"),
    ),
    "tls_ca": (
        str,
        functools.partial(
            env_option,
            "--tls-ca",
            "CA of the controller certificate "
            "(PEM); enables TLS (gRPC, and RocketMQ remoting as with tls.enable=true)",
        ),
    ),
    "tls_cert": (str, functools.partial(env_option, "--tls-cert", "client certificate (PEM) for mTLS")),
    "tls_key": (str, functools.partial(env_option, "--tls-key", "client private key (PEM) for mTLS")),
    "protocol": (str, _protocol_opt),
    "tls_server_name": (
        str,
        functools.partial(
            env_option,
            "--tls-server-name",
            "the name the controller's certificate must carry (default: the host of -a), "
            "for certificates without the address dialled",
            metavar="NAME",
        ),
    ),
    "access_key": (
        str,
        functools.partial(
            env_option,
            "--access-key",
            "RocketMQ ACL AccessKey: sign remoting requests as RocketMQ's AclClientRPCHook "
            "(with --secret-key; not used over gRPC)",
        ),
    ),
    "secret_key": (
        str,
        functools.partial(
            env_option,
            "--secret-key",
            "RocketMQ ACL SecretKey of --access-key (prefer the environment variable)",
        ),
    ),
}


def connected(
    *,
    protocol: bool = True,
    timeout: float = 10.0,
    broker_acl: bool = False,
    address: str | None = DEFAULT_CONTROLLER,
    without_address: str = "no controller is asked",
    timeout_help: str = "the whole command's deadline in seconds, retries included",
) -> Callable[[F], F]:
    """The controller connection options, declared once here for every command that connects: the
    command takes one ``conn: Conn`` parameter and gets -a, --token, --tls-*, --protocol,
    --access-key/--secret-key and --timeout, as patronictl passes one context to each command.
    ``protocol`` False: an mqctl extension (gRPC only), whose --protocol accepts auto and grpc; the
    ACL keys then sign only what it asks brokers over remoting (``broker_acl``, for the docs). Typer
    sees the options in the command's signature (``__signature__``)."""

    def deco(fn: F) -> F:
        # every command takes every connection option (issue 33: one convention); a gRPC-only one
        # (an mqctl extension, no RocketMQ request code) refuses --protocol remoting in one line
        options = {name: (kind, factory()) for name, (kind, factory) in _CONNECTION_OPTIONS.items()}
        if address != DEFAULT_CONTROLLER:
            options["addr"] = (str, _addr_opt(address, without_address))
        options["timeout"] = (
            float,
            typer.Option(timeout, "--timeout", envvar="MQCTL_TIMEOUT", help=timeout_help),
        )
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.name != "conn"]
        added = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
            for name, (kind, option) in options.items()
        ]

        @functools.wraps(fn)
        def command(**kwargs: Any) -> Any:
            given: dict[str, Any] = {name: kwargs.pop(name) for name in options}
            if not protocol:
                if given["protocol"] == "remoting":
                    raise UsageError(
                        "this command is an mqctl extension that RocketMQ's remoting protocol "
                        "does not carry: it speaks gRPC only (--protocol auto or grpc)"
                    )
                if given["protocol"] not in PROTOCOLS:
                    raise UsageError(
                        f"--protocol must be one of {', '.join(PROTOCOLS)}, not {given['protocol']!r}"
                    )
                given["protocol"] = "grpc"
            return fn(conn=Conn(**given), **kwargs)

        command.__signature__ = sig.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + added
        )
        command.__annotations__ = {
            **{k: v for k, v in fn.__annotations__.items() if k != "conn"},
            **{name: kind for name, (kind, _) in options.items()},
        }
        return cast(F, command)

    return deco


def _format(output: Output | AdminOutput) -> tuple[Output, bool]:
    """-o as an Output for mqctl.cli.render, and whether it was -o mqadmin (then Output.table)."""
    if output.value == AdminOutput.mqadmin.value:
        return Output.table, True
    return Output(output.value), False


def _run(
    fetch: Callable[[], dict[str, Any]],
    output: Output | AdminOutput,
    table: Callable[[dict[str, Any]], Any],
    watch: float | None,
    title: str,
    verdict: Callable[[dict[str, Any]], None] | None = None,
    text: Callable[[dict[str, Any]], str] | None = None,
) -> None:
    """Fetch and print the document (again every ``watch`` seconds); ``verdict`` raises the error
    the command ends with after printing. ``text``: the document as mqadmin prints it (-o mqadmin)."""

    output, mqadmin = _format(output)
    if mqadmin and text is not None:
        _run_mqadmin(fetch, text, watch, verdict)
        return
    if watch is not None:

        def redraw() -> dict[str, Any]:
            if _current is not None:
                _current.renew()
            return fetch()

        render.watch(redraw, output, table, watch, title=title)
        return
    doc = fetch()
    problem: MqctlError | None = None
    if verdict is not None:
        try:
            verdict(doc)
        except MqctlError as exc:
            problem = exc
    render.emit(doc, output, table, error=problem)
    if problem is not None:
        raise problem


def _run_mqadmin(
    fetch: Callable[[], dict[str, Any]],
    text: Callable[[dict[str, Any]], str],
    watch: float | None,
    verdict: Callable[[dict[str, Any]], None] | None,
) -> None:
    """-o mqadmin: mqadmin's text on stdout. With -i, again every SECONDS as mqadmin's -i does (an
    error is its one line on stderr and the loop goes on) until Ctrl-C (exit 0)."""
    if watch is not None and watch <= 0:
        raise UsageError(f"-i/--watch needs a positive number of seconds, got {watch}")
    try:
        while True:
            try:
                if _current is not None:
                    _current.renew()
                doc = fetch()
                sys.stdout.write(text(doc))
                sys.stdout.flush()
                if verdict is not None:
                    verdict(doc)
            except MqctlError as exc:
                if watch is None:
                    raise
                print(f"mqctl: error: {exc}", file=sys.stderr)
            if watch is None:
                return
            time.sleep(watch)
    except KeyboardInterrupt:
        if watch is None:
            raise


def _emit(
    doc: dict[str, Any],
    output: Output | AdminOutput,
    table: Callable[[dict[str, Any]], Any],
    text: str,
) -> None:
    """render.emit, or with -o mqadmin ``text``: what mqadmin prints for the same answer."""

    fmt, mqadmin = _format(output)
    if mqadmin:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    render.emit(doc, fmt, table)


def _names(text: str | None) -> list[str]:
    return [n.strip() for n in (text or "").replace(";", ",").split(",") if n.strip()]


def _broker_sets(
    client: ControllerClient, broker_name: str | None, cluster: str | None
) -> dict[str, ReplicasInfo]:
    from mqctl.admin.syncstate import select_broker_sets  # lazy: start-up

    names = _names(broker_name)
    table = client.get_sync_state_data(names).replicas_info_table
    selected, missing = select_broker_sets(table, names, cluster)
    if missing:
        what = "broker set" if names else "cluster"
        known = sorted(table) if names else sorted({i.cluster_name for i in table.values()})
        raise NotFoundError(
            f"{what} {', '.join(missing)} not found on the controller"
            + (f" (known: {', '.join(known)})" if known else "")
        )
    return selected


def _one_of(broker_name: str | None, cluster: str | None) -> None:
    if broker_name and cluster:
        raise UsageError("give -b/--broker-name or -c/--cluster-name, not both")


def _command(
    name: str, alias: str, target: Any = None, **kw: Any
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a command under its mqadmin name and a hidden kebab-case alias."""
    where = target or root_app

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        where.command(name, **kw)(fn)
        where.command(alias, hidden=True, **kw)(fn)
        return fn

    return deco


# --- getSyncStateSet ---------------------------------------------------------------------------


@_command("getSyncStateSet", "get-sync-state-set")
@connected()
@printing()
def get_sync_state_set(
    conn: Conn,
    broker_name: str = broker_name_option("broker set name(s), comma separated"),
    cluster: str = cluster_option(
        "every broker set of this cluster (with -n: the broker sets the name server lists for it, as mqadmin)"
    ),
    namesrv: str = _namesrv_opt(used=True),
    watch: float = _watch_opt(),
    output: AdminOutput = output_option(mqadmin=True),
) -> None:
    """Master, epochs and SyncStateSet of broker sets, with each replica's heartbeat age, offsets and lag.

    Without -b or -c: every broker set. Alias: get-sync-state-set."""
    # lazy: start-up
    from mqctl.admin.mqadmin_text import sync_state_text
    from mqctl.admin.syncstate import sync_state_doc

    _one_of(broker_name, cluster)
    with conn.client() as client:

        def fetch() -> dict[str, Any]:
            if cluster and namesrv:
                return sync_state_doc(_cluster_sets_from_namesrv(client, conn, namesrv, cluster))
            return sync_state_doc(_broker_sets(client, broker_name, cluster))

        _run(fetch, output, render.sync_state_table, watch, "getSyncStateSet", text=sync_state_text)


def _cluster_info(conn: Conn, namesrv: str) -> Any:
    """The ClusterInfo of the -n name servers (mqctl.remoting.namesrv), over remoting with the
    connection's TLS and ACL options, as mqadmin's client reaches its name servers."""
    # lazy: start-up
    from mqctl.api import parse_addresses
    from mqctl.remoting.namesrv import cluster_info

    seconds = min(conn.timeout, 5.0)
    with conn.remoting(parse_addresses(namesrv), seconds) as client:
        return cluster_info(namesrv, seconds, connect=client.connection)


def _cluster_sets_from_namesrv(
    client: ControllerClient, conn: Conn, namesrv: str, cluster: str
) -> dict[str, ReplicasInfo]:
    """-c CLUSTER with -n, as mqadmin: the cluster's broker set names from the name server, asked of
    the controller; a set the controller does not know is left out (mqadmin prints nothing for it)."""
    names = _cluster_info(conn, namesrv).broker_names(cluster)
    table = client.get_sync_state_data(names).replicas_info_table
    return {name: table[name] for name in sorted(names) if name in table}


# --- getBrokerEpoch ----------------------------------------------------------------------------


@_command("getBrokerEpoch", "get-broker-epoch")
@connected()
@printing()
def get_broker_epoch(
    conn: Conn,
    broker_name: str = broker_name_option("broker set name(s): ask each replica"),
    cluster: str = cluster_option("every broker set of this cluster"),
    namesrv: str = namesrv_option(
        "RocketMQ name servers, 'h:p;h:p' (mqadmin's -n): the brokers to ask "
        "are the ones they list (GET_BROKER_CLUSTER_INFO), not the "
        "controller's"
    ),
    store: str = store_option(
        "read DIR/epochFileCheckpoint offline (.bak fallback, CRC checked) and the commitlog's max offset"
    ),
    broker_addr: str = typer.Option(
        None,
        "--broker-addr",
        help="ask these broker services directly (h:p, comma separated), without the controller",
    ),
    watch: float = _watch_opt(),
    output: AdminOutput = output_option(mqadmin=True),
) -> None:
    """Epoch entries (epoch, startOffset, endOffset) and maxOffset of brokers (GetBrokerEpochCache).

    Live: the controller names each replica's address (with -n: the name server, as mqadmin), where
    the broker serves mqctl.v1.Broker or RocketMQ's request 1007. Offline: --store DIR.
    Alias: get-broker-epoch."""
    # lazy: start-up
    from mqctl.admin.broker_epochs import broker_epoch_doc, cache_from_store
    from mqctl.admin.mqadmin_text import broker_epoch_text

    modes = sum(1 for x in (store, broker_addr, broker_name or cluster) if x)
    if modes > 1:
        raise UsageError("give one of --store, --broker-addr, or -b/-c")
    _one_of(broker_name, cluster)

    def ask(targets: list[tuple[str, str, str, int | None]]) -> list[EpochCacheView]:
        from concurrent.futures import ThreadPoolExecutor  # lazy: start-up

        def one(t: tuple[str, str, str, int | None]) -> EpochCacheView:
            cluster_name, name, address, bid = t
            c = _epoch_cache(address, conn)
            c.cluster_name = c.cluster_name or cluster_name
            c.broker_name = c.broker_name or name
            if c.broker_id is None:
                c.broker_id = bid
            return c

        with ThreadPoolExecutor(max_workers=8) as pool:
            return list(pool.map(one, targets))

    def verdict(doc: dict[str, Any]) -> None:
        bad = [b["error"] for b in doc["brokers"] if b.get("error")]
        if bad:
            raise UnreachableError("broker service not answering: " + "; ".join(bad))

    def from_store() -> dict[str, Any]:
        return broker_epoch_doc([cache_from_store(store)])

    def from_addresses() -> dict[str, Any]:
        from mqctl.api import parse_addresses  # lazy: start-up

        return broker_epoch_doc(ask([("", "", a, None) for a in parse_addresses(broker_addr)]))

    def from_namesrv() -> dict[str, Any]:
        info = _cluster_info(conn, namesrv)
        names = _names(broker_name) or (info.broker_names(cluster) if cluster else sorted(info.broker_addrs))
        targets: list[tuple[str, str, str, int | None]] = [
            (info.cluster_of.get(name, ""), name, address, bid)
            for name in sorted(names)
            for bid, address in info.replicas(name)
        ]
        if not targets:
            raise NotFoundError(
                f"the name server {info.answered_by} lists no broker of "
                f"{'broker set' if broker_name else 'cluster'} "
                f"{broker_name or cluster or '(any)'}"
            )
        return broker_epoch_doc(ask(targets))

    def from_controller() -> dict[str, Any]:
        targets = []
        for name, info in sorted(_broker_sets(client, broker_name, cluster).items()):
            for r in (*info.in_sync_replicas, *info.not_in_sync_replicas):
                targets.append((info.cluster_name, name, r.broker_address, r.broker_id))
        return broker_epoch_doc(ask(sorted(targets, key=lambda t: (t[1], t[3] or 0))))

    # where the epochs come from: --store (offline, never unreachable), --broker-addr, -n, the controller
    fetch = (
        from_store
        if store
        else from_addresses
        if broker_addr
        else from_namesrv
        if namesrv
        else from_controller
    )
    with contextlib.ExitStack() as stack:
        if fetch is from_controller:
            client = stack.enter_context(conn.client())
        _run(
            fetch,
            output,
            render.broker_epoch_table,
            watch,
            "getBrokerEpoch",
            None if store else verdict,
            broker_epoch_text,
        )


def _epoch_cache(address: str, conn: Conn) -> EpochCacheView:
    """GetBrokerEpochCache from mqctl's Broker service (gRPC) or a RocketMQ broker (request 1007),
    with the connection's --protocol and TLS options and at most 5 s.

    ``auto``: gRPC first; when it does not answer (fetch_epoch_cache reports that in ``.error``, it
    does not raise), request 1007 over remoting."""
    from mqctl.admin.broker_epochs import fetch_epoch_cache  # lazy: start-up

    protocol, timeout = conn.requested_protocol, min(conn.timeout, 5.0)
    tls_ca, tls_cert, tls_key = conn.tls_ca, conn.tls_cert, conn.tls_key
    grpc_error = ""
    if protocol in ("auto", "grpc"):
        try:
            cache = fetch_epoch_cache(
                address, timeout=timeout, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key
            )
        except MqctlError:
            if protocol == "grpc":
                raise
        else:
            if protocol == "grpc" or cache.error is None:
                return cache
            grpc_error = cache.error
    with conn.remoting([address], timeout, brokers=True) as client:
        answer: EpochCacheView = client.get_broker_epoch_cache(address, timeout=timeout)
    if grpc_error and answer.error is not None:
        answer.error = f"{grpc_error} (over remoting: {answer.error})"
    return answer


# --- getControllerMetaData ---------------------------------------------------------------------


@_command("getControllerMetaData", "get-controller-metadata")
@connected()
@printing()
def get_controller_metadata(
    conn: Conn,
    namesrv: str = _namesrv_opt(),
    watch: float = _watch_opt(),
    output: AdminOutput = output_option(mqadmin=True),
) -> None:
    """Controller group, leader id and address, term, commit index and peers (the leader's view).

    Exits 6 when the group has no leader. Alias: get-controller-metadata."""
    # lazy: start-up
    from mqctl.admin.mqadmin_text import metadata_text
    from mqctl.admin.quorum import metadata_doc

    with conn.client() as client:

        def verdict(doc: dict[str, Any]) -> None:
            if not doc.get("controllerLeaderAddress"):
                raise UnreachableError(f"the controller group has no leader (asked {doc['answeredBy']})")

        def fetch() -> dict[str, Any]:
            meta = client.get_metadata()
            doc = metadata_doc(meta)
            if _format(output)[1] and conn.protocol == "remoting":
                # -o mqadmin: the peers exactly as the answering node wrote them in its 1005 header
                # (its remoting addresses; JRaft's bare addresses), which the document does not keep
                from mqctl.remoting import headers  # lazy: start-up

                answer = (
                    cast(Any, client)
                    .connection(meta.address)
                    .invoke(headers.GET_METADATA_INFO, {}, b"", timeout=min(conn.timeout, 5.0))
                )
                doc["peersText"] = (answer.ext_fields or {}).get("peers") or ""
            return doc

        _run(
            fetch,
            output,
            render.metadata_table,
            watch,
            "getControllerMetaData",
            verdict,
            metadata_text,
        )


# --- quorum ------------------------------------------------------------------------------------


@quorum_app.command("status")
@connected(
    timeout=2.0,
    timeout_help="the whole command's deadline in seconds (every node is asked at "
    "once; with --watch, each redraw's)",
)
@printing()
def quorum_status(
    conn: Conn,
    watch: float = _watch_opt(),
    output: Output = output_option(),
) -> None:
    """Every controller node: state, term, commit and applied index, lag, state hash; the leader's
    replication view (match index and lag per peer).

    Asks the -a addresses and every peer they publish. Exits 6 without a reachable leader, 10 when
    degraded (a node down or reporting a problem while the leader has a quorum) and 7 when
    unhealthy (no quorum, nodes that disagree on the leader, state hashes that differ at the same
    index)."""
    from mqctl.admin.quorum import collect, quorum_doc  # lazy: start-up
    from mqctl.client import Metadata  # lazy: grpc, protobuf

    clients: dict[str, ControllerClient] = {}
    deadline = [0.0]

    def fetch_one(address: str) -> Metadata:
        if address not in clients:
            clients[address] = conn.client([address])
        client = clients[address]
        client.timeout = max(0.05, deadline[0] - time.monotonic())  # what is left of --timeout
        return client.get_metadata(address)

    def fetch() -> dict[str, Any]:
        deadline[0] = time.monotonic() + conn.timeout
        return quorum_doc(collect(conn.addresses, fetch_one))

    def verdict(doc: dict[str, Any]) -> None:
        # the problems are in the table (problem: lines) and in the document: named once, not again
        count = len(doc["problems"])
        found = f"{count} problem{'s' if count != 1 else ''} found"
        if doc["leaderId"] is None:
            raise UnreachableError(f"no controller leader reachable ({found})")
        if doc["status"] == "degraded":
            up = sum(1 for n in doc["nodes"] if n["state"] != "unreachable")
            raise DegradedError(
                f"DEGRADED: the leader has a quorum ({up} of {len(doc['nodes'])} nodes answer); {found}"
            )
        if not doc["healthy"]:
            raise UnhealthyError(f"UNHEALTHY: {found}")

    try:
        _run(fetch, output, render.quorum_table, watch, "quorum status", verdict)
    finally:
        for c in clients.values():
            c.close()


def _quorum_change(
    action: str, raft_address: str | None, conn: Conn, output: Output, feature_level: int = 0
) -> None:

    with conn.client() as client:
        result = client.change_quorum(action, raft_address or "", feature_level)
        doc = {
            "version": 1,
            "action": action,
            "raftAddress": raft_address or None,
            "leaderId": result.leader_id or None,
            "members": list(result.members),
            "featureLevel": result.feature_level or None,
            "message": result.remark or f"{action}: done",
        }
        render.emit(doc, output, render.message_table)


def _quorum_command(action: str, argument: Any, doc: str) -> None:
    """`mqctl quorum ACTION [RAFT_ADDRESS]`: one change of the group's membership or leadership, asked of
    the leader (add, remove and transfer differ only in their argument and their help)."""

    def command(
        conn: Conn,
        raft_address: str = argument,
        output: Output = output_option(),
    ) -> None:
        _quorum_change(action, raft_address, conn, output)

    command.__name__ = command.__qualname__ = f"quorum_{action}"
    command.__doc__ = doc
    quorum_app.command(action)(connected(protocol=False)(printing()(command)))


_quorum_command(
    "add",
    typer.Argument(..., metavar="RAFT_ADDRESS", help="the new node's Raft HOST:PORT"),
    """Add a controller node to the group, one at a time. Start the new node first, with --peers
    naming the current members (a group of two cannot commit the change without it); it catches up
    from the leader. Refused while the group, counting the new node as not yet live, would have no
    quorum of live members (with one of three down: remove that one first).""",
)
_quorum_command(
    "remove",
    typer.Argument(..., metavar="RAFT_ADDRESS", help="the Raft HOST:PORT to remove"),
    """Remove a controller node from the group (not the leader: transfer leadership first). Refused
    when the members left would have no quorum of live members (the reply names the node to bring
    back).""",
)
_quorum_command(
    "transfer",
    typer.Argument(
        None, metavar="[RAFT_ADDRESS]", help="the node to lead (default: the most caught-up follower)"
    ),
    """Hand the Raft leadership to another node (it must be caught up) and wait until it leads.""",
)


@quorum_app.command("feature-level")
@connected(protocol=False)
@printing()
def quorum_feature_level(
    conn: Conn,
    level: int = typer.Argument(..., metavar="LEVEL", help="the feature level to raise the group to"),
    output: Output = output_option(),
) -> None:
    """Raise the group's feature level (the records every member can read) once every node runs a
    release that speaks it (`quorum status` shows each node's). It is never lowered: a node of an
    older release cannot rejoin afterwards."""
    _quorum_change("feature-level", None, conn, output, feature_level=level)


@quorum_app.command("dump")
@printing()
def quorum_dump(
    data_dir: str = typer.Argument(..., metavar="DATA_DIR", help="a controller node's --data-dir"),
    force: bool = typer.Option(False, "--force", help="Read it even while a node runs on it (LOCK held)."),
    output: Output = output_option(),
) -> None:
    """A stopped node's Raft journal (each entry's index, term, records) and snapshot, read only."""
    from mqctl.admin.quorum_dump import dump_data_dir  # lazy: pysyncobj, the raft fork

    doc = dump_data_dir(data_dir, force=force)
    if output is not Output.table:
        echo_doc(output, doc)
        return
    _print_quorum_dump(doc, console())


def _print_quorum_dump(doc: dict[str, Any], con: Any) -> None:
    import json  # lazy: start-up

    from rich.table import Table  # lazy: rich

    def compact(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), sort_keys=True)

    node, meta, j = doc["node"] or {}, doc.get("meta") or {}, doc["journal"]
    con.print(
        f"{doc['dataDir']}: group {node.get('groupId', '-')}, Raft address "
        f"{node.get('raftAddress', '-')}, term {meta.get('term', '-')}, voted for "
        f"{meta.get('votedFor') or '-'}"
        + (" (a node runs on it: read with --force)" if doc["running"] else ""),
        markup=False,
        soft_wrap=True,
    )
    t = Table(title=f"journal {j['file'] or '(none)'}: {len(j['entries'])} entries")
    for col in ("index", "term", "entry", "record", "v", "fields"):
        t.add_column(col, justify="right" if col in ("index", "term", "v") else "left", overflow="fold")
    for e in j["entries"]:
        what = e["kind"]
        if "error" in e:
            t.add_row(str(e["index"]), str(e["term"]), what, "-", "-", f"[red]{e['error']}[/]")
        elif what == "write":
            for i, r in enumerate(e["records"]):
                fields = {k: v for k, v in r.items() if k not in ("type", "v")}
                t.add_row(
                    str(e["index"]) if i == 0 else "",
                    str(e["term"]) if i == 0 else "",
                    what if i == 0 else "",
                    r.get("type", "?"),
                    str(r.get("v", "")),
                    compact(fields),
                )
        else:
            extra = {k: v for k, v in e.items() if k not in ("index", "term", "kind")}
            t.add_row(str(e["index"]), str(e["term"]), what, "-", "-", compact(extra) if extra else "")
    con.print(t)
    if j["tail"]:
        con.print(f"journal tail: {j['tail']}", markup=False, soft_wrap=True)
    snap = doc["snapshot"]
    if snap is None:
        con.print("no snapshot")
        return
    state = snap["state"]
    st = Table(
        title=f"snapshot {snap['file']}: up to index {snap['lastIndex']} (term {snap['lastTerm']}), "
        f"cluster {', '.join(snap['cluster'] or [])}"
    )
    for col in ("broker set", "master", "masterEpoch", "syncStateSet", "syncStateSetEpoch", "brokers"):
        st.add_column(col, overflow="fold")
    for name, bs in sorted(state.get("broker_sets", {}).items()):
        master = bs["master_broker_id"]
        st.add_row(
            f"{bs['cluster_name']}/{name}",
            "-" if master is None else str(master),
            str(bs["master_epoch"]),
            ",".join(map(str, bs["sync_state_set"])),
            str(bs["sync_state_set_epoch"]),
            " ".join(f"{i}={b['address']}" for i, b in bs["brokers"].items()),
        )
    con.print(st)
    con.print(
        f"brokerEpoch {state.get('broker_epoch')}, feature level {state.get('feature_level', 1)}, "
        f"config {compact(state.get('config', {}))}",
        markup=False,
        soft_wrap=True,
    )


# --- electMaster -------------------------------------------------------------------------------


@_command("electMaster", "elect-master")
@connected()
@printing()
def elect_master(
    conn: Conn,
    cluster: str = cluster_option("cluster of the broker set", default=...),
    broker_name: str = broker_name_option("broker set name", default=..., short="-bn"),
    broker_id: int = typer.Option(
        None,
        "-b",
        "--broker-id",
        "--brokerId",
        help="the broker to elect "
        "(default: the controller chooses, as when a master dies); the master "
        "itself: nothing to do, exit 0",
    ),
    dry_run: bool = dry_run_option("show the candidates and the answer the call would get; change nothing"),
    accept_data_loss: bool = typer.Option(
        False, "--accept-data-loss", help="allow electing a broker outside the SyncStateSet"
    ),
    broker_epochs: bool = typer.Option(
        False,
        "--broker-epochs",
        help="ask each replica's broker service for its epoch cache: exact truncation points",
    ),
    namesrv: str = _namesrv_opt(),
    output: AdminOutput = output_option(mqadmin=True),
) -> None:
    """Elect a master: first shows every candidate (alive, in SyncStateSet, epoch, maxOffset,
    confirmOffset) and the bytes each other replica would truncate under the result.

    -b naming the broker that is already the master (and alive) changes nothing and exits 0, saying
    so on stderr with the controller's answer (2011). Alias: elect-master."""
    # lazy: start-up
    from mqctl.admin.elect import controller_answer, elect_plan
    from mqctl.admin.mqadmin_text import elect_text

    fmt, mqadmin = _format(output)
    if mqadmin and dry_run:
        raise UsageError("--dry-run has no mqadmin text (mqadmin has no dry run): use -o table, json or yaml")

    def show(doc: dict[str, Any], error: BaseException | None = None) -> None:
        if mqadmin:  # mqadmin prints its lines after a successful election only
            if doc["result"] is not None and not doc["result"].get("alreadyMaster"):
                sys.stdout.write(elect_text(cluster, broker_name, doc["result"]))
                sys.stdout.flush()
            return
        render.emit(doc, fmt, render.elect_table, error=error)

    with conn.client() as client:
        info = _broker_sets(client, broker_name, None)[broker_name]
        if cluster and info.cluster_name and cluster != info.cluster_name:
            raise NotFoundError(
                f"broker set {broker_name} belongs to cluster {info.cluster_name}, not {cluster}"
            )
        ids = {r.broker_id for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}
        if broker_id is not None and broker_id not in ids:
            raise NotFoundError(
                f"broker id {broker_id} is not registered in broker set {broker_name} "
                f"(ids: {', '.join(map(str, sorted(ids))) or 'none'})"
            )
        config = client.get_config().config
        unclean = config.get("enableElectUncleanMaster", "false").lower() == "true"
        try:
            wait_for = int(config.get("waitFor", "1"))
        except ValueError:
            wait_for = 1
        caches = None
        if broker_epochs:
            reps = (*info.in_sync_replicas, *info.not_in_sync_replicas)
            caches = {r.broker_id: _epoch_cache(r.broker_address, conn) for r in reps}
        answer = controller_answer(broker_name, info, broker_id, unclean, wait_for)
        plan = elect_plan(cluster, broker_name, info, broker_id, unclean, caches, wait_for, answer)
        already = _already_master(answer.code, broker_id, info.master_broker_id)
        expected: MqctlError | None = None
        if plan["dataLoss"] and not accept_data_loss:
            target = broker_id if broker_id is not None else plan["predictedMasterId"]
            expected = UsageError(
                f"broker {target} is outside the SyncStateSet of {broker_name}: electing "
                "it loses the data only the SyncStateSet has; pass --accept-data-loss to "
                "do it anyway"
            )
        elif answer.code != 0 and not already:
            expected = _elect_hint(ControllerError(answer.code, answer.remark), plan, unclean)
        doc: dict[str, Any] = {
            "version": 1,
            "plan": plan,
            "dryRun": dry_run,
            "expectedError": None if expected is None else common.error_of(expected),
            "alreadyMaster": already,
            "result": None,
        }
        if dry_run:
            show(doc)
            return
        if isinstance(expected, UsageError):
            show(doc, expected)
            raise expected
        try:
            res = client.elect_master(cluster, broker_name, broker_id, designate_elect=broker_id is not None)
        except ControllerError as exc:
            if not _already_master(exc.code, broker_id, _master_of(exc, info.master_broker_id)):
                _elect_hint(exc, plan, unclean)
                show(doc, exc)
                raise
            # -b names the master, alive: nothing to elect. mqadmin reports the controller's 2011 and
            # (RocketMQ's MQAdminStartup) exits 0; so does mqctl, saying so on stderr
            now = exc.response

            def got(name: str, before: Any) -> Any:
                value = getattr(now, name, None)
                return before if value is None or value == "" else value

            doc["alreadyMaster"] = True
            doc["result"] = {
                "masterBrokerId": got("master_broker_id", info.master_broker_id),
                "masterAddress": got("master_address", info.master_address or None),
                "masterEpoch": got("master_epoch", info.master_epoch),
                "syncStateSetEpoch": got("sync_state_set_epoch", info.sync_state_set_epoch),
                "syncStateSet": list(
                    got("sync_state_set", ()) or [r.broker_id for r in info.in_sync_replicas]
                ),
                "alreadyMaster": True,
            }
            show(doc)
            print(
                f"mqctl: broker {broker_id} is already the master of {broker_name}; nothing was changed "
                f"({exc})",
                file=sys.stderr,
            )
            return
        doc["result"] = {
            "masterBrokerId": res.master_broker_id,
            "masterAddress": res.master_address,
            "masterEpoch": res.master_epoch,
            "syncStateSetEpoch": res.sync_state_set_epoch,
            "syncStateSet": list(res.sync_state_set),
        }
        show(doc)


def _already_master(code: int, broker_id: int | None, master_id: int | None) -> bool:
    """electMaster -b naming the master, which is alive: the controller answers 2011."""
    return code == Code.CONTROLLER_MASTER_STILL_EXIST and broker_id is not None and broker_id == master_id


def _master_of(exc: ControllerError, known: int | None) -> int | None:
    """The master a 2011 names (its answer carries the current master), else the one known before."""
    master = getattr(exc.response, "master_broker_id", None)
    return known if master is None else int(master)


def _elect_hint(exc: ControllerError, plan: dict[str, Any], unclean: bool) -> ControllerError:
    """2012 for a designated broker outside the SyncStateSet: say which setting allows it."""
    if exc.code == 2012 and plan["designatedBrokerId"] is not None and not unclean and plan["dataLoss"]:
        exc.args = (
            f"{exc.args[0]} (the controller's enableElectUncleanMaster is false; "
            "updateControllerConfig -k enableElectUncleanMaster -v true allows it)",
        )
    return exc


# --- cleanBrokerMetadata -----------------------------------------------------------------------


@_command("cleanBrokerMetadata", "clean-broker-metadata")
@connected()
@printing()
def clean_broker_metadata(
    conn: Conn,
    broker_name: str = broker_name_option("broker set name", default=..., short="-bn"),
    broker_ids: str = typer.Option(
        None,
        "-b",
        "--broker-controller-ids-to-clean",
        "--brokerControllerIdsToClean",
        metavar="IDS",
        help="broker ids to clean, '1;2;3' (default: the whole broker set)",
    ),
    cluster: str = cluster_option("cluster of the broker set"),
    clean_living: bool = typer.Option(
        False,
        "-l",
        "--clean-living-broker",
        "--cleanLivingBroker",
        help="clean brokers that are still alive too",
    ),
    namesrv: str = _namesrv_opt(),
    output: AdminOutput = output_option(mqadmin=True),
) -> None:
    """Remove broker ids (or a whole broker set) from the controller's metadata.

    Refuses live brokers unless -l, and names them. Alias: clean-broker-metadata."""
    from mqctl.admin.mqadmin_text import clean_text  # lazy: start-up

    ids: list[int] | None = None
    if broker_ids:
        try:
            ids = sorted({int(x) for x in broker_ids.replace(",", ";").split(";") if x.strip()})
        except ValueError:
            raise UsageError(
                f"-b/--broker-controller-ids-to-clean: expected ids like '1;2;3', got {broker_ids!r}"
            ) from None
    with conn.client() as client:
        info = _broker_sets(client, broker_name, None)[broker_name]
        reps = {r.broker_id: r for r in (*info.in_sync_replicas, *info.not_in_sync_replicas)}
        if ids is not None:
            unknown = [i for i in ids if i not in reps]
            if unknown:
                raise NotFoundError(
                    f"broker id(s) {', '.join(map(str, unknown))} not registered in broker "
                    f"set {broker_name} (ids: {', '.join(map(str, sorted(reps))) or 'none'})"
                )
        targets = ids if ids is not None else sorted(reps)
        alive = [reps[i] for i in targets if reps[i].alive]
        if alive and not clean_living:
            names = ", ".join(f"id {r.broker_id} ({r.broker_address})" for r in alive)
            one = len(alive) == 1
            raise RefusedError(
                f"broker set {broker_name}: {names} {'is' if one else 'are'} alive; stop "
                f"{'it' if one else 'them'} first, or pass -l to clean living brokers"
            )
        client.clean_broker_data(
            cluster or info.cluster_name, broker_name, ids if ids is not None else None, clean_living
        )
        whole = ids is None or clean_living
        if ids is not None and clean_living:  # RocketMQ's rule (docs/controller-rules.md, CleanBrokerData)
            print(
                f"mqctl: warning: with -l the controller ignores -b and cleans the whole broker set "
                f"{broker_name} (RocketMQ's rule), ids {', '.join(map(str, sorted(reps)))}",
                file=sys.stderr,
            )
        doc = {
            "version": 1,
            "brokerName": broker_name,
            "clusterName": cluster or info.cluster_name,
            "cleanedBrokerIds": sorted(reps) if whole else targets,
            "wholeBrokerSet": whole,
            "message": f"clear broker {broker_name} metadata from controller success!",
        }
        _emit(doc, output, render.message_table, clean_text(broker_name))


# --- controller config -------------------------------------------------------------------------


@_command("getControllerConfig", "get-controller-config")
@connected()
@printing()
def get_controller_config(
    conn: Conn,
    namesrv: str = _namesrv_opt(),
    output: Output = output_option(),
) -> None:
    """The configuration of each controller named with -a (replicated keys plus the node's own).

    Alias: get-controller-config."""

    controllers = []
    for address in conn.addresses:
        try:
            with conn.client([address]) as client:
                controllers.append(
                    {"address": address, "config": dict(sorted(client.get_config(address).config.items()))}
                )
        except Exception as exc:
            controllers.append({"address": address, "config": {}, "error": str(exc)})
    doc = {"version": 1, "controllers": controllers}

    def verdict(d: dict[str, Any]) -> None:
        bad = [c["error"] for c in d["controllers"] if c.get("error")]
        if bad:
            raise UnreachableError("; ".join(bad))

    _run(lambda: doc, output, render.config_table, None, "getControllerConfig", verdict)


@_command("updateControllerConfig", "update-controller-config")
@connected()
@printing()
def update_controller_config(
    conn: Conn,
    key: str = typer.Option(..., "-k", "--key", help="config key, e.g. enableElectUncleanMaster"),
    value: str = typer.Option(..., "-v", "--value", help="new value"),
    namesrv: str = _namesrv_opt(),
    output: AdminOutput = output_option(mqadmin=True),
) -> None:
    """Change one controller config key; the change is replicated to every node.

    Alias: update-controller-config."""
    from mqctl.admin.mqadmin_text import update_config_text  # lazy: start-up

    with conn.client() as client:
        client.update_config({key: value})
        now = client.get_config().config.get(key, value)
    doc = {
        "version": 1,
        "key": key,
        "value": now,
        "controllers": conn.addresses,
        "message": f"update controller config success!{conn.addresses}\n{key} : {now}",
    }
    _emit(doc, output, render.message_table, update_config_text(conn.addresses, key, value))
