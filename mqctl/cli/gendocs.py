"""Generate shell completions, man pages and docs/cli.md from the CLI itself.

``python -m mqctl.cli.gendocs [--out DIR]`` (``tools/gen-docs``) writes, under DIR (the repository
root by default):

* ``completions/mqctl.bash``, ``_mqctl`` (zsh), ``mqctl.fish``: typer's completion scripts (the same
  text ``_MQCTL_COMPLETE=source_bash mqctl`` prints);
* ``man/man1/mqctl.1`` and one page per command (``mqctl-getSyncStateSet.1``,
  ``mqctl-quorum-status.1``, ...), every option with its help, default and environment variable,
  written by the small roff writer below (click-man does not work with typer 0.29);
* ``docs/cli.md``: the same reference in Markdown;
* the method tables of ``docs/grpc-api.md`` and ``docs/remoting.md``, from the method table
  (``mqctl/methods.py``), between ``<!-- BEGIN GENERATED ... -->``/``<!-- END GENERATED ... -->``
  markers (the rest of those files is hand-written and kept as it is).

Output is deterministic (no dates), so a test can regenerate it and compare with the committed files.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer.main
from typer._completion_shared import get_completion_script

from mqctl.cli import app

REPO = Path(__file__).resolve().parents[2]
PROG = "mqctl"
COMPLETE_VAR = "_MQCTL_COMPLETE"
SHELLS = ("bash", "zsh", "fish")

EXIT_CODES = [
    (0, "success"),
    (1, "unexpected internal error (run with --debug for the traceback)"),
    (
        2,
        "usage error, or an operation refused before it starts (bad flag, missing --accept-data-loss, "
        "busy port)",
    ),
    (
        3,
        "refused by the controller (its code and remark are printed), or by mqctl's guard "
        "(cleanBrokerMetadata of a live broker without -l, switchover --require-metadata to a replica "
        "that lacks metadata)",
    ),
    (4, "a store file is missing or corrupt (the message names the file and offset)"),
    (5, "not found: the broker set, cluster or broker id does not exist"),
    (6, "controller unreachable or no leader, or a broker service that does not answer"),
    (7, "unhealthy: quorum status found a node down, no quorum, or differing state hashes"),
    (130, "interrupted"),
]

ENVIRONMENT = [
    ("MQCTL_CONTROLLER", "default controller addresses for -a/--controller-addr"),
    ("MQCTL_TOKEN", "bearer token for admin calls (--token)"),
    ("MQCTL_TLS_CA, MQCTL_TLS_CERT, MQCTL_TLS_KEY", "client TLS files"),
    ("MQCTL_TIMEOUT", "the whole command's deadline in seconds (--timeout)"),
    ("MQCTL_DEBUG", "show tracebacks (--debug)"),
    ("NO_COLOR", "no colours in tables (JSON and YAML are never coloured)"),
]


def version() -> str:
    try:
        from importlib.metadata import version as dist_version  # lazy: start-up

        return dist_version("mqctl")
    except Exception:  # not installed
        return "0"


def root_command() -> Any:

    return typer.main.get_command(app)


def walk(cmd: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """(path, command) for the root and every visible subcommand, depth first, sorted by name."""
    yield path, cmd
    subs = getattr(cmd, "commands", None) or {}
    for name in sorted(subs, key=str.lower):
        sub = subs[name]
        if getattr(sub, "hidden", False):
            continue
        yield from walk(sub, (*path, name))


def aliases(cmd: Any) -> dict[str, list[str]]:
    """Visible command name -> hidden alias names of the same callback (kebab-case aliases)."""
    subs = getattr(cmd, "commands", None) or {}
    out: dict[str, list[str]] = {}
    for name, sub in subs.items():
        if getattr(sub, "hidden", False):
            for vis_name, vis in subs.items():
                if not getattr(vis, "hidden", False) and vis.callback is sub.callback:
                    out.setdefault(vis_name, []).append(name)
    return out


def _records(path: tuple[str, ...], cmd: Any) -> list[tuple[str, str]]:
    ctx = cmd.context_class(cmd, info_name=" ".join((PROG, *path)))
    out = []
    for param in cmd.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        rec = param.get_help_record(ctx)
        if rec is None:  # an argument
            name = (param.metavar or param.name or "").upper()
            help_text = getattr(param, "help", "") or ""
            rec = (name, help_text + ("" if getattr(param, "required", False) else "  [optional]"))
        out.append((rec[0], rec[1] or ""))
    return out


def _usage(path: tuple[str, ...], cmd: Any) -> str:
    ctx = cmd.context_class(cmd, info_name=" ".join((PROG, *path)))
    pieces = cmd.collect_usage_pieces(ctx)
    return " ".join([PROG, *path, *pieces])


def _subcommands(cmd: Any) -> list[tuple[str, Any]]:
    subs = getattr(cmd, "commands", None) or {}
    return [(n, subs[n]) for n in sorted(subs, key=str.lower) if not getattr(subs[n], "hidden", False)]


def _help(cmd: Any) -> str:
    text = (cmd.help or "").strip()
    return re.sub(r"\n\s*\n", "\n\n", text)


# --- roff ---------------------------------------------------------------------------------------


def roff_escape(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    lines = []
    for line in text.split("\n"):
        if line.startswith((".", "'")):
            line = "\\&" + line
        lines.append(line)
    return "\n".join(lines)


def _paragraphs(text: str) -> list[str]:
    return [p.replace("\n", " ").strip() for p in text.split("\n\n") if p.strip()]


def man_page(path: tuple[str, ...], cmd: Any, root: Any) -> str:
    name = "-".join((PROG, *path))
    ver = version()
    out = [f'.TH "{name.upper()}" "1" "" "{PROG} {ver}" "mqctl manual"', ".SH NAME"]
    summary = _paragraphs(_help(cmd))[:1] or [""]
    out.append(f"{roff_escape(name)} \\- {roff_escape(summary[0])}")
    out += [".SH SYNOPSIS", ".B " + roff_escape(_usage(path, cmd))]
    paras = _paragraphs(_help(cmd))
    if paras:
        out.append(".SH DESCRIPTION")
        for i, p in enumerate(paras):
            if i:
                out.append(".PP")
            out.append(roff_escape(p))
    subs = _subcommands(cmd)
    if subs:
        out.append(".SH COMMANDS")
        al = aliases(cmd)
        for n, c in subs:
            out.append(".TP")
            extra = f" (alias: {', '.join(al[n])})" if n in al else ""
            out.append(f"\\fB{roff_escape(n)}\\fR{roff_escape(extra)}")
            out.append(roff_escape((_paragraphs(_help(c))[:1] or [""])[0]))
            out.append(f"See \\fB{roff_escape('-'.join((PROG, *path, n)))}\\fR(1).")
    records = _records(path, cmd)
    if records:
        out.append(".SH OPTIONS")
        for opt, help_text in records:
            out += [".TP", f"\\fB{roff_escape(opt)}\\fR", roff_escape(" ".join(help_text.split()))]
    if not path:
        out.append(".SH EXIT STATUS")
        for code, meaning in EXIT_CODES:
            out += [".TP", f"\\fB{code}\\fR", roff_escape(meaning)]
        out.append(".SH ENVIRONMENT")
        for var, meaning in ENVIRONMENT:
            out += [".TP", f"\\fB{roff_escape(var)}\\fR", roff_escape(meaning)]
    out.append(".SH SEE ALSO")
    if path:
        out.append(f"\\fB{PROG}\\fR(1)")
    else:
        pages = ["-".join((PROG, *p)) for p, _ in walk(root) if p]
        out.append(", ".join(f"\\fB{roff_escape(p)}\\fR(1)" for p in pages))
    return "\n".join(out) + "\n"


# --- markdown -----------------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def markdown(root: Any) -> str:
    out = [
        "# CLI reference",
        "",
        "Generated from the code by `tools/gen-docs` (do not edit; a test checks it is up to date).",
        "Exit codes: see [codes.md](codes.md); output documents: [admin.md](admin.md).",
        "",
    ]
    for path, cmd in walk(root):
        title = " ".join((PROG, *path))
        out += [f"{'#' * min(2 + len(path), 4)} `{title}`", ""]
        help_text = _help(cmd)
        if help_text:
            out += [help_text, ""]
        out += ["```", _usage(path, cmd), "```", ""]
        al = aliases(cmd)
        subs = _subcommands(cmd)
        if subs:
            out += ["| command | alias | summary |", "|---|---|---|"]
            for n, c in subs:
                out.append(
                    f"| `{n}` | {', '.join(f'`{a}`' for a in al.get(n, [])) or ''} | "
                    f"{_md((_paragraphs(_help(c))[:1] or [''])[0])} |"
                )
            out.append("")
        records = _records(path, cmd)
        if records:
            out += ["| option | description |", "|---|---|"]
            for opt, h in records:
                cell = opt.replace("|", "\\|")  # GFM: a pipe inside a table cell, code spans too
                out.append(f"| `{cell}` | {_md(' '.join(h.split()))} |")
            out.append("")
    return "\n".join(out)


# --- the method tables (mqctl/methods.py) ---------------------------------------------------------


def _rpc_cell(row: Any) -> str:
    kind = " (bidirectional stream)" if row.client_streaming else " (server stream)" if row.streaming else ""
    return f"`{row.grpc_method}`{kind}"


def _code_cell(row: Any) -> str:
    if row.code is None:
        return "none (mqctl extension)"
    return f"{row.code_name} {row.code}" + ("" if row.remoting else " (the controller pushes it)")


def grpc_methods_table() -> str:
    """docs/grpc-api.md: every RPC of mqctl.v1.Controller."""
    from mqctl import methods  # lazy: start-up

    out = [
        "| RPC | RocketMQ request code | answered by | sent by | token | retried | what it does |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in methods.METHODS:
        retried = (
            "each beat: yes"
            if row.client_streaming
            else "resubscribes"
            if row.streaming
            else "yes"
            if row.retry_any
            else "if surely not sent"
        )
        out.append(
            f"| {_rpc_cell(row)} | {_code_cell(row)} | {row.where} | {row.caller.value} | "
            f"{row.token.value} | {retried} | {_md(row.doc)} |"
        )
    return "\n".join(out)


def remoting_methods_table() -> str:
    """docs/remoting.md: the request codes `mqctl serve --remoting-port` serves."""
    from mqctl import methods  # lazy: start-up

    out = [
        "| code | RocketMQ name | NodeAPI method | answered by | token | body |",
        "|---|---|---|---|---|---|",
    ]
    for code, row in sorted(methods.BY_REMOTING_CODE.items()):
        out.append(
            f"| {code} | {row.code_name} | {row.name} | {row.where} | {row.token.value} | "
            f"{_md(row.remoting_body)} |"
        )
    return "\n".join(out)


def short_options_table(root: Any = None) -> str:
    """docs/admin.md: every short option of every command, with its long names (mqadmin's letters
    are kept where a command has mqadmin's name: `electMaster -b` is a broker id)."""
    root = root if root is not None else root_command()
    rows: dict[tuple[str, str], list[str]] = {}
    for path, cmd in walk(root):
        if not path:
            continue
        for p in getattr(cmd, "params", []):
            opts = [*getattr(p, "opts", []), *getattr(p, "secondary_opts", [])]
            shorts = [o for o in opts if len(o) == 2 and o.startswith("-") and o != "-h"]
            if not shorts:
                continue
            longs = ", ".join(f"`{o}`" for o in opts if o.startswith("--"))
            for s in shorts:
                rows.setdefault((s, longs), []).append(" ".join(path))
    out = ["| short | long | commands |", "|---|---|---|"]
    for (short, longs), cmds in sorted(rows.items(), key=lambda kv: (kv[0][0].lower(), *kv[0])):
        names = ", ".join(f"`{c}`" for c in sorted(set(cmds), key=str.lower))
        out.append(f"| `{short}` | {longs} | {names} |")
    return "\n".join(out)


# Hand-written docs with a generated block: path -> (block name, generator, what it is written from).
SPLICED = {
    "docs/grpc-api.md": ("methods-grpc", grpc_methods_table, "mqctl/methods.py"),
    "docs/remoting.md": ("methods-remoting", remoting_methods_table, "mqctl/methods.py"),
    "docs/admin.md": ("short-options", short_options_table, "the CLI"),
}


def splice(text: str, name: str, block: str, where: str = "", source: str = "mqctl/methods.py") -> str:
    """Replace what lies between the BEGIN/END GENERATED markers called ``name`` with ``block``."""
    begin = f"<!-- BEGIN GENERATED {name}: tools/gen-docs writes this from {source} -->"
    end = f"<!-- END GENERATED {name} -->"
    head, sep, rest = text.partition(begin)
    _, sep2, tail = rest.partition(end)
    if not sep or not sep2:
        raise ValueError(f"{where or 'the text'} has no {begin!r} ... {end!r} block")
    return f"{head}{begin}\n{block}\n{end}{tail}"


# --- completions --------------------------------------------------------------------------------


def completion(shell: str) -> str:

    return get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell).rstrip("\n") + "\n"


