"""`loom tokens list|create|revoke|rotate`: your own API tokens."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from loom.cli.common import client, console
from loom.cli.output import Format, OutputOpt, emit, minute, whole

app = typer.Typer(help="Your API tokens: list, create, revoke, rotate.", no_args_is_help=True)


def token_table(tokens: list[dict[str, Any]]) -> Table:
    ids = whole("ID", [t["id"] for t in tokens])
    table = Table(ids, "NAME", "CREATED", "EXPIRES (UTC)", "LAST USED", box=box.SIMPLE_HEAD)
    for column in table.columns:
        column.no_wrap = column.header != "NAME"
    for token in tokens:
        mark = " (expired)" if token["expired"] else (" (this one)" if token["current"] else "")
        when = (token["created_at"][:10], minute(token["expires_at"], "never"))
        table.add_row(token["id"], token["name"] + mark, *when, minute(token["last_used_at"]))
    return table


def print_new(made: dict[str, Any]) -> None:
    console.print(f"token [bold]{made['id']}[/bold] (expires {made['expires_at'] or 'never'}):")
    console.print(made["token"], highlight=False, soft_wrap=True)
    console.print("[dim]shown this once; export LOOM_TOKEN=... to use it[/dim]")


@app.command("list")
def list_tokens(fmt: OutputOpt = Format.TABLE) -> None:
    """List your tokens (not revoked ones, nor your jobs' learner tokens)."""
    with client() as loom:
        tokens = loom.tokens()
    emit(fmt, tokens, lambda _wide: token_table(tokens))


@app.command("create")
def create(
    name: Annotated[str, typer.Option(help="what the token is for")] = "",
    ttl_days: Annotated[float | None, typer.Option(help="lifetime; default the platform's")] = None,
) -> None:
    """Make a new token and print it, this once."""
    with client() as loom:
        print_new(loom.create_token(name, ttl_days))


@app.command("revoke")
def revoke(token_id: Annotated[str, typer.Argument(help="the token's ID from `list`")]) -> None:
    """Revoke one of your tokens: it stops working now."""
    with client() as loom:
        loom.revoke_token(token_id)
    console.print(f"revoked token {token_id}")


@app.command("rotate")
def rotate(token_id: Annotated[str, typer.Argument(help="the token's ID from `list`")]) -> None:
    """Replace a token with a new one of the same name; the old one stops working now."""
    with client() as loom:
        print_new(loom.rotate_token(token_id))
