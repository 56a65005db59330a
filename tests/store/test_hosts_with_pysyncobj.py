"""pysyncobj replaces socket.inet_ntop with a Windows-only function on every OS when it is imported
(pysyncobj/win_inet_pton.py). Host decoding must not depend on it, and importing mqctl's Raft module
must leave the real one in place for everyone else in the process."""

from __future__ import annotations

import socket
import subprocess
import sys

from mqctl.store.commitlog import Message, decode_record, encode_record


def test_hosts_decode_even_with_pysyncobjs_inet_ntop(monkeypatch) -> None:
    import pysyncobj.win_inet_pton as win

    monkeypatch.setattr(socket, "inet_ntop", win.inet_ntop)  # what importing pysyncobj does
    r = decode_record(
        encode_record(Message("t", b"x", born_host=("::1", 7), store_host=("127.0.0.1", 8)), 0), 0, 0
    )
    assert (r.born_host, r.store_host) == (("::1", 7), ("127.0.0.1", 8))


def test_importing_the_raft_module_keeps_the_real_inet_ntop() -> None:
    code = (
        "import socket, mqctl.controller.raftlog, pysyncobj.tcp_connection; "
        "print(socket.inet_ntop(socket.AF_INET6, bytes(15) + b'\\x01'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "::1"
