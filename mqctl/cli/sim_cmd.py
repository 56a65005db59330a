"""`mqctl sim` and `mqctl demo`: simulated broker sets against a real controller group (docs/sim.md).

The decisions live in mqctl.sim (Simulation, fault plans, invariants, the demo script); this module
renders: a live rich view of every set on a terminal, plain progress lines otherwise. Both commands
clean up every process and temporary directory they started, on exit, Ctrl-C or SIGTERM. Exit 0 only
if every invariant held; 7 when one did not (docs/codes.md), 130 when interrupted.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from mqctl.cli import root_app
from mqctl.cli.admin_cmd import Conn, connected
from mqctl.cli.common import echo_doc, output_option, printing
from mqctl.cli.render import Output
from mqctl.errors import UnhealthyError, UsageError
from mqctl.ticker import ticking

if TYPE_CHECKING:
    from mqctl.sim.cluster import Report, Simulation


# ------------------------------------------------------------------------------------------------
# Shared plumbing


@contextlib.contextmanager
def _workdir(base: str | None, keep: bool) -> Iterator[str]:
    """The run's directory (stores, controller data, sim.log); removed at the end unless kept or given."""
    import tempfile  # lazy: start-up

    own = base is None
    path = tempfile.mkdtemp(prefix="mqctl-sim-") if base is None else os.path.abspath(base)
    if not own and os.path.isdir(path) and os.listdir(path):
        raise UsageError(f"--dir {path}: not empty (a previous run?); give a new or empty directory")
    os.makedirs(path, exist_ok=True)
    try:
        yield path
    finally:
        if own and not keep:
            shutil.rmtree(path, ignore_errors=True)


def _quiet_grpc() -> None:
    """gRPC's C core logs every GOAWAY of a killed peer at INFO on stderr: not for this screen. Must run
    before grpc is imported (the commands import it lazily)."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


@contextlib.contextmanager
def _logs_to(path: str) -> Iterator[None]:
    """Agent and simulator logs go to a file, never to the terminal (they would tear the live view)."""
    import logging  # lazy: start-up

    logger = logging.getLogger("mqctl")
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s"))
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(old_level)
        logger.propagate = old_propagate


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM/SIGHUP end the run like Ctrl-C, so that the cleanup runs."""

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


class _Printer:
    """Plain lines with the elapsed time (non-TTY), or lines above a rich Live view (TTY)."""

    def __init__(self, live: bool) -> None:
        from rich.console import Console  # lazy: rich

        self.t0 = time.monotonic()
        self.live = live
        self.console = Console(highlight=False, width=None if live else 200)
        self._lock = threading.Lock()

    def line(self, text: str, style: str = "") -> None:
        stamp = f"[{time.monotonic() - self.t0:6.1f}s] "
        with self._lock:
            if self.live:
                self.console.print(stamp + text, style=style or None, markup=False)
            else:
                sys.stdout.write(stamp + text + "\n")
                sys.stdout.flush()


def _render(sim: Simulation, title: str, footer: str = "") -> Any:
    """The live view: controllers, then per broker set a summary line and one row per replica (fits 80
    columns)."""
    # lazy: rich
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    ctl = []
    for c in sim.controllers():
        mark = "leader" if c.leader and c.alive else ("up" if c.alive else "DOWN")
        ctl.append(f"{c.name} {mark}")
    parts: list[Any] = [
        Text(
            f"{title}  {sim.elapsed():5.1f}s  acked {sim.history.acked_count()}  "
            f"controllers: {', '.join(ctl)}",
            style="bold",
        )
    ]
    for sv in sim.view():
        master = "none" if sv.master_id is None else f"id {sv.master_id}"
        parts.append(
            Text(
                f"{sv.name}: master {master} masterEpoch {sv.master_epoch}  SyncStateSet "
                f"{list(sv.sync_state_set)} (epoch {sv.sync_state_set_epoch})  controller: "
                f"{sv.controller_master} @ {sv.controller_epoch}  acked {sv.acked} failed "
                f"{sv.failed}",
                style="bold cyan",
            )
        )
        table = Table(box=None, pad_edge=False, header_style="dim", show_edge=False, padding=(0, 1))
        for col in ("replica", "id", "role", "state", "masterEpoch", "max offset", "lag", "truncations"):
            table.add_column(
                col, justify="left" if col in ("replica", "role", "state") else "right", no_wrap=True
            )
        for r in sv.replicas:
            role_style = {"master": "bold green", "slave": "cyan"}.get(r.role, "red")
            table.add_row(
                f"  r{r.index}",
                "" if r.broker_id is None else str(r.broker_id),
                Text(r.role, style=role_style),
                Text(r.state, style="" if r.state == "up" else "bold red"),
                str(r.master_epoch),
                str(r.max_offset),
                "" if r.lag is None else str(r.lag),
                str(r.truncations or ""),
            )
        parts.append(table)
    if footer:
        parts.append(Text(footer, style="dim"))
    return Group(*parts)


