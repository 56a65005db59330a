"""`mqctl check config`: every rule has a directory configs/RULE/ with files that trip it (trips/) and files
that do not (passes/); configs/clean/ is a broker set and a controller with nothing to say."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import run_cli

from mqctl.admin.configcheck import RULES, parse_properties

CONFIGS = Path(__file__).resolve().parent / "configs"


def run(*args: str) -> tuple[int, str, str]:
    r = run_cli(*args)
    return r.code, r.out, r.err


def findings(paths: list[Path]) -> tuple[int, list[dict]]:
    code, out, _ = run("check", "config", *map(str, paths), "-o", "json")
    return code, json.loads(out)["findings"]


def test_every_rule_has_files_that_trip_it_and_files_that_do_not() -> None:
    assert sorted(p.name for p in CONFIGS.iterdir() if p.name != "clean") == sorted(RULES)


@pytest.mark.parametrize("rule", RULES)
def test_rule(rule: str) -> None:
    trips = sorted((CONFIGS / rule / "trips").iterdir())
    passes = sorted((CONFIGS / rule / "passes").iterdir())
    assert trips and passes
    code, found = findings(trips)
    mine = [f for f in found if f["rule"] == rule]
    assert mine, f"{rule}: nothing found in {trips}: {found}"
    assert code == (2 if any(f["severity"] == "CRIT" for f in found) else 1)
    for f in mine:
        assert f["why"] and f["source"] and f["fix"] and f["files"]
    _, found = findings(passes)
    assert [f for f in found if f["rule"] == rule] == []


def test_what_the_findings_say() -> None:
    _, found = findings(sorted((CONFIGS / "controller-addr" / "trips").iterdir()))
    (f,) = [f for f in found if f["rule"] == "controller-addr"]
    assert f["severity"] == "CRIT" and f["message"].endswith(
        "broker.conf: controllerAddr (line 13): 127.0.0.1:9999 is not a controller of the group "
        "(127.0.0.1:9858, 127.0.0.1:9868, 127.0.0.1:9878)"
    )
    assert f["fix"] == "controllerAddr=127.0.0.1:9858;127.0.0.1:9868;127.0.0.1:9878"
    _, found = findings(sorted((CONFIGS / "set-consistency" / "trips").iterdir()))
    (f,) = [f for f in found if f["rule"] == "set-consistency"]
    assert f["severity"] == "CRIT" and f["keys"] == ["mappedFileSizeCommitLog"]
    assert "b0.conf=1073741824 (default)" in f["message"] and "b1.conf=67108864" in f["message"]
    _, found = findings(sorted((CONFIGS / "all-ack" / "trips").iterdir()))
    assert [(f["rule"], f["severity"], f["keys"]) for f in found] == [
        ("all-ack", "CRIT", ["allAckInSyncStateSet"])
    ]


def test_exit_codes_and_output() -> None:
    clean = sorted((CONFIGS / "clean").iterdir())
    code, out, _ = run("check", "config", *map(str, clean))
    assert code == 0 and out.startswith("OK: 0 finding(s) in ")
    code, out, _ = run("check", "config", *map(str, clean), "-o", "yaml")
    assert code == 0 and "verdict: OK" in out
    warn = sorted((CONFIGS / "controller-store-path" / "trips").iterdir())
    code, out, _ = run("check", "config", *map(str, warn))
    assert code == 1
    assert out.splitlines()[0].startswith("WARN controller-store-path: ")
    assert "  why: its default moved between releases" in out and "  fix: controllerStorePath=" in out
    assert out.splitlines()[-1].startswith("WARN: 1 finding(s) in ")
    crit = sorted((CONFIGS / "unclean-election" / "trips").iterdir())
    code, out, _ = run("check", "config", *map(str, crit), "-o", "json")
    doc = json.loads(out)
    assert code == 2 and doc["verdict"] == "CRIT" and doc["files"][0]["kind"] == "controller"


def test_unreadable_file(tmp_path: Path) -> None:
    code, _, err = run("check", "config", str(tmp_path / "nope.conf"))
    assert (code, err) == (4, f"mqctl: error: {tmp_path}/nope.conf: cannot read: No such file or directory\n")


def test_properties_as_java_reads_them() -> None:
    props, lines = parse_properties(
        "# c\n! c\n  a = 1\nb:2\nc 3\nd=x\\\n   y\ne=\\u0041\\tz\nf\n\ng = a\\\\\n"
    )
    assert props == {"a": "1", "b": "2", "c": "3", "d": "xy", "e": "A\tz", "f": "", "g": "a\\"}
    assert lines["d"] == 6 and lines["e"] == 8


def test_usage() -> None:
    code, _, err = run("check", "config")
    assert (code, err) == (2, "mqctl: error: name the configuration files to check, or --online -n NAMESRV\n")
    code, _, err = run("check", "config", "--online")
    assert (code, err) == (
        2,
        "mqctl: error: --online needs -n/--namesrvAddr: the name servers that list the brokers\n",
    )
