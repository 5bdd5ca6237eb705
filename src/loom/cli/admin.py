"""`loom admin rotate-key|new-key`: the platform's secret keys."""

from __future__ import annotations

import base64
import os

import typer

from loom.cli.common import client, console

app = typer.Typer(help="The platform's upkeep (admins only).", no_args_is_help=True)


@app.command("rotate-key")
def rotate_key() -> None:
    """Reseal every stored credential with a new current key."""
    with client() as loom:
        done = loom.rotate_secret_key()
    console.print(f"resealed the credentials of {done['resealed']} job(s) ({done['key_source']})")
    console.print(done["message"])


@app.command("new-key")
def new_key() -> None:
    """Print a new key for LOOM_SECRET_KEYS (32 random bytes, URL-safe base64, as Fernet's)."""
    print(base64.urlsafe_b64encode(os.urandom(32)).decode())
