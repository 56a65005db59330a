"""completions/, man/ and docs/cli.md are generated from the CLI, and the method tables of
docs/grpc-api.md and docs/remoting.md from mqctl/methods.py (tools/gen-docs); none may drift."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from admin_fixtures import MQCTL

from mqctl.cli import gendocs

ROOT = Path(__file__).resolve().parents[2]


def test_committed_files_match_the_cli(tmp_path) -> None:
    gendocs.write(tmp_path)
    generated = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    committed = sorted(
        p.relative_to(ROOT).as_posix()
        for d in ("completions", "man")
        for p in (ROOT / d).rglob("*")
        if p.is_file()
    ) + ["docs/cli.md", *gendocs.SPLICED]
    assert sorted(generated) == sorted(committed), "run tools/gen-docs and commit the result"
    for rel in generated:
        assert (tmp_path / rel).read_text() == (ROOT / rel).read_text(), (
            f"{rel} differs from what the CLI generates: run tools/gen-docs and commit the result"
        )


def test_completion_scripts_are_what_the_binary_prints() -> None:
    for shell in gendocs.SHELLS:
        env = {**os.environ, "_MQCTL_COMPLETE": f"source_{shell}"}
        proc = subprocess.run([MQCTL], capture_output=True, text=True, env=env, timeout=30)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == (ROOT / gendocs.completion_file(shell)).read_text().strip()


def test_bash_completion_completes_commands_and_options() -> None:
    env = {**os.environ, "_MQCTL_COMPLETE": "complete_bash", "COMP_WORDS": "mqctl getSync", "COMP_CWORD": "1"}
    proc = subprocess.run([MQCTL], capture_output=True, text=True, env=env, timeout=30)
    assert "getSyncStateSet" in proc.stdout
    env.update({"COMP_WORDS": "mqctl electMaster --acc", "COMP_CWORD": "2"})
    proc = subprocess.run([MQCTL], capture_output=True, text=True, env=env, timeout=30)
    assert "--accept-data-loss" in proc.stdout


def test_every_option_of_every_command_is_in_its_man_page() -> None:
    root = gendocs.root_command()
    for path, cmd in gendocs.walk(root):
        page = (ROOT / "man/man1" / ("-".join(("mqctl", *path)) + ".1")).read_text()
        for param in cmd.params:
            if getattr(param, "hidden", False):  # an old name kept working (sim --json), not shown
                continue
            for opt in getattr(param, "opts", []):
                if opt.startswith("-"):
                    assert opt.replace("-", "\\-") in page, f"{opt} missing from the man page of {path}"
    top = (ROOT / "man/man1/mqctl.1").read_text()
    assert ".SH EXIT STATUS" in top and "MQCTL_CONTROLLER" in top


def test_method_tables_list_every_method() -> None:
    from mqctl import methods

    grpc_doc = (ROOT / "docs/grpc-api.md").read_text()
    remoting_doc = (ROOT / "docs/remoting.md").read_text()
    for row in methods.METHODS:
        assert f"| `{row.grpc_method}`" in grpc_doc
        if row.remoting_code is not None:
            assert f"| {row.remoting_code} | {row.code_name} | {row.name} |" in remoting_doc
    begin = "<!-- BEGIN GENERATED x: tools/gen-docs writes this from mqctl/methods.py -->"
    end = "<!-- END GENERATED x -->"
    assert gendocs.splice(f"a\n{begin}\nold\n{end}\nb", "x", "new") == f"a\n{begin}\nnew\n{end}\nb"
    with pytest.raises(ValueError, match=r"no .*BEGIN GENERATED y"):
        gendocs.splice("no markers", "y", "new")
