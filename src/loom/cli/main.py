"""The `loom` command."""

from __future__ import annotations

import typer

from loom.cli import admin, deployments, jobs, models, tokens, users
from loom.cli.audit import audit
from loom.cli.metrics import metrics
from loom.cli.server import serve, server

app = typer.Typer(
    help="Loom: submit, run and follow deep-learning training jobs; serve their models.",
    no_args_is_help=True,
    add_completion=False,
)
app.command()(server)
app.command()(serve)
jobs.register(app)
app.command()(metrics)
app.add_typer(users.app, name="users")
app.add_typer(models.app, name="models")
app.command()(deployments.deploy)
app.add_typer(deployments.app, name="deployments")
app.add_typer(admin.app, name="admin")
app.add_typer(tokens.app, name="tokens")
app.command()(audit)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
