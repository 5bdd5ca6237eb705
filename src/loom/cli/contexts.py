"""`loom context add|use|list|remove|current`: named platforms and tokens, as kube contexts."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from loom.cli.common import console, err
from loom.cli.output import Format, OutputOpt, emit, whole
from loom.client import contexts as store
from loom.client.errors import ClientError
from loom.client.identity import fetch as fetch_identity

T = TypeVar("T")

app = typer.Typer(
    help="Named contexts: which Loom and which token (kept in ~/.config/loom, mode 0600).",
    no_args_is_help=True,
)


def _said(action: Callable[[], T]) -> T:
    """The action's result; its error said on standard error, and the command ends."""
    try:
        return action()
    except ClientError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from exc


@app.command("add")
def add(
    name: str,
    url: Annotated[str, typer.Option("--url", help="http(s)://HOST:PORT of the platform")],
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="read the token from standard input")
    ] = False,
    use: Annotated[bool, typer.Option("--use", help="make it the current context")] = False,
    identity: Annotated[
        str | None,
        typer.Option(
            "--identity",
            help="the platform's public key (`identity` in its server.json); default: asked "
            "of the platform now and kept, so the token never goes to another server there",
        ),
    ] = None,
) -> None:
    """Add (or replace) a context; the first one added becomes the current one."""
    token = sys.stdin.readline().strip() if token_stdin else None
    key = identity
    if key is None:
        try:
            key = fetch_identity(url)
        except ClientError as exc:
            err.print(f"[yellow]note:[/yellow] {exc.message}; the context holds no identity key")
    _said(lambda: store.add(name, url, token, use=use, identity=key))
    held = " (with a token)" if token else ""
    console.print(f"context {name}: {url}{held}{'; identity kept' if key else ''}")


@app.command("use")
def use(name: str) -> None:
    """Make a context the current one."""
    _said(lambda: store.use(name))
    console.print(f"now using context {name}")


@app.command("remove")
def remove(name: str) -> None:
    _said(lambda: store.remove(name))
    console.print(f"context {name} removed")


@app.command("list")
def list_contexts(fmt: OutputOpt = Format.TABLE) -> None:
    """The contexts, the current one marked (tokens are never shown)."""
    found, current = _said(store.contexts)
    shown = [
        {"name": c.name, "url": c.url, "token": bool(c.token), "current": c.name == current}
        for c in found
    ]

    def table(_wide: bool) -> Table:
        out = Table(" ", whole("NAME", [c.name for c in found]), "URL", "TOKEN")
        for c in found:
            mark = "*" if c.name == current else ""
            out.add_row(mark, c.name, c.url, "yes" if c.token else "")
        return out

    emit(fmt, shown, table)


@app.command("current")
def current() -> None:
    """The context in use, if any."""
    context = _said(store.active)
    console.print(context.name if context else "(none: LOOM_URL, or the local server's home)")
