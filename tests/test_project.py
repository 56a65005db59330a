"""Project-level checks: fast start, committed generated code, lint."""

from __future__ import annotations

import ast
import filecmp
import io
import os
import re
import shutil
import subprocess
import sys
import tokenize
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# what `mqctl --help` must not load: the heavy packages (and the fork of pysyncobj, mqctl/raft) and the
# heavier parts of rich (its console, tables, live display and markdown: tables are drawn by commands)
HEAVY = (
    "grpc",
    "google.protobuf",
    "pyspark",
    "pysyncobj",
    "mqctl.raft",
    "sqlite_utils",
    "numpy",
    "pyarrow",
    "pandas",
    "yaml",
    "rich.console",
    "rich.table",
    "rich.live",
    "rich.markdown",
    "pygments",
)


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_help_imports_no_heavy_package() -> None:
    """Neither `import mqctl.cli` nor `mqctl --help` (which loads every command module) imports a
    heavy package: the commands import them inside the functions that need them."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mqctl.cli"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "mqctl.cli" in modules and not _heavy(modules)
    # `mqctl --help` ends with os._exit after the atexit handlers: one of them reports sys.modules
    report = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sys.modules) + '\\n'))\n"
        "sys.argv = ['mqctl', '--help']\n"
        "from mqctl.cli import main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", report], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "serve" in out.stdout, out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if ln.startswith("MODULES ")]
    loaded = set(line.split()[1:])
    assert "mqctl.cli.admin_cmd" in loaded and not _heavy(loaded)


LAZY_REASON = re.compile(r"#\s*lazy:\s*\S")


def _imports_without_reason(path: Path) -> list[int]:
    """The lines of imports made inside functions (outside ``if TYPE_CHECKING``) that carry no
    ``# lazy: <why>`` comment: on the import's own lines, or on the line above the run of imports
    it belongs to."""
    src = path.read_text()
    comments = {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(src).readline)
        if tok.type == tokenize.COMMENT
    }
    tree = ast.parse(src)
    typing_only = {
        id(n)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for n in ast.walk(node)
    }
    in_function = {
        id(n)
        for func in ast.walk(tree)
        if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef)
        for n in ast.walk(func)
        if isinstance(n, ast.Import | ast.ImportFrom)
    }
    missing = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if not isinstance(stmts, list):
                continue
            start = 0  # the first import of the run the current one belongs to
            for i, st in enumerate(stmts):
                if not isinstance(st, ast.Import | ast.ImportFrom):
                    continue
                prev = stmts[i - 1] if i else None
                if not (isinstance(prev, ast.Import | ast.ImportFrom) and prev.end_lineno == st.lineno - 1):
                    start = i
                if id(st) not in in_function or id(st) in typing_only:
                    continue
                own = [comments.get(n, "") for n in range(st.lineno, (st.end_lineno or st.lineno) + 1)]
                above = comments.get(stmts[start].lineno - 1, "")
                if not any(LAZY_REASON.search(c) for c in [*own, above]):
                    missing.append(st.lineno)
    return missing


def test_imports_inside_functions_say_why() -> None:
    """An import inside a function hides an edge of the import graph: it is there only to keep start-up
    fast (a heavy package, a big module) or to break a cycle, and says so (``# lazy: grpc``,
    ``# lazy: start-up``, ``# lazy: cycle with X``). The generated code and the fork are not ours."""
    missing = []
    for path in sorted((ROOT / "mqctl").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("mqctl/v1/", "mqctl/raft/")):
            continue
        missing += [f"{rel}:{n}" for n in _imports_without_reason(path)]
    assert not missing, f"imports inside functions without a '# lazy: <why>' comment: {missing}"


def test_the_reason_check_finds_an_import_without_one(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import json\n"
        "def f():\n"
        "    import os  # lazy: start-up\n"
        "    # lazy: grpc\n"
        "    import sys\n"
        "    import re\n"
        "\n"
        "    import io\n"
        "    if TYPE_CHECKING:\n"
        "        import csv\n"
        "    try:\n"
        "        import zlib  # lazy:\n"
        "    except ImportError:\n"
        "        pass\n"
    )
    assert _imports_without_reason(sample) == [10, 14]


@pytest.mark.parametrize("proto", ["controller", "broker"])
def test_generated_grpc_code_is_up_to_date(tmp_path, proto: str) -> None:
    pytest.importorskip("grpc_tools")
    work = tmp_path / "gen"
    (work / "mqctl" / "v1").mkdir(parents=True)
    shutil.copy(ROOT / f"mqctl/v1/{proto}.proto", work / f"mqctl/v1/{proto}.proto")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-I",
            ".",
            "--python_out=.",
            "--pyi_out=.",
            "--grpc_python_out=.",
            f"mqctl/v1/{proto}.proto",
        ],
        cwd=work,
        check=True,
    )
    for name in (f"{proto}_pb2.py", f"{proto}_pb2.pyi", f"{proto}_pb2_grpc.py"):
        assert filecmp.cmp(work / "mqctl/v1" / name, ROOT / "mqctl/v1" / name, shallow=False), (
            f"mqctl/v1/{name} differs from what the .proto generates: run tools/gen-proto and commit"
        )


