"""What keeps `mqctl` quick to start (bench/bench_startup.py measures it): only the command module a
command line names is imported, help is printed without parsing, option values are converted
without pydantic, and nothing heavy is imported that the command does not use."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mqctl.cli
from mqctl.cli import COMMAND_MODULES, gendocs, params, run
from mqctl.localgroup import free_port


def _modules_of(cmd) -> set[str]:
    """The mqctl.cli modules whose functions make up a command (and its subcommands)."""
    mods = set()
    if getattr(cmd, "callback", None) is not None and cmd.callback.__module__.startswith("mqctl.cli."):
        mods.add(cmd.callback.__module__.rsplit(".", 1)[1])
    for sub in (getattr(cmd, "commands", None) or {}).values():
        mods |= _modules_of(sub)
    return mods


def test_command_modules_table_is_complete() -> None:
    """Every top-level command, hidden aliases included, is in COMMAND_MODULES with the modules
    that define it; a new command module must be named there."""
    import typer.main

    root = typer.main.get_command(mqctl.cli.load_commands())
    assert set(root.commands) == set(COMMAND_MODULES)
    for name, cmd in root.commands.items():
        wrapped = {m for m in _modules_of(cmd) if m.endswith("_cmd")}
        # typer wraps callbacks; the module that registered it is the callback's own module
        assert wrapped <= set(COMMAND_MODULES[name]), name
    assert {m for mods in COMMAND_MODULES.values() for m in mods} == set(mqctl.cli.command_modules())


def _in_fresh_python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


PROBE = """
import contextlib, io, json, sys
from mqctl.cli import run
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    code = run({args!r})
heavy = ("pydantic", "rich", "grpc", "google.protobuf", "mqctl.cli.sim_cmd", "mqctl.cli.upgrade_cmd",
         "mqctl.cli.pipeline_cmd")
