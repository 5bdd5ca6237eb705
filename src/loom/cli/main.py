"""The `loom` command."""

from __future__ import annotations

import os
from typing import Annotated

import typer

import loom
from loom.cli import (
    admin,
    contexts,
    deployments,
    experiments,
    ffdl,
    graphs,
    jobs,
    kubernetes,
    models,
    monitoring,
    objects,
    pipelines,
    runs,
    tokens,
    users,
)
from loom.cli.audit import audit
from loom.cli.metrics import metrics
from loom.cli.server import serve, server

app = typer.Typer(
    help="Loom: submit, run and follow deep-learning training jobs; serve their models.",
    no_args_is_help=True,
)


def _version(asked: bool) -> None:
    if asked:
        typer.echo(f"loom {loom.__version__}")
        raise typer.Exit()


@app.callback()
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


app.command()(server)
app.command()(serve)
jobs.register(app)
ffdl.register(app)
app.command()(metrics)
app.add_typer(users.app, name="users")
app.add_typer(models.app, name="models")
app.command()(deployments.deploy)
monitoring.register(deployments.app)
app.add_typer(deployments.app, name="deployments")
app.add_typer(graphs.app, name="graphs")
app.add_typer(experiments.app, name="experiments")
app.add_typer(runs.app, name="runs")
app.add_typer(pipelines.app, name="pipelines")
app.add_typer(kubernetes.app, name="kubernetes")
app.add_typer(admin.app, name="admin")
app.add_typer(tokens.app, name="tokens")
app.add_typer(contexts.app, name="context")
app.command()(audit)
app.command()(objects.apply)
app.command()(objects.get)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
