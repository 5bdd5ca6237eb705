"""`python -m loom.api`: the embedded platform (API + lifecycle), state under `LOOM_HOME`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from sqlalchemy.engine import make_url

from loom.api import listening
from loom.api.listening import listen_tcp
from loom.app import create_app
from loom.domain.errors import LoomError
from loom.settings import Settings
from loom.store.private import PRIVATE_UMASK, write_private


def main() -> None:
    parser = argparse.ArgumentParser(prog="loom server")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--certfile", type=Path, help="PEM certificate: serve HTTPS")
    parser.add_argument("--keyfile", type=Path, help="PEM private key of --certfile")
    parser.add_argument(
        "--launcher", choices=["local", "ray", "kubernetes"], help="where learners run"
    )
    parser.add_argument("--ray-address", help="the Ray cluster: auto or HOST:PORT")
    args = parser.parse_args()
    os.umask(PRIVATE_UMASK)  # what the platform and its learners create is theirs alone
    given = {
        "host": args.host,
        "port": args.port,
        "tls_certfile": args.certfile,
        "tls_keyfile": args.keyfile,
        "launcher": args.launcher,
        "ray_address": args.ray_address,
    }
    settings = Settings(**{k: v for k, v in given.items() if v is not None})
    tls = settings.tls
    for path in tls or ():
        if not path.is_file():
            raise SystemExit(f"loom server: TLS certificate or key {path} is not a readable file")
    home = settings.home_dir
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    listener = _listen(settings, home)
    settings = settings.model_copy(update={"port": listener.getsockname()[1]})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        app = create_app(settings)
    except LoomError as exc:  # a missing or wrong key, a home that is not ours: said, not traced
        print(f"loom server: {exc.message}", file=sys.stderr, flush=True)
        sys.exit(2)
    local = listening.listen_unix(home) if not tls else None  # for this machine's own clients
    _announce(settings, app, local is not None)
    sockets = [listener] + ([local] if local is not None else [])
    config = uvicorn.Config(
        app,
        log_level="warning",
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )
    try:
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        if local is not None:
            listening.close_unix(local, home)


def _listen(settings: Settings, home: Path) -> socket.socket:
    """The API's port, bound before anything else starts: one taken is said, naming its holder."""
    try:
        remembered = listening.previous_port(home)
        return listen_tcp(settings.host, settings.port, remembered=remembered)
    except OSError as exc:
        print(f"loom server: {listening.taken(settings.host, settings.port, exc)}", file=sys.stderr)
        sys.exit(2)


def _announce(settings: Settings, app: Any, local: bool) -> None:
    """`server.json` for this machine's clients (the URL, the unix socket, the platform's
    public key) and the lines an operator reads at start."""
    home = settings.home_dir
    url = settings.api_url
    server: dict[str, object] = {"url": url, "pid": os.getpid()}
    if local:
        server["socket"] = str(home / listening.SOCKET)
    identity = getattr(app.state.platform, "identity", None)
    if identity is not None:
        server["identity"] = identity.public
    write_private(home / "server.json", json.dumps(server).encode())
    print(f"Loom is running at {url} (state in {home})", flush=True)
    if settings.database_url is not None:
        shown = make_url(settings.database_url).render_as_string(hide_password=True)
        server_id = app.state.platform.leadership.server_id
        print(f"Database {shown}; this is server {server_id} of those using it", flush=True)
    isolation = app.state.platform.isolation
    if isolation.confined:
        print(f"Jobs and serving replicas are sandboxed: {isolation.description}", flush=True)
        if isolation.network_why:
            print(f"WARNING: {isolation.network_why}", flush=True)
    else:
        print(f"WARNING: {isolation.description}", flush=True)
        if isolation.single_user:
            print("WARNING: serving one user only (LOOM_ISOLATION=off to serve more)", flush=True)


if __name__ == "__main__":
    main()
