"""Memory of the gRPC door under undecodable requests (issue 20): RSS of a real `mqctl serve` node as
it answers 20,000 requests whose bytes are not a valid request message, next to a bare grpcio server
whose deserializers raise (the generated ``add_ControllerServicer_to_server``, no mqctl code; it has no
health service, so those calls are UNIMPLEMENTED there).

    .venv/bin/python bench/bench_grpc_fuzz.py [--requests 20000] [--quick]

The goal: the node's RSS after 20,000 undecodable requests within 10 MiB of its RSS after 1,000, no
traceback in its log. grpcio logs a six-line traceback for each request whose deserializer raises and
its RSS grows in a straight line (about 16 to 19 MiB per 1,000 measured with grpcio 1.85.1); mqctl's
deserializers never raise (mqctl.grpc.server.safe_deserializer). Every request goes to
every method in turn (the controller's unary methods, WatchRoleChanges, the health service), one at a
time on one connection, from this process. Figures, not a test: tests/grpc/test_grpc_fuzz.py checks
the flatness on 8,000 requests. `--quick` sends 5,000.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "grpc"))

from grpc_fuzz_payloads import ALWAYS_UNDECODABLE, targets  # noqa: E402

from mqctl.localgroup import LocalCluster, free_port  # noqa: E402

BARE_SERVER = """
import logging, sys
from concurrent import futures
logging.basicConfig()
import grpc
from mqctl.v1 import controller_pb2_grpc as pb_grpc
server = grpc.server(futures.ThreadPoolExecutor(16), options=[("grpc.so_reuseport", 0)])
pb_grpc.add_ControllerServicer_to_server(pb_grpc.ControllerServicer(), server)
server.add_insecure_port(sys.argv[1])
server.start()
print("ready", flush=True)
server.wait_for_termination()
"""


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def storm(
    address: str, pid: int, total: int, marks: set[int]
) -> tuple[dict[int, float], dict[str, int], float]:
    """Send ``total`` undecodable requests; RSS (MiB) at each mark, status codes, seconds."""
    all_targets = targets()
    rss: dict[int, float] = {}
    codes: dict[str, int] = {}
    start = time.monotonic()
    with grpc.insecure_channel(address) as channel:
        calls = {
            t.path: (channel.unary_stream(t.path) if t.streaming else channel.unary_unary(t.path))
            for t in all_targets
        }
        for i in range(total):
            t = all_targets[i % len(all_targets)]
            payload = ALWAYS_UNDECODABLE[i % len(ALWAYS_UNDECODABLE)]
            try:
                answer = calls[t.path](payload, timeout=10)
                if t.streaming:
                    for _ in answer:
                        pass
                name = "OK"
            except grpc.RpcError as err:
                name = err.code().name
            codes[name] = codes.get(name, 0) + 1
            if i + 1 in marks:
                rss[i + 1] = rss_mib(pid)
    return rss, codes, time.monotonic() - start


def report(
    name: str, rss: dict[int, float], codes: dict[str, int], seconds: float, log: str, total: int
) -> None:
    first = rss[min(rss)]
    print(f"\n{name}: {total:,} undecodable requests in {seconds:.1f} s, answers {codes}")
    print("  requests  RSS MiB  growth since 1,000")
    for n in sorted(rss):
        print(f"  {n:8,}  {rss[n]:7.1f}  {rss[n] - first:+7.1f}")
    tracebacks = log.count("Traceback (most recent call last)")
    growth = rss[max(rss)] - first
    print(
        f"  tracebacks in its log: {tracebacks}; growth {growth:+.1f} MiB "
        f"({'within' if growth <= 10 else 'over'} the 10 MiB goal)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="5,000 requests")
    parser.add_argument("--no-bare", action="store_true", help="skip the bare grpcio server")
    args = parser.parse_args()
    total = 5_000 if args.quick else args.requests
    marks = {1_000, *range(5_000, total + 1, 5_000), total}
    print(
        f"gRPC undecodable-request benchmark, grpcio {grpc.__version__}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores, {platform.machine()}"
    )
    with tempfile.TemporaryDirectory(prefix="mqctl-bench-fuzz-") as tmp:
        with LocalCluster(tmp, size=1) as cluster:
            cluster.start()
            node = cluster.nodes[0]
            assert node.proc is not None
            rss, codes, seconds = storm(node.grpc_address, node.proc.pid, total, marks)
            report("mqctl serve", rss, codes, seconds, node.log_text(), total)
        if not args.no_bare:
            address = f"127.0.0.1:{free_port()}"
            log_path = Path(tmp) / "bare.log"
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(
                    [sys.executable, "-c", BARE_SERVER, address], stdout=subprocess.PIPE, stderr=log, cwd=ROOT
                )
            try:
                assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
                rss, codes, seconds = storm(address, proc.pid, total, marks)
            finally:
                proc.terminate()
                proc.wait(10)
            report(
                "bare grpcio server, deserializers that raise",
                rss,
                codes,
                seconds,
                log_path.read_text(errors="replace"),
                total,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