def man_pages(root: Any = None) -> dict[str, str]:
    """File name (``mqctl-getSyncStateSet.1``) -> text of every man page (`mqctl completion install`
    writes them too: they need nothing but the CLI)."""
    root = root if root is not None else root_command()
    return {f"{'-'.join((PROG, *path))}.1": man_page(path, cmd, root) for path, cmd in walk(root)}


def completion_file(shell: str) -> str:
    """Where each shell's script sits in the repository, named as the shell's vendor directory
    wants it (zsh autoloads `_mqctl` from site-functions), so the wheel installs it unrenamed."""
    return f"completions/_{PROG}" if shell == "zsh" else f"completions/{PROG}.{shell}"


def generate(repo: str | os.PathLike[str] | None = None) -> dict[str, str]:
    """Relative path -> content of every generated file. The docs with a generated block are read
    from ``repo`` (the repository by default)."""
    base = Path(repo) if repo is not None else REPO
    root = root_command()
    files: dict[str, str] = {}
    for shell in SHELLS:
        files[completion_file(shell)] = completion(shell)
    files.update({f"man/man1/{name}": text for name, text in man_pages(root).items()})
    files["docs/cli.md"] = markdown(root)
    for rel, (name, table, source) in SPLICED.items():
        files[rel] = splice((base / rel).read_text(encoding="utf-8"), name, table(), rel, source)
    return files


def write(out_dir: str | os.PathLike[str]) -> list[Path]:
    base = Path(out_dir)
    written = []
    man_dir = base / "man" / "man1"
    if man_dir.is_dir():  # pages of removed commands must not linger
        for old in man_dir.glob(f"{PROG}*.1"):
            old.unlink()
    for rel, text in generate().items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="gen-docs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(REPO), help="output root (default: the repository)")
    args = parser.parse_args(argv)
    for path in write(args.out):
        print(path)


if __name__ == "__main__":
    main()
