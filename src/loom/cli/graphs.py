"""`loom graphs create NAME FILE`: an inference graph of your deployments, from a KServe
InferenceGraph (YAML or JSON, the whole object or its spec). Shown and deleted as a deployment
(`loom deployments show|delete NAME`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from loom.cli.common import client, console, err
from loom.client import ClientError

app = typer.Typer(help="Inference graphs of your deployments (KServe's InferenceGraph).")


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="the graph's name (its endpoint's model name)")],
    file: Annotated[Path, typer.Argument(help="an InferenceGraph, YAML or JSON")],
    port: Annotated[int | None, typer.Option(help="endpoint port; default: a free one")] = None,
    public: Annotated[bool, typer.Option("--public", help="answer without a token")] = False,
) -> None:
    """Serve a graph (Sequence, Switch, Ensemble, Splitter nodes) at one endpoint."""
    try:
        document: Any = yaml.safe_load(file.read_text())
    except (OSError, yaml.YAMLError) as exc:
        err.print(f"[red]error:[/red] {file}: {exc}")
        raise typer.Exit(2) from None
    options: dict[str, Any] = {"public": public} | ({"port": port} if port else {})
    with client() as loom:
        try:
            found = loom.create_graph(name, document, **options)
        except ClientError as exc:
            err.print(f"[red]error:[/red] {exc.message}")
            raise typer.Exit(1) from None
    console.print(f"[bold]{found['name']}[/bold]: {found['state']} at {found['endpoint']}")
    for ignored in (found.get("graph") or {}).get("ignored", []):
        console.print(f"  ignored {ignored['field']}: {ignored['why']}")
