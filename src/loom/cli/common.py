"""What every command shares: the client, error output."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from rich.console import Console

from loom.client import ClientError, LoomClient

console = Console()
err = Console(stderr=True)


@contextmanager
def client() -> Iterator[LoomClient]:
    """A client from `LOOM_URL`/`LOOM_TOKEN` or `LOOM_HOME`; errors end the command cleanly."""
    try:
        with LoomClient.from_env() as found:
            check_dlaas_username(found)
            yield found
    except ClientError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from exc


def check_dlaas_username(found: LoomClient) -> None:
    """FfDL's CLI named its user in DLAAS_USERNAME beside the password (here a Loom token): a
    name that is not the token's user is refused, as the platform's FfDL API refuses it."""
    name = os.environ.get("DLAAS_USERNAME")
    if not name or os.environ.get("LOOM_TOKEN") or not os.environ.get("DLAAS_PASSWORD"):
        return
    holder = found.me().get("name")
    if holder != name:
        raise ClientError(f"DLAAS_USERNAME is {name!r}, but DLAAS_PASSWORD is {holder!r}'s token")


def run(action: Callable[[LoomClient], Any]) -> Any:
    with client() as found:
        return action(found)
