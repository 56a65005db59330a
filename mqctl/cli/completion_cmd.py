"""`mqctl completion show|install [bash|zsh|fish]`: the shell completion scripts (the same text as
completions/ in the repository, made by typer), printed or installed where each shell looks; `install`
writes the man pages (man/man1/ in the repository) where `man` looks too."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import typer

from mqctl.cli import sub_app
from mqctl.errors import StoreError, UsageError

completion_app = sub_app("completion", "Shell completion for bash, zsh and fish: print it or install it.")

SHELLS = ("bash", "zsh", "fish")
_SHELL_HELP = "bash, zsh or fish [default: the login shell, $SHELL]"


def _shell(shell: str | None) -> str:

    name = shell or Path(os.environ.get("SHELL", "")).name
    if name not in SHELLS:
        raise UsageError(
            f"shell {name or '(unknown: $SHELL is not set)'!r} is not one of "
            f"{', '.join(SHELLS)}; name it: mqctl completion install bash"
        )
    return name


def target(shell: str, home: Path) -> Path:
    """Where the shell loads completions from, per user, without editing a start-up file (zsh: a
    directory that must be on $fpath; `install` says so)."""
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local/share")
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return {
        "bash": data / "bash-completion/completions/mqctl",
        "zsh": home / ".zfunc/_mqctl",
        "fish": config / "fish/completions/mqctl.fish",
    }[shell]


def man_dirs(home: Path) -> list[Path]:
    """Where `man mqctl` finds the pages, best first. man-db looks in ``../share/man`` of every
    directory on $PATH, so the pages go next to the mqctl being run: ``<prefix>/share/man/man1`` for
    ``<prefix>/bin/mqctl`` (a venv, pipx's and pip --user's ~/.local/bin). Then ~/.local/share/man,
    for an mqctl in a directory this user cannot write (a system-wide install)."""
    exe = Path(sys.argv[0]) if Path(sys.argv[0]).name == "mqctl" else None
    if exe is None:  # python -m mqctl
        found = shutil.which("mqctl")
        exe = Path(found) if found else Path(sys.executable).with_name("mqctl")
    prefix = Path(os.path.abspath(exe)).parent.parent  # not resolved: pipx's ~/.local/bin/mqctl is a link
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local/share")
    return list(dict.fromkeys([prefix / "share/man/man1", data / "man/man1"]))


def _install_man_pages(home: Path) -> Path:
    from mqctl.cli.gendocs import PROG, man_pages  # lazy: start-up

    pages = man_pages()
    problem = ""
    for d in man_dirs(home):
        try:
            d.mkdir(parents=True, exist_ok=True)
            for old in d.glob(f"{PROG}*.1"):  # pages of removed commands must not linger
                if old.name not in pages:
                    old.unlink()
            for name, text in pages.items():
                (d / name).write_text(text, encoding="utf-8")
        except OSError as exc:
            problem = problem or f"{d}: cannot write: {exc.strerror or exc}"
            continue
        return d
    raise StoreError(problem)


@completion_app.command("show")
def show_cmd(
    shell: str = typer.Argument(None, metavar="SHELL", help=_SHELL_HELP),
) -> None:
    """Print the completion script (e.g. `source <(mqctl completion show bash)`)."""
    from mqctl.cli.gendocs import completion  # lazy: start-up

    typer.echo(completion(_shell(shell)), nl=False)


@completion_app.command("install")
def install_cmd(
    shell: str = typer.Argument(None, metavar="SHELL", help=_SHELL_HELP),
) -> None:
    """Install shell completion and the man pages for this user.

    The completion script goes where the shell finds it (a new shell loads it); the man pages next to
    this mqctl, in its ../share/man, which `man` searches while its bin directory is on $PATH (else
    ~/.local/share/man)."""
    from mqctl.cli.gendocs import completion  # lazy: start-up

    name = _shell(shell)
    path = target(name, Path.home())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(completion(name), encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None
    typer.echo(f"wrote {path}")
    if name == "zsh":
        typer.echo(
            f"zsh loads it when {path.parent} is on $fpath before compinit; in ~/.zshrc:\n"
            f"  fpath=({path.parent} $fpath); autoload -Uz compinit; compinit"
        )
    else:
        typer.echo("a new shell completes mqctl")
    man = _install_man_pages(Path.home())
    typer.echo(
        f"wrote the man pages to {man}: man mqctl finds them while {man.parent.parent.parent / 'bin'} "
        f"is on $PATH (or with MANPATH={man.parent}:)"
    )