def _print_report(printer: _Printer, report: Report) -> None:
    printer.line("report: " + ", ".join(f"{k} {v}" for k, v in report.stats.items()))
    for c in report.checks:
        printer.line(c.line(), style="green" if c.ok else "bold red")


@contextlib.contextmanager
def _live(printer: _Printer, sim: Simulation, title: str, footer: Callable[[], str]) -> Iterator[None]:
    """A rich Live view refreshed by a thread (TTY only); lines printed meanwhile scroll above it."""
    if not printer.live:
        yield
        return
    from rich.live import Live  # lazy: rich

    with Live(console=printer.console, auto_refresh=False, transient=False) as live:

        def refresh() -> None:
            if sim.sets:
                with contextlib.suppress(Exception):  # a view taken mid-restart; the next one will do
                    live.update(_render(sim, title, footer()), refresh=True)

        try:
            with ticking(0.25, refresh, "sim-view"):
                yield
        finally:
            if sim.sets:
                with contextlib.suppress(Exception):
                    live.update(_render(sim, title, ""), refresh=True)


def _plain_status(printer: _Printer, sim: Simulation) -> None:
    for sv in sim.view():
        reps = " ".join(f"r{r.index}={r.role}/{r.state}@{r.max_offset}" for r in sv.replicas)
        printer.line(
            f"{sv.name}: master id {sv.master_id} masterEpoch {sv.master_epoch} SyncStateSet "
            f"{list(sv.sync_state_set)} acked {sv.acked} failed {sv.failed} | {reps}"
        )


# ------------------------------------------------------------------------------------------------
# mqctl demo


@root_app.command("demo")
def demo(
    keep: bool = typer.Option(
        False,
        "--keep",
        help="keep the run's directory (stores, controller data, sim.log) and print where it is",
    ),
    pace: float = typer.Option(
        1.0,
        "--pace",
        min=0.0,
        max=10.0,
        help="scale the pauses in which messages just flow (1: about a minute)",
    ),
    plain: bool = typer.Option(False, "--plain", help="plain progress lines even on a terminal"),
    rocketmq_home: str = typer.Option(
        None,
        "--rocketmq-home",
        metavar="DIR",
        help="run the tour with the RocketMQ 5.x installation in DIR (its "
        "lib/): its name server, three brokers, producer and consumer "
        "(needs a JDK 11+)",
    ),
    host_network: bool = typer.Option(
        False,
        "--host-network",
        help="with --rocketmq-home when no private network namespace can be "
        "made: run on the host's loopback anyway, accepting that "
        "RocketMQ's HA ports listen on every address",
    ),
) -> None:
    """The newcomer's tour, no arguments needed: a three-node controller group, two broker sets of three
    replicas, a master killed, a new one elected and followed, the old one back as a slave after
    truncation, and a verdict that no acknowledged message was lost (exit 0 only then). With
    --rocketmq-home the same story with real RocketMQ brokers (one broker set)."""
    _quiet_grpc()
    if rocketmq_home is not None:
        _demo_rocketmq(rocketmq_home, host_network, keep, pace)
        return
    if host_network:
        raise UsageError("--host-network goes with --rocketmq-home")
    # lazy: start-up
    from mqctl.sim.cluster import Simulation
    from mqctl.sim.demo import VERDICT_FAILED, demo_settings, run_demo

    printer = _Printer(live=sys.stdout.isatty() and not plain)
    with _sigterm_interrupts(), _workdir(None, keep) as work, _logs_to(os.path.join(work, "sim.log")):
        printer.line(
            "mqctl demo: a simulated RocketMQ cluster with automatic failover (about a minute; "
            "Ctrl-C stops and cleans up)",
            style="bold",
        )
        sim = Simulation(demo_settings(work), on_event=lambda t: printer.line("  . " + t, style="dim"))
        try:
            with _live(printer, sim, "mqctl demo", lambda: ""):
                try:
                    result = run_demo(sim, lambda t: printer.line(t, style="bold"), pace=pace)
                except (TimeoutError, RuntimeError) as exc:
                    printer.line(f"{VERDICT_FAILED}: {exc}", style="bold red")
                    raise UnhealthyError(
                        f"the demo did not complete: {exc} (logs: "
                        f"{os.path.join(work, 'sim.log') if keep else 'rerun with --keep'})"
                    ) from None
        finally:
            sim.close()
        _verdict(printer, result, f"{work} (stores, controller data and logs, sim.log)" if keep else None)


