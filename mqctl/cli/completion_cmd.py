"""`mqctl completion show|install [bash|zsh|fish]`: the shell completion scripts (the same text as
completions/ in the repository, made by typer), printed or installed where each shell looks."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from mqctl.cli import sub_app

completion_app = sub_app("completion", "Shell completion for bash, zsh and fish: print it or install it.")

SHELLS = ("bash", "zsh", "fish")
_SHELL_HELP = "bash, zsh or fish [default: the login shell, $SHELL]"


def _shell(shell: str | None) -> str:
    from mqctl.errors import UsageError

    name = shell or Path(os.environ.get("SHELL", "")).name
    if name not in SHELLS:
        raise UsageError(f"shell {name or '(unknown: $SHELL is not set)'!r} is not one of "
                         f"{', '.join(SHELLS)}; name it: mqctl completion install bash")
    return name


def target(shell: str, home: Path) -> Path:
    """Where the shell loads completions from, per user, without editing a start-up file (zsh: a
    directory that must be on $fpath; `install` says so)."""
    data = Path(os.environ.get("XDG_DATA_HOME") or home / ".local/share")
    config = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return {"bash": data / "bash-completion/completions/mqctl",
            "zsh": home / ".zfunc/_mqctl",
            "fish": config / "fish/completions/mqctl.fish"}[shell]


@completion_app.command("show")
def show_cmd(
    shell: str = typer.Argument(None, metavar="SHELL", help=_SHELL_HELP),
) -> None:
    """Print the completion script (e.g. `source <(mqctl completion show bash)`)."""
    from mqctl.cli.gendocs import completion

    typer.echo(completion(_shell(shell)), nl=False)


@completion_app.command("install")
def install_cmd(
    shell: str = typer.Argument(None, metavar="SHELL", help=_SHELL_HELP),
) -> None:
    """Write the completion script where the shell finds it for this user (a new shell loads it)."""
    from mqctl.cli.gendocs import completion
    from mqctl.errors import StoreError

    name = _shell(shell)
    path = target(name, Path.home())
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(completion(name), encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"{path}: cannot write: {exc.strerror or exc}") from None
    typer.echo(f"wrote {path}")
    if name == "zsh":
        typer.echo(f"zsh loads it when {path.parent} is on $fpath before compinit; in ~/.zshrc:\n"
                   f"  fpath=({path.parent} $fpath); autoload -Uz compinit; compinit")
    else:
        typer.echo("a new shell completes mqctl")
