"""`python -m loom.api`: the embedded platform (API + lifecycle), state under `LOOM_HOME`."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

import uvicorn

from loom.api.app import create_app
from loom.api.platform import write_private
from loom.domain.errors import ConfigError
from loom.lifecycle.workspace import free_port
from loom.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(prog="loom server")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    args = parser.parse_args()
    overrides = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    settings = Settings(**overrides)
    if settings.port == 0:
        settings = settings.model_copy(update={"port": free_port()})
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    try:
        app = create_app(settings)
    except ConfigError as exc:
        sys.exit(f"loom server: {exc.message}")
    url = settings.api_url
    settings.home_dir.mkdir(parents=True, exist_ok=True)
    write_private(settings.home_dir / "server.json", json.dumps({"url": url, "pid": os.getpid()}))
    print(f"Loom is running at {url} (state in {settings.home_dir})", flush=True)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning")


if __name__ == "__main__":
    main()
