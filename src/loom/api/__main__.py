"""`python -m loom.api`: the embedded platform (API + lifecycle), state under `LOOM_HOME`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import uvicorn
from sqlalchemy.engine import make_url

from loom.app import create_app
from loom.domain.errors import LoomError
from loom.lifecycle.workspace import free_port
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
    if settings.port == 0:
        settings = settings.model_copy(update={"port": free_port()})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        app = create_app(settings)
    except LoomError as exc:  # a missing or wrong key, a home that is not ours: said, not traced
        print(f"loom server: {exc.message}", file=sys.stderr, flush=True)
        sys.exit(2)
    url = settings.api_url
    settings.home_dir.mkdir(parents=True, exist_ok=True)
    server = {"url": url, "pid": os.getpid()}
    write_private(settings.home_dir / "server.json", json.dumps(server).encode())
    print(f"Loom is running at {url} (state in {settings.home_dir})", flush=True)
    if settings.database_url is not None:
        shown = make_url(settings.database_url).render_as_string(hide_password=True)
        server_id = app.state.platform.leadership.server_id
        print(f"Database {shown}; this is server {server_id} of those using it", flush=True)
    isolation = app.state.platform.isolation
    if isolation.confined:
        print(f"Jobs and serving replicas are sandboxed: {isolation.description}", flush=True)
    else:
        print(f"WARNING: {isolation.description}", flush=True)
        if isolation.single_user:
            print("WARNING: serving one user only (LOOM_ISOLATION=off to serve more)", flush=True)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level="warning",
        ssl_certfile=tls[0] if tls else None,
        ssl_keyfile=tls[1] if tls else None,
    )


if __name__ == "__main__":
    main()
