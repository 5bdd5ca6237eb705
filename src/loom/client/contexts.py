"""Named contexts: which platform and which token, kept by name as kubectl and `det -m` keep
theirs, so one can switch between a laptop's Loom and the team's.

They live in `$LOOM_CONFIG` (default `~/.config/loom/contexts.yaml`), private to the user
(0600, as `$LOOM_HOME/token` is): `{current: NAME, contexts: {NAME: {url, token}}}`."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loom.client.errors import ClientError

NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


@dataclass(frozen=True)
class Context:
    name: str
    url: str
    token: str | None = None
    identity: str | None = None  # the platform's public key, taken when the context was added


def config_path() -> Path:
    found = os.environ.get("LOOM_CONFIG")
    if found:
        return Path(found).expanduser()
    base = Path(os.environ.get("XDG_CONFIG_HOME", "~/.config")).expanduser()
    return base / "loom" / "contexts.yaml"


def _read() -> dict[str, Any]:
    path = config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:  # most people have none: no YAML parser to load for it
        return {"current": None, "contexts": {}}
    except OSError as exc:
        raise ClientError(f"cannot read the contexts in {path}: {exc}") from exc
    import yaml

    try:
        data = yaml.safe_load(text) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ClientError(f"cannot read the contexts in {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
        raise ClientError(f"{path}: expected a mapping with `contexts`; fix or remove the file")
    data.setdefault("contexts", {})
    data.setdefault("current", None)
    return data


def _write(data: dict[str, Any]) -> None:
    import yaml

    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        yaml.safe_dump(data, out, sort_keys=False)
    os.replace(temporary, path)


def contexts() -> tuple[list[Context], str | None]:
    """Every context, by name, and the current one's name."""
    data = _read()
    found = [
        Context(name, str(entry.get("url", "")), entry.get("token"), entry.get("identity"))
        for name, entry in sorted(data["contexts"].items())
        if isinstance(entry, dict)
    ]
    return found, data["current"]


def get(name: str) -> Context:
    found, _ = contexts()
    for context in found:
        if context.name == name:
            return context
    raise _unknown(name, [c.name for c in found])


def _unknown(name: str, names: list[str]) -> ClientError:
    known = ", ".join(sorted(names)) or "none yet; add one with `loom context add`"
    return ClientError(f"no context {name!r} (contexts: {known})")


def active() -> Context | None:
    """The context to use: `LOOM_CONTEXT` (or `loom --context`) if set, else the current one."""
    asked = os.environ.get("LOOM_CONTEXT")
    if asked:
        return get(asked)
    found, current = contexts()
    return next((c for c in found if c.name == current), None)


def add(
    name: str, url: str, token: str | None, *, use: bool = False, identity: str | None = None
) -> None:
    if not NAME.match(name):
        raise ClientError(f"context name {name!r}: use letters, digits, '.', '_' or '-'")
    if not url.startswith(("http://", "https://")):
        raise ClientError(f"--url {url!r}: expected http://HOST:PORT or https://HOST:PORT")
    data = _read()
    entry: dict[str, Any] = {"url": url.rstrip("/")}
    if token:
        entry["token"] = token
    if identity:
        entry["identity"] = identity
    data["contexts"][name] = entry
    if use or data["current"] is None:
        data["current"] = name
    _write(data)


def use(name: str) -> None:
    data = _read()
    if name not in data["contexts"]:
        raise _unknown(name, list(data["contexts"]))
    data["current"] = name
    _write(data)


def remove(name: str) -> None:
    data = _read()
    if name not in data["contexts"]:
        raise _unknown(name, list(data["contexts"]))
    del data["contexts"][name]
    if data["current"] == name:
        data["current"] = None
    _write(data)
