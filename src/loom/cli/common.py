"""What every command shares: the client, error output."""

from __future__ import annotations

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
            yield found
    except ClientError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from exc


def run(action: Callable[[LoomClient], Any]) -> Any:
    with client() as found:
        return action(found)