print(json.dumps([code, sorted(m for m in heavy if m in sys.modules)]))
"""


@pytest.mark.parametrize(
    ("args", "code", "allowed"),
    [
        (["--help"], 0, {"mqctl.cli.sim_cmd", "mqctl.cli.upgrade_cmd", "mqctl.cli.pipeline_cmd"}),
        (["getSyncStateSet", "--help"], 0, set()),
        (["quorum", "status", "-h"], 0, set()),
        (["recover", "inspect", "--help"], 0, {"mqctl.cli.pipeline_cmd"}),
        (["getSyncStateSet", "--no-such-flag"], 2, set()),
        (["recover", "inspect", "/nonexistent", "-o", "json"], 4, {"mqctl.cli.pipeline_cmd"}),
    ],
)
def test_nothing_heavy_is_imported(args: list[str], code: int, allowed: set[str]) -> None:
    got_code, imported = json.loads(_in_fresh_python(PROBE.format(args=args)))
    assert got_code == code
    assert set(imported) <= allowed, f"{args}: imported {imported}"


def test_a_controller_command_imports_grpc_but_not_pydantic_or_rich() -> None:
    args = ["getSyncStateSet", "-a", f"127.0.0.1:{free_port()}", "--timeout", "0.2", "-o", "json"]
    got_code, imported = json.loads(_in_fresh_python(PROBE.format(args=args)))
    assert got_code == 6
    assert "grpc" in imported and "pydantic" not in imported and "rich" not in imported


def test_every_parameter_but_a_few_is_converted_without_pydantic() -> None:
    root = gendocs.root_command()
    params.install(root)
    typer_owned = []
    for path, cmd in gendocs.walk(root):
        for p in cmd.params:
            if not params.is_plain(p):
                typer_owned.append(f"{' '.join(path)} {p.name}")
            else:
                assert type(p._runtime_param).__name__ == "_Plain"
    assert typer_owned == ["demo pace"]  # a float range: typer checks the bounds


def test_plain_conversion(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # an int, a float, a bool from the environment, a case-insensitive choice, a list
    monkeypatch.setenv("MQCTL_DEBUG", "0")
    code = run(["getSyncStateSet", "-a", f"127.0.0.1:{free_port()}", "--timeout", "0.2", "-o", "JSON"])
    out, _err = capsys.readouterr()
    assert code == 6 and json.loads(out)["error"]["exitCode"] == 6
    assert run(["getSyncStateSet", "--timeout", "1e-1x"]) == 2
    assert "'1e-1x' is not a valid number." in capsys.readouterr().err
    assert run(["quorum", "feature-level", "two"]) == 2
    assert "'two' is not a valid integer." in capsys.readouterr().err
    monkeypatch.setenv("MQCTL_DEBUG", "maybe")
    assert run(["getSyncStateSet", "--help"]) == 0  # help needs no value
    capsys.readouterr()
    assert run(["getControllerMetaData", "-a", "x"]) == 2
    assert "'maybe' is not a valid boolean." in capsys.readouterr().err


def test_help_of_an_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["nosuch", "--help"]) == 2
    assert capsys.readouterr().err.endswith("mqctl: error: No such command 'nosuch'.\n")
    assert run(["quorum", "nosuch", "-h"]) == 2
    assert run(["recover", "inspect", "STORE", "--help"]) == 0
    assert capsys.readouterr().out.startswith("Usage: mqctl recover inspect [OPTIONS] ")


def test_the_overview_shows_what_the_full_cli_shows(capsys: pytest.CaptureFixture[str]) -> None:
    import typer.main

    assert run(["--help"]) == 0
    fast = capsys.readouterr().out
    root = typer.main.get_command(mqctl.cli.app)
    ctx = root.context_class(root, info_name="mqctl", **root.context_settings)
    assert fast == root.get_help(ctx) + "\n"
    for name, cmd in root.commands.items():
        if not cmd.hidden:
            assert f"  {name} " in fast


def test_completion_show_and_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = Path(__file__).resolve().parents[2]
    for shell in gendocs.SHELLS:
        assert run(["completion", "show", shell]) == 0
        assert capsys.readouterr().out == (root / gendocs.completion_file(shell)).read_text()
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("SHELL", "/bin/bash")
    prefix = tmp_path / "venv"  # as if this were <venv>/bin/mqctl
    monkeypatch.setattr(sys, "argv", [str(prefix / "bin/mqctl"), "completion", "install"])
    (prefix / "share/man/man1").mkdir(parents=True)
    (prefix / "share/man/man1/mqctl-removedCommand.1").write_text("old")
    assert run(["completion", "install"]) == 0
    out = capsys.readouterr().out
    target = tmp_path / ".local/share/bash-completion/completions/mqctl"
    assert target.read_text() == (root / "completions/mqctl.bash").read_text()
    # the man pages (man/man1 in the repository, test_generated_docs.py) next to this mqctl: man finds
    # them through $PATH; a page of a removed command is removed
    man1 = prefix / "share/man/man1"
    assert f"wrote the man pages to {man1}: man mqctl finds them while {prefix / 'bin'} is on $PATH" in out
    pages = gendocs.man_pages()
    assert {p.name: p.read_text() for p in man1.iterdir()} == pages
    assert {"mqctl.1", "mqctl-electMaster.1", "mqctl-quorum-status.1"} <= set(pages)
    man = shutil.which("man")
    if man is not None:
        (prefix / "bin").mkdir()
        env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
        found = subprocess.run([man, "-w", "mqctl-electMaster"], capture_output=True, text=True, env=env)
        assert found.stdout.strip() == str(man1 / "mqctl-electMaster.1"), found.stderr
    # a prefix this user cannot write (a system-wide mqctl): ~/.local/share/man
    monkeypatch.setattr(sys, "argv", ["/proc/mqctl-test/bin/mqctl"])
    assert run(["completion", "install", "bash"]) == 0
    assert (tmp_path / ".local/share/man/man1/mqctl.1").is_file()
    assert f"{tmp_path / '.local/bin'} is on $PATH" in capsys.readouterr().out
    assert run(["completion", "install", "fish"]) == 0
    assert (tmp_path / ".config/fish/completions/mqctl.fish").is_file()
    capsys.readouterr()
    monkeypatch.setenv("SHELL", "/bin/tcsh")
    assert run(["completion", "install"]) == 2
    assert "'tcsh' is not one of bash, zsh, fish" in capsys.readouterr().err


@pytest.mark.slow
def test_the_startup_benchmark_runs() -> None:
    """bench/bench_startup.py prints the three ratios (figures, not asserted: timing is the machine's)."""
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(root / "bench/bench_startup.py"), "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("mqctl --help", "mqctl getSyncStateSet --help", "mqctl getSyncStateSet -o json"):
        (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(name + " ")]
        assert "x " in line and ("ok" in line or "MISSED" in line)
