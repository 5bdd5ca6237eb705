"""YAML written by users, read without letting them choose the cost: libyaml's C parser where
PyYAML has it, no anchors or aliases (a few hundred bytes of aliases expand to gigabytes, the
"billion laughs"), bounded nesting (deep nesting overflows recursive composers), and a bounded
number of nodes (building Python objects, not parsing, is what costs: seconds a MiB)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_DEPTH = 32
MAX_NODES = 10_000
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


class UnsafeYaml(ValueError):
    """The text is valid YAML, but uses what a user's document may not."""


def _where(event: yaml.Event) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"


def check_events(text: str | bytes, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Walk the parser's events once, before anything is built; raises `UnsafeYaml`."""
    depth = nodes = 0
    for event in _events(text, max_depth):
        nodes += isinstance(event, yaml.NodeEvent)
        if nodes > max_nodes:
            raise UnsafeYaml(
                f"more than {max_nodes} values (YAML nodes) is not accepted; "
                f"the limit was passed at {_where(event)}"
            )
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise UnsafeYaml(
                f"YAML anchors and aliases (`&name`, `*name`) are not accepted, found one at "
                f"{_where(event)}: write the value out where it is needed"
            )
        if isinstance(event, _OPEN):
            depth += 1
            if depth > max_depth:
                raise UnsafeYaml(
                    f"nesting deeper than {max_depth} levels at {_where(event)} is not accepted"
                )
        elif isinstance(event, _CLOSE):
            depth -= 1


def _events(text: str | bytes, max_depth: int) -> Iterator[yaml.Event]:
    """The parser's events; libyaml's own depth limit (PyYAML 6.0.4 and later), which its scanner
    can meet before the walk sees the level past ours, is refused the same way."""
    try:
        yield from yaml.parse(text, Loader=Loader)
    except yaml.MarkedYAMLError as error:
        if "nesting depth" not in str(error.problem):
            raise
        mark = error.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        raise UnsafeYaml(
            f"nesting deeper than {max_depth} levels at {where} is not accepted"
        ) from None


def safe_load(text: str | bytes, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Any:
    """One YAML document as Python data; raises `UnsafeYaml` or `yaml.YAMLError`."""
    check_events(text, max_depth, max_nodes)
    return yaml.load(text, Loader=Loader)


def safe_load_all(
    text: str | bytes, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES
) -> list[Any]:
    """Every YAML document of a stream (`---` between them) as Python data, the limits counted
    over all of them; raises `UnsafeYaml` or `yaml.YAMLError`."""
    check_events(text, max_depth, max_nodes)
    return list(yaml.load_all(text, Loader=Loader))