def _verdict(printer: _Printer, result: Any, kept: str | None, what: str = "an invariant") -> None:
    """The end of a demo: its report, its verdict, what --keep kept; exit 7 (unhealthy) when it failed."""
    _print_report(printer, result.report)
    printer.line(result.verdict, style="bold green" if result.ok else "bold red")
    if kept:
        printer.line(f"kept {kept}")
    if not result.ok:
        raise UnhealthyError(f"{what} did not hold (see the report above)")


def _demo_rocketmq(home: str, host_network: bool, keep: bool, pace: float) -> None:
    """`mqctl demo --rocketmq-home`: checks first (installation, Java, the private network), then the tour
    in plain lines (mqctl.sim.rocketmq decides, this renders)."""
    # lazy: start-up
    from mqctl.sim.demo import VERDICT_FAILED
    from mqctl.sim.rocketmq import (
        RocketMQSet,
        enter_private_network,
        find_installation,
        find_java,
        run_rocketmq_demo,
    )

    install = find_installation(home)
    java = find_java(install.class_file_java)
    printer = _Printer(live=False)
    if host_network:
        network = "the host's loopback (RocketMQ's HA ports listen on every address: --host-network)"
    else:
        try:
            network = enter_private_network()
        except OSError as exc:
            raise UsageError(
                f"cannot make a private network namespace for RocketMQ ({exc.strerror}), whose "
                "HA port listens on every address: run as root, allow unprivileged user "
                "namespaces, or accept it with --host-network"
            ) from None
    with _sigterm_interrupts(), _workdir(None, keep) as work, _logs_to(os.path.join(work, "sim.log")):
        rs = RocketMQSet(install, java, Path(work), on_event=lambda t: printer.line("  . " + t, style="dim"))
        try:
            try:
                version = rs.compile_driver()
                printer.line(
                    "mqctl demo: real RocketMQ brokers with automatic failover by mqctl (about a "
                    "minute; Ctrl-C stops and cleans up)",
                    style="bold",
                )
                printer.line(
                    f"  . RocketMQ {version} at {install.home}, Java {java.release}; everything "
                    f"on 127.0.0.1 in {network}, files in {work}",
                    style="dim",
                )
                result = run_rocketmq_demo(rs, lambda t: printer.line(t, style="bold"), pace=pace)
            except (TimeoutError, RuntimeError, subprocess.SubprocessError) as exc:
                printer.line(f"{VERDICT_FAILED}: {exc}", style="bold red")
                raise UnhealthyError(
                    f"the demo did not complete: {exc}"
                    + ("" if keep else " (rerun with --keep to keep the logs)")
                ) from None
        finally:
            rs.close()
        _verdict(
            printer,
            result,
            f"{work} (stores, controller data, logs/ of every process)" if keep else None,
            "a check",
        )


# ------------------------------------------------------------------------------------------------
# mqctl sim


@contextlib.contextmanager
def _keyboard(enabled: bool) -> Iterator[Callable[[], str | None]]:
    """Single keys from a terminal (cbreak mode, restored at the end); yields a non-blocking reader."""
    if not enabled or not sys.stdin.isatty():
        yield lambda: None
        return
    # lazy: start-up
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def read() -> str | None:
        ready, _, _ = select.select([fd], [], [], 0)
        return os.read(fd, 1).decode(errors="replace") if ready else None

    try:
        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