def test_ruff_clean() -> None:
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff not installed")
    proc = subprocess.run(
        [ruff, "check", "mqctl", "tests", "bench"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # formatted as `ruff format` leaves it (the fork of pysyncobj aside: pyproject.toml)
    proc = subprocess.run(
        [ruff, "format", "--check", "mqctl", "tests", "bench"], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_strict_on_all_of_mqctl() -> None:
    """Every module of mqctl is typed: `mypy mqctl` runs with `strict = true` (pyproject.toml), the
    Raft fork included (mqctl/raft/FORK.md, T5 and T7), the generated gRPC code aside."""
    pytest.importorskip("mypy")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "mqctl"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout, proc.stdout


def _mqctl_imports() -> dict[str, dict[str, str]]:
    """module -> {imported mqctl module: line}: every import, in functions too, but not those only for
    type checking (``if TYPE_CHECKING:``)."""
    out: dict[str, dict[str, str]] = {}
    for path in sorted((ROOT / "mqctl").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)
        }
        found: dict[str, str] = {}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] if node.module != "mqctl" else [f"mqctl.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if name.startswith("mqctl."):
                    found.setdefault(name, f"{path.relative_to(ROOT)}:{node.lineno}")
        out[module] = found
    return out


def _unit(module: str) -> str:
    """mqctl.controller.core -> controller (a package), mqctl.serve -> serve (a top-level module)."""
    return module.split(".")[1]


def test_packages_import_each_other_without_a_cycle() -> None:
    """Transports depend on the core, never the reverse: no cycle among mqctl's packages and top-level
    modules (such as the one controller -> remoting -> admin -> controller was)."""
    edges: dict[str, dict[str, str]] = {}
    for module, imported in _mqctl_imports().items():
        for name, where in imported.items():
            if _unit(name) != _unit(module):
                edges.setdefault(_unit(module), {}).setdefault(_unit(name), f"{module} ({where})")

    def path_back(start: str, node: str, seen: list[str]) -> list[str] | None:
        for nxt in edges.get(node, {}):
            if nxt == start:
                return [*seen, node]
            if nxt not in seen and nxt != node:
                found = path_back(start, nxt, [*seen, node])
                if found:
                    return found
        return None

    for unit in sorted(edges):
        cycle = path_back(unit, unit, [])
        assert cycle is None, "import cycle: " + " -> ".join(
            f"{a} [{edges[a][b]}]" for a, b in zip(cycle, [*cycle[1:], unit], strict=True)
        )


def test_the_core_imports_no_transport() -> None:
    """The controller's core (mqctl.controller apart from its gRPC transport) and the method table
    import no transport (gRPC, remoting), client, admin, CLI or the process around them (mqctl.serve)."""
    edge = (
        "mqctl.grpc.server",
        "mqctl.grpc.convert",
        "mqctl.remoting",
        "mqctl.client",
        "mqctl.api",
        "mqctl.admin",
        "mqctl.cli",
        "mqctl.serve",
        "mqctl.sim",
        "mqctl.dsim",
        "mqctl.broker",
    )
    for module, imported in _mqctl_imports().items():
        if not (module.startswith("mqctl.controller.") or module == "mqctl.methods") or module.startswith(
            edge[:2]
        ):
            continue
        wrong = [
            f"{name} ({where})"
            for name, where in imported.items()
            if any(name == e or name.startswith(e + ".") for e in edge)
        ]
        assert not wrong, f"{module} imports {wrong}"


def test_the_transports_do_not_import_each_other() -> None:
    """gRPC and remoting sit side by side: what both need (PEM files, TLS contexts, the token) is
    mqctl.auth's, so neither imports the other."""
    other = {"mqctl.grpc": "mqctl.remoting", "mqctl.remoting": "mqctl.grpc"}
    for module, imported in _mqctl_imports().items():
        for mine, theirs in other.items():
            if module.startswith(mine + "."):
                wrong = [
                    f"{n} ({w})" for n, w in imported.items() if n == theirs or n.startswith(theirs + ".")
                ]
                assert not wrong, f"{module} imports {wrong}"


def test_test_module_names_are_unique() -> None:
    """The test directories are not packages: pytest imports each test module by its file name, and
    stops collecting the whole suite at the second module of one name."""
    names = Counter(p.name for p in (ROOT / "tests").rglob("test_*.py"))
    assert [n for n, c in names.items() if c > 1] == []


# A module name used in more than one package, and the one thing it means in each (issue 34: cockpit.py,
# epochs.py, liveness.py and security.py had meant different things in different folders).
SHARED_MODULE_NAMES = {
    "client.py": "a transport's controller client (gRPC: mqctl/, remoting: mqctl/remoting/)",
    "server.py": "a transport's server (mqctl/grpc/, mqctl/remoting/)",
    "config.py": "the settings of the package's process (the broker agent's, `mqctl serve`'s)",
    "errors.py": "the exit codes and the exception of the package",
    "metadata.py": "the broker's metadata files (read: store/, compared and restored: recover/)",
    "quorum.py": "the controller group's membership (seen: admin/, its change rules: controller/)",
}


def test_a_module_name_means_one_thing() -> None:
    """Two modules of one name must be the same kind of thing (above), so that a name read in a
    traceback or an import says what the file holds; a new name used twice is added with its meaning."""
    skip = {"__init__.py", "__main__.py"}
    names = Counter(
        p.name for p in (ROOT / "mqctl").rglob("*.py") if p.name not in skip and "v1" not in p.parts
    )
    repeated = {n for n, c in names.items() if c > 1}
    assert repeated - SHARED_MODULE_NAMES.keys() == set(), "a module name used twice: rename one or say why"
    assert SHARED_MODULE_NAMES.keys() - repeated == set(), "no longer repeated: drop it from the list"
