"""How commands print: a table for people, or JSON or YAML for scripts (`-o`), as kubectl does.

JSON and YAML are the API's own answer, written plainly to standard output (no colours, no
wrapping), so `loom list -o json | jq` and `yaml.safe_load` read them back whole."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, RenderableType
from rich.live import Live
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


WatchOpt = Annotated[
    bool, typer.Option("--watch", "-w", help="keep it on screen, updated every 2 s (Ctrl-C ends)")
]


def watch(
    fmt: Format,
    fetch: Callable[[], Any],
    table: Callable[[Any, bool], RenderableType],
    every_s: float = 2.0,
) -> None:
    """Show `fetch()` again and again until Ctrl-C: a table redrawn in place, or with `-o json`
    one compact document a line (`-o yaml`: documents after `---`) each time it changes."""
    try:
        if fmt in (Format.JSON, Format.YAML):
            last = None
            while True:
                data = fetch()
                if data != last:
                    _document(fmt, data)
                    last = data
                time.sleep(every_s)
        wide = fmt == Format.WIDE
        with Live(console=console, auto_refresh=False) as live:
            while True:
                live.update(table(fetch(), wide), refresh=True)
                time.sleep(every_s)
    except KeyboardInterrupt:
        return


def _document(fmt: Format, data: Any) -> None:
    if fmt == Format.JSON:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        sys.stdout.write("---\n" + yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    sys.stdout.flush()


def minute(at: str | None, never: str = "") -> str:
    """An ISO time to the minute, in UTC: what a table has room for, and enough to tell
    things apart."""
    return at[:16].replace("T", " ") if at else never


def whole(header: str, values: Iterable[str]) -> Column:
    """A column that is never cut nor wrapped (ids are copied from it): the other columns give
    way on a narrow terminal."""
    widest = max((len(v) for v in values), default=0)
    return Column(header, no_wrap=True, min_width=max(widest, len(header)))
