"""`loom audit`: the platform's audit log (admins only), newest first."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape

from loom.cli.common import client, console
from loom.cli.output import Format, JsonOpt, OutputOpt, chosen, emit


def line(event: dict[str, Any]) -> str:
    """One event as one line: when, who, what, to which object, how, from where."""
    at = event["at"][:19].replace("T", " ")
    target = f"{event['target']['kind']} {event['target']['id']}"
    detail = " ".join(f"{k}={json.dumps(v)}" for k, v in event["detail"].items())
    said = f"[dim]{at}[/dim] [bold]{escape(event['actor'])}[/bold] {event['action']} "
    return said + escape(f"{target} {detail} ({event['client']})")


def audit(
    actor: Annotated[str | None, typer.Option(help="only this user's actions")] = None,
    action: Annotated[str | None, typer.Option(help="e.g. job.halt, or token.* for a kind")] = None,
    since: Annotated[str | None, typer.Option(help="ISO-8601 time or epoch milliseconds")] = None,
    before_id: Annotated[int | None, typer.Option(help="page on from this event id")] = None,
    limit: Annotated[int, typer.Option(help="events per page")] = 50,
    fmt: OutputOpt = Format.TABLE,
    as_json: JsonOpt = False,
) -> None:
    """Show who did what, from where (admins only)."""
    with client() as loom:
        page = loom.audit(actor=actor, action=action, since=since, before_id=before_id, limit=limit)
    emit(chosen(fmt, as_json), page, lambda _wide: _lines(page))


def _lines(page: dict[str, Any]) -> None:
    for event in page["events"]:
        console.print(line(event), highlight=False, soft_wrap=True)
    if page["next_before_id"] is not None:
        console.print(f"[dim]more: loom audit --before-id {page['next_before_id']}[/dim]")
