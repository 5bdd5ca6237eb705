"""The `loom` command.

Its commands are registered lazily: `loom list` imports the jobs commands and the client, not
the manifest's schema, the pipelines' DSL or the charts, so that a command starts at once
(`python -X importtime -m loom list` shows what it loads). `--help` and a mistyped command
still see every command; `app` is the whole command, built on first use, for tests and
`typer` tooling."""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

import loom

if TYPE_CHECKING:
    from collections.abc import Iterable

# name → (module, attribute, "command" or "group"), in the order `loom --help` lists them
COMMANDS: dict[str, tuple[str, str, str]] = {
    "server": ("loom.cli.server", "server", "command"),
    "serve": ("loom.cli.server", "serve", "command"),
    "train": ("loom.cli.jobs", "train", "command"),
    "list": ("loom.cli.jobs", "list_jobs", "command"),
    "show": ("loom.cli.jobs", "show", "command"),
    "logs": ("loom.cli.jobs", "logs", "command"),
    "halt": ("loom.cli.jobs", "halt", "command"),
    "resume": ("loom.cli.jobs", "resume", "command"),
    "capacity": ("loom.cli.jobs", "capacity", "command"),
    "delete": ("loom.cli.jobs", "delete", "command"),
    "download": ("loom.cli.jobs", "download", "command"),
    "loglines": ("loom.cli.ffdl", "loglines", "command"),
    "emetrics": ("loom.cli.ffdl", "emetrics", "command"),
    "version": ("loom.cli.ffdl", "version", "command"),
    "metrics": ("loom.cli.metrics", "metrics", "command"),
    "users": ("loom.cli.users", "app", "group"),
    "models": ("loom.cli.models", "app", "group"),
    "deploy": ("loom.cli.deployments", "deploy", "command"),
    "deployments": ("loom.cli.deployments", "app", "group"),
    "graphs": ("loom.cli.graphs", "app", "group"),
    "experiments": ("loom.cli.experiments", "app", "group"),
    "runs": ("loom.cli.runs", "app", "group"),
    "pipelines": ("loom.cli.pipelines", "app", "group"),
    "kubernetes": ("loom.cli.kubernetes", "app", "group"),
    "admin": ("loom.cli.admin", "app", "group"),
    "tokens": ("loom.cli.tokens", "app", "group"),
    "context": ("loom.cli.contexts", "app", "group"),
    "audit": ("loom.cli.audit", "audit", "command"),
    "apply": ("loom.cli.objects", "apply", "command"),
    "get": ("loom.cli.objects", "get", "command"),
}
# the top-level options that take a value (what precedes the command's name)
VALUED = frozenset({"--cacert", "--url", "--token", "--context"})


def _version(asked: bool) -> None:
    if asked:
        typer.echo(f"loom {loom.__version__}")
        raise typer.Exit()


def options(
    cacert: Annotated[
        str | None,
        typer.Option(
            "--cacert",
            envvar="LOOM_CA_BUNDLE",
            help="CA bundle (PEM) that the platform's HTTPS certificate is checked against",
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", envvar="LOOM_URL", help="the platform's address (else LOOM_URL)"),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option("--token", envvar="LOOM_TOKEN", help="your API token (else LOOM_TOKEN)"),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option("--context", envvar="LOOM_CONTEXT", help="a named context (loom context)"),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print Loom's version and exit"
        ),
    ] = False,
) -> None:
    """Loom: submit, run and follow deep-learning training jobs; serve their models."""
    for name, value in (("LOOM_URL", url), ("LOOM_TOKEN", token), ("LOOM_CONTEXT", context)):
        if value:
            os.environ[name] = value  # what every client of this command uses
    if cacert:
        os.environ["LOOM_CA_BUNDLE"] = cacert  # what every client of this command trusts


def build(names: Iterable[str] | None = None) -> typer.Typer:
    """The `loom` command with the named commands (all of them when None)."""
    built = typer.Typer(
        help="Loom: submit, run and follow deep-learning training jobs; serve their models.",
        no_args_is_help=True,
    )
    built.callback()(options)
    wanted = COMMANDS if names is None else [n for n in COMMANDS if n in set(names)]
    for name in wanted:
        module, attribute, kind = COMMANDS[name]
        found = getattr(importlib.import_module(module), attribute)
        if kind == "group":
            built.add_typer(found, name=name)
        else:
            built.command(name)(found)
    return built


def command_named(argv: list[str]) -> str | None:
    """The command `argv` (the arguments after `loom`) runs, when it names a known one;
    None for `--help`, no command or an unknown one (those need every command)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in VALUED:
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in COMMANDS else None
        elif arg in ("--help", "--install-completion", "--show-completion"):
            return None
    return None


def __getattr__(name: str) -> Any:
    if name == "app":  # the whole command, built when first asked for
        whole = build()
        globals()["app"] = whole
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:  # nothing to parse: no command to build
        print(f"loom {loom.__version__}")
        return
    named = command_named(argv)
    completing = any(k.startswith("_LOOM_COMPLETE") for k in os.environ)  # the shell asks
    build([named] if named and not completing else None)()


if __name__ == "__main__":
    main()