@root_app.command("sim")
@connected(
    protocol=False,
    timeout=5.0,
    address=None,
    without_address="the simulation starts its own group (use -a to run against yours: no "
    "controller faults then)",
    timeout_help="seconds each controller call of the brokers may take, retries included",
)
@printing()
def sim_command(
    conn: Conn,
    controllers: int = typer.Option(3, "--controllers", help="controller nodes to start (1, 3 or 5)"),
    sets: int = typer.Option(2, "-s", "--sets", help="broker sets"),
    replicas: int = typer.Option(3, "-r", "--replicas", help="replicas per broker set"),
    rate: float = typer.Option(20.0, "--rate", help="messages per second per broker set (0: none)"),
    duration: float = typer.Option(
        60.0, "-d", "--duration", help="seconds to run (0: until q or Ctrl-C on a terminal)"
    ),
    chaos: bool = typer.Option(False, "--chaos", help="apply a random fault schedule made from --seed"),
    seed: int = typer.Option(1, "--seed", help="seed of the fault schedule (same seed, same schedule)"),
    fault_interval: float = typer.Option(4.0, "--fault-interval", help="mean seconds between faults"),
    storage: str = typer.Option("commitlog", "--storage", help="commitlog (RocketMQ files) or offsets"),
    peers: str = typer.Option("grpc", "--peers", help="grpc (a Broker service per agent) or local"),
    all_ack: bool = typer.Option(
        True,
        "--all-ack/--no-all-ack",
        help="allAckInSyncStateSet: acknowledged once every SyncStateSet member has it",
    ),
    heartbeat_timeout: int = typer.Option(1500, "--heartbeat-timeout", help="brokers' lease, ms"),
    cluster_name: str = typer.Option("SimCluster", "--cluster-name", help="broker cluster name"),
    work_dir: str = typer.Option(
        None, "--dir", help="run directory (kept) [default: a temporary one, removed at the end]"
    ),
    keep: bool = typer.Option(False, "--keep", help="keep the temporary run directory"),
    plain: bool = typer.Option(False, "--plain", help="plain progress lines even on a terminal"),
    output: Output = output_option(),
    json_out: bool = typer.Option(False, "--json", hidden=True, help="the same as -o json (older name)"),
) -> None:
    """Run S broker sets x R replicas (mqctl.broker agents) against a controller group, produce messages,
    inject faults from a seed or the keyboard, show every set live, and check the invariants at the end.
    Keys on a terminal: 1-9 select a set, k crash its master, s crash a slave, i isolate its master,
    r restart its brokers, c kill the controller leader, C restart controllers, h heal all, q stop."""
    _quiet_grpc()
    # lazy: start-up
    from mqctl.sim.cluster import SimSettings, Simulation, set_names
    from mqctl.sim.faults import KEYS, describe, plan_faults

    controller_addr = ";".join(conn.addresses) or None
    settings = SimSettings(
        sets=sets,
        replicas=replicas,
        controllers=controllers,
        addresses=controller_addr,
        cluster_name=cluster_name,
        rate=rate,
        storage=storage,
        peer_transport=peers,
        all_ack=all_ack,
        heartbeat_timeout_ms=heartbeat_timeout,
        controller_security=conn.security() if controller_addr else {},
        controller_timeout=conn.timeout,
    )
    settings.validate()
    if duration < 0 or fault_interval <= 0:
        raise UsageError("--duration must be 0 or more and --fault-interval positive")
    document = json_out or output is not Output.table  # the report as one document, no progress lines
    output = Output.json if json_out else output
    tty = sys.stdout.isatty() and not plain and not document
    interactive = tty and sys.stdin.isatty()
    if duration == 0 and not interactive:
        raise UsageError("--duration 0 runs until q or Ctrl-C, which needs a terminal; give a duration")
    printer = _Printer(live=tty)
    out: Callable[[str], None] = (lambda t: None) if document else printer.line
    n_ctl = 0 if controller_addr else controllers
    plan = (
        plan_faults(seed, duration, sets, replicas, n_ctl, interval=fault_interval)
        if chaos and duration > 0
        else []
    )
    with _sigterm_interrupts(), _workdir(work_dir, keep) as work, _logs_to(os.path.join(work, "sim.log")):
        settings.base_dir = work
        sim = Simulation(settings, on_event=out)
        report = None
        try:
            if plan:
                out(f"fault plan from seed {seed}: {len(plan)} faults")
                for f in plan:
                    out("  " + describe(f, set_names(sets)))
            selected = [0]
            quit_ = threading.Event()
            last_status = [time.monotonic()]

            def footer() -> str:
                keys = "  ".join(f"{k} {h.split(' ')[0]}" for k, (_, h) in KEYS.items())
                return (
                    f"selected set {selected[0] + 1} | keys: 1-9 select  {keys}"
                    if interactive
                    else f"seed {seed}"
                    if chaos
                    else ""
                )

            with _live(printer, sim, "mqctl sim", footer), _keyboard(interactive) as read_key:
                sim.start()
                sim.start_producer()

                def tick() -> None:
                    key = read_key()
                    if key and key.isdigit() and key != "0":
                        selected[0] = (int(key) - 1) % len(sim.sets)
                    elif key in KEYS:
                        action = KEYS[key][0]
                        if action == "quit":
                            quit_.set()
                        else:
                            threading.Thread(
                                target=sim.perform, args=(action, selected[0]), daemon=True
                            ).start()
                    if not tty and not document and time.monotonic() - last_status[0] >= 5:
                        last_status[0] = time.monotonic()
                        _plain_status(printer, sim)

                sim.run(duration, plan, stop=quit_, tick=tick)
                problems = sim.settle(60)
                report = sim.report(problems, seed=seed if chaos else None)
        finally:
            sim.close()
        assert report is not None
        violated = UnhealthyError("an invariant did not hold (see the report)")
        if document:
            echo_doc(output, report.to_dict(), error=None if report.ok else violated)
        else:
            _print_report(printer, report)
            printer.line(
                "all invariants hold" if report.ok else "INVARIANTS VIOLATED",
                style="bold green" if report.ok else "bold red",
            )
            if work_dir or keep:
                printer.line(f"run directory: {work}")
        if not report.ok:
            raise violated
