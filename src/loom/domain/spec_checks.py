"""The checks a spec's fields go through (Katib experiments, pipelines), each failing with the
field's path named."""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from typing import Any, TypeVar

import yaml

from loom.domain.errors import ManifestError
from loom.domain.manifest import yaml_problem
from loom.domain.safe_yaml import UnsafeYaml, safe_load

T = TypeVar("T", bound=str)
# Katib fields refused wherever they are not allowed, with why.
REFUSED = {
    "nasConfig": "neural architecture search is not offered by Loom",
    "configMap": "a Kubernetes ConfigMap; put the Loom manifest in trialSpec (or apply the "
    "Experiment and its ConfigMap with `loom apply -f`)",
    "distribution": "it goes in feasibleSpace, where Katib reads it",
}


def fail(where: str, message: str) -> ManifestError:
    return ManifestError(f"{where}: {message}", field=where)


def join(where: str, key: Any) -> str:
    return f"{where}.{key}" if where else str(key)


def mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise fail(where, f"must be a mapping, got {type(value).__name__}")
    return value


def section(found: dict[str, Any], key: str, where: str, what: str) -> dict[str, Any]:
    if found.get(key) is None:
        raise fail(join(where, key), f"is required: {what}")
    return mapping(found[key], join(where, key))


def known(found: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in found:
        if key in allowed:
            continue
        if key in REFUSED:
            raise fail(join(where, key), f"refused: {REFUSED[key]}")
        close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        raise fail(join(where, key), f"unknown field{hint}")


def sequence(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(where, f"must be a list, got {type(value).__name__}")
    return value


def entries(value: Any, where: str, keys: tuple[str, ...]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each mapping of a list of mappings, with its path, its keys checked."""
    for index, item in enumerate(sequence(value, where)):
        at = f"{where}[{index}]"
        entry = mapping(item, at)
        known(entry, keys, at)
        yield at, entry


def pairs(value: Any, where: str) -> Iterator[tuple[str, str, str]]:
    """Katib's `[{name, value}]` lists: (path, name, value); a name given twice is refused."""
    seen: set[str] = set()
    for at, entry in entries(value, where, ("name", "value")):
        key = name(entry.get("name"), f"{at}.name")
        if key in seen:
            raise fail(f"{at}.name", f"{key!r} is set twice")
        seen.add(key)
        yield at, key, text(entry.get("value"), f"{at}.value")


def count(value: Any, where: str, low: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise fail(where, f"must be a whole number ≥ {low}, got {value!r}")
    return value


def number(value: Any, where: str) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number):
        raise fail(where, f"must be a finite number, got {value!r}")
    return number


def text(value: Any, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise fail(where, f"must be text, got {value!r}")
    return str(value)


def name(value: Any, where: str) -> str:
    if value is None or value == "":
        raise fail(where, "a name is required")
    return text(value, where)


def choice(value: Any, where: str, allowed: tuple[T, ...]) -> T:
    for option in allowed:
        if value == option:
            return option
    said = "is required" if value is None else f"{value!r} is not"
    raise fail(where, f"{said} one of {', '.join(allowed)}")


def load_mapping(text: str | bytes, what: str) -> dict[str, Any]:
    """A user's YAML document that must be a mapping (`what`: "an experiment", "a pipeline");
    refused with the reason."""
    try:
        data = safe_load(text)
    except UnsafeYaml as exc:
        raise ManifestError(f"{what} is refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"{what} is not valid YAML: {yaml_problem(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{what} is not UTF-8 text: {exc.reason}") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{what} is a YAML mapping, got {type(data).__name__}")
    return data
