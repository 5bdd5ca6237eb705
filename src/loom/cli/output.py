"""How commands print: a table for people, or JSON or YAML for scripts (`-o`), as kubectl does.

JSON and YAML are the API's own answer, written plainly to standard output (no colours, no
wrapping), so `loom list -o json | jq` and `yaml.safe_load` read them back whole."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, RenderableType
from rich.table import Column

from loom.cli.common import console

WIDE_COLUMNS = 200


class Format(StrEnum):
    TABLE = "table"
    WIDE = "wide"  # the table with every column
    JSON = "json"
    YAML = "yaml"


OutputOpt = Annotated[
    Format, typer.Option("--output", "-o", help="table, wide (more columns), json or yaml")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="the same as -o json")]


def chosen(fmt: Format, as_json: bool = False) -> Format:
    return Format.JSON if as_json else fmt


def emit(fmt: Format, data: Any, table: Callable[[bool], RenderableType | None]) -> None:
    """`data` as JSON or YAML, or `table(wide)` printed for people."""
    if fmt == Format.JSON:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    elif fmt == Format.YAML:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        wide = fmt == Format.WIDE
        shown = table(wide)
        if shown is not None:  # wide: long lines rather than squeezed columns, as kubectl's
            out = Console(width=max(console.width, WIDE_COLUMNS)) if wide else console
            out.print(shown)


def whole(header: str, values: Iterable[str]) -> Column:
    """A column that is never cut nor wrapped (ids are copied from it): the other columns give
    way on a narrow terminal."""
    widest = max((len(v) for v in values), default=0)
    return Column(header, no_wrap=True, min_width=max(widest, len(header)))
