"""`loom deployments drift NAME` and `loom deployments payloads NAME`: what a deployment's
monitoring found."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.table import Table

from loom.cli.common import client, console
from loom.cli.output import Format, OutputOpt, emit


def register(app: typer.Typer) -> None:
    app.command("drift")(drift)
    app.command("payloads")(payloads)


def drift(
    name: Annotated[str, typer.Argument(help="the deployment")],
    limit: Annotated[int, typer.Option(min=1, max=1000, help="windows shown")] = 20,
    fmt: OutputOpt = Format.TABLE,
) -> None:
    """Whether the deployment's requests drift from the version's reference data: the last
    window's verdict, then each window (newest first)."""
    with client() as loom:
        found = loom.deployment_drift(name, limit=limit)
    emit(fmt, found, lambda wide: _drift_table(found, wide))


def _drift_table(found: dict[str, Any], wide: bool) -> Table | None:
    if not found["history"]:
        status = ((found.get("monitoring") or {}).get("status") or {}).get("state") or "off"
        console.print(f"{found['deployment']}: no window tested yet (detector {status})")
        return None
    verdict = "[red]DRIFT[/red]" if found["drift"] else "[green]no drift[/green]"
    features = f" in {', '.join(found['features'])}" if found["features"] else ""
    console.print(
        f"{found['deployment']} (version {found['version']}): {verdict}{features}; "
        f"score {found['score']:.3f}, p-value {found['p_value']:.2g}, window {found['window']}"
    )
    table = Table("TESTED", "VERSION", "DRIFT", "SCORE", "P-VALUE", "SAMPLES", "OUTLIERS",
                  "FEATURES")  # fmt: skip
    for window in found["history"]:
        features = ", ".join(window["features"])
        table.add_row(
            _ago(window["at"]),
            str(window["version"]),
            "yes" if window["drift"] else "no",
            f"{window['score']:.3f}",
            f"{window['p_value']:.2g}",
            str(window["window"]),
            str(window["outliers"]),
            features if wide else features[:40],
        )
    return table


def payloads(
    name: Annotated[str, typer.Argument(help="the deployment")],
    version: Annotated[int | None, typer.Option(help="only this model version's")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    outliers: Annotated[bool, typer.Option("--outliers", help="the flagged requests")] = False,
    fmt: OutputOpt = Format.TABLE,
) -> None:
    """The logged payloads (a sample of requests and responses), or the flagged outliers."""
    with client() as loom:
        found = loom.deployment_payloads(name, version=version, limit=limit, outliers=outliers)

    def table(wide: bool) -> Table:
        shown = Table("TIME", "VERSION", *(("SCORE",) if outliers else ("STATUS", "MS")),
                      "REQUEST")  # fmt: skip
        for record in found:
            request = str(record.get("request", ""))
            row = [_ago(float(record.get("time") or 0)), str(record.get("version"))]
            if outliers:
                row.append(f"{record.get('score', 0):.3g}")
            else:
                row += [str(record.get("status")), str(record.get("ms"))]
            shown.add_row(*row, request if wide else request[:60])
        return shown

    emit(fmt, found, table)


def _ago(at: float) -> str:
    seconds = max(0.0, time.time() - at)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))
