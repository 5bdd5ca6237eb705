"""`loom users add|list`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from loom.cli.common import client, console

app = typer.Typer(help="Manage users (admins only).", no_args_is_help=True)


@app.command("add")
def add(name: str, admin: Annotated[bool, typer.Option("--admin")] = False) -> None:
    """Create a user and print its token (shown this once)."""
    with client() as loom:
        user = loom.add_user(name, admin=admin)
    console.print(f"created user [bold]{user['name']}[/bold]")
    console.print(f"token: {user['token']}")
    console.print("give it to the user; it is not shown again (export LOOM_TOKEN=...)")


@app.command("quota")
def quota(
    name: str,
    cpus: Annotated[float | None, typer.Option(help="CPUs of running jobs")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs of running jobs")] = None,
    jobs: Annotated[int | None, typer.Option(help="running jobs")] = None,
) -> None:
    """Set a user's quota; options left out go back to the platform's default."""
    with client() as loom:
        user = loom.set_quota(name, cpus=cpus, gpus=gpus, jobs=jobs)
    console.print(f"{user['name']}: quota {user['quota']}")


@app.command("list")
def list_users() -> None:
    """List users."""
    with client() as loom:
        users = loom.users()
    table = Table("NAME", "ADMIN", "CREATED")
    for user in users:
        table.add_row(user["name"], "yes" if user["admin"] else "", user["created_at"])
    console.print(table)
