"""Tables at 80 and 100 columns (issue 33): no address, id, role or path is cut (no ellipsis, no value
split across lines); a table too wide becomes blocks of HEADER value pairs; a title longer than its
table is a line of its own, not broken inside a path."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mqctl.admin.quorum import NodeView, quorum_doc
from mqctl.cli import render
from mqctl.cli.render import Output
from mqctl.client import Metadata, Peer
from mqctl.store.build import build_store

ADDRS = [f"127.0.0.1:{p}" for p in (29881, 29882, 29883)]
GRPC = [f"127.0.0.1:{p}" for p in (29878, 29868, 29858)]


def _meta(i: int) -> Metadata:
    peers = tuple(
        Peer(
            ADDRS[j],
            GRPC[j],
            is_leader=j == 0,
            is_self=j == i,
            connected=True,
            match_index=1234567,
            next_index=1234568,
            max_feature_level=3,
        )
        for j in range(3)
    )
    return Metadata(
        group="mqctl",
        controller_leader_id=ADDRS[0],
        controller_leader_address=GRPC[0],
        is_leader=i == 0,
        self_id=ADDRS[i],
        peers=peers,
        term=12,
        commit_index=1234567,
        last_applied=1234567,
        has_quorum=True,
        state_hash="ab" * 32,
        log_length=1234567,
        state="leader" if i == 0 else "follower",
        address=GRPC[i],
        feature_level=3,
        max_feature_level=3,
    )


def _whole_values(out: str, values: list[str]) -> None:
    assert "…" not in out and "..." not in out, out
    for v in values:
        assert re.search(rf"(^|\s){re.escape(v)}(\s|$)", out, re.M), (v, out)


@pytest.mark.parametrize("columns", [80, 100])
def test_quorum_table_keeps_addresses_and_roles_whole(
    columns: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    doc = quorum_doc([NodeView(GRPC[i], _meta(i)) for i in range(3)])
    render.emit(doc, Output.table, render.quorum_table)
    out = capsys.readouterr().out
    _whole_values(out, ADDRS + GRPC + ["leader", "follower", "Leader", "Follower", "1234567"])
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns, out


def test_a_table_that_fits_stays_a_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    doc = quorum_doc([NodeView(GRPC[i], _meta(i)) for i in range(3)])
    render.emit(doc, Output.table, render.quorum_table)
    out = capsys.readouterr().out
    assert "ENDPOINT" in out and "ENDPOINT 127.0.0.1" not in out  # headers over columns, not pairs


@pytest.mark.parametrize("columns", ["80", "100"])
def test_recover_inspect_keeps_store_paths_whole(tmp_path: Path, columns: str) -> None:
    stores = []
    for i in range(2):
        d = tmp_path / "a-broker-set-folder-with-a-long-name" / "and-another-level-below-it" / f"r{i}"
        stores.append(
            str(build_store(d, history=[(0, 0), (1, 900)], max_offset=1200, clean=True, broker_id=i + 1))
        )
    out = subprocess.run(
        [sys.executable, "-m", "mqctl", "recover", "inspect", *stores],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": columns},
    )
    assert out.returncode == 0, out.stderr
    _whole_values(out.stdout, stores + ["cluster-a/broker-set-a#1", "cluster-a/broker-set-a#2"])
    for s in stores:  # the epochs' title names the path whole, on one line
        assert f"epochs of {s}\n" in out.stdout, out.stdout
