"""`loom users add|list|quota|delete|tokens|revoke-token`."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from loom.cli.common import client, console
from loom.cli.output import Format, OutputOpt, emit, whole
from loom.cli.tokens import token_table

app = typer.Typer(help="Manage users (admins only).", no_args_is_help=True)


@app.command("add")
def add(name: str, admin: Annotated[bool, typer.Option("--admin")] = False) -> None:
    """Create a user and print its token (shown this once)."""
    with client() as loom:
        user = loom.add_user(name, admin=admin)
    console.print(f"created user [bold]{user['name']}[/bold]")
    console.print(f"token: {user['token']}", highlight=False, soft_wrap=True)
    console.print(f"(token id {user['token_id']}, expires {user['expires_at'] or 'never'})")
    console.print("give it to the user; it is not shown again (export LOOM_TOKEN=...)")


@app.command("quota")
def quota(
    name: str,
    cpus: Annotated[float | None, typer.Option(help="CPUs of running jobs")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs of running jobs")] = None,
    jobs: Annotated[int | None, typer.Option(help="running jobs")] = None,
    max_priority: Annotated[int | None, typer.Option(help="highest job priority")] = None,
) -> None:
    """Set a user's quota; options left out go back to the platform's default."""
    with client() as loom:
        user = loom.set_quota(name, cpus=cpus, gpus=gpus, jobs=jobs, max_priority=max_priority)
    console.print(f"{user['name']}: quota {user['quota']}")


@app.command("list")
def list_users(fmt: OutputOpt = Format.TABLE) -> None:
    """List users."""
    with client() as loom:
        users = loom.users()
    emit(fmt, users, lambda _wide: _users_table(users))


def _users_table(users: list[dict[str, Any]]) -> Table:
    table = Table(whole("NAME", [u["name"] for u in users]), "ADMIN", "CREATED")
    for user in users:
        table.add_row(user["name"], "yes" if user["admin"] else "", user["created_at"])
    return table


@app.command("delete")
def delete(
    name: str,
    force: Annotated[
        bool, typer.Option("--force", help="stop their running jobs and deployments first")
    ] = False,
) -> None:
    """Delete a user with their jobs, models and deployments; their tokens stop at once."""
    with client() as loom:
        gone = loom.delete_user(name, force=force)
    console.print(
        f"deleted user [bold]{name}[/bold] with {gone['jobs']} jobs, "
        f"{gone['models']} models and {gone['deployments']} deployments"
    )


@app.command("tokens")
def tokens(name: str) -> None:
    """List a user's tokens (not revoked ones, nor their jobs' learner tokens)."""
    with client() as loom:
        console.print(token_table(loom.user_tokens(name)))


@app.command("revoke-token")
def revoke_token(name: str, token_id: str) -> None:
    """Revoke one of a user's tokens: it stops working now."""
    with client() as loom:
        loom.revoke_user_token(name, token_id)
    console.print(f"revoked token {token_id} of {name}")
