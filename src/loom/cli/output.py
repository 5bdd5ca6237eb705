"""How commands print: a table for people, or JSON or YAML for scripts (`-o`), as kubectl does.

JSON and YAML are the API's own answer, written plainly to standard output (no colours, no
wrapping), so `loom list -o json | jq` and `yaml.safe_load` read them back whole."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Annotated, Any

import typer
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
        import yaml  # loaded for -o yaml only: a command starts sooner without it

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
    with interrupted() as stop:
        if fmt in (Format.JSON, Format.YAML):
            last = None
            while not stop.is_set():
                data = fetch()
                if data != last and not stop.is_set():
                    _document(fmt, data)
                    last = data
                stop.wait(every_s)
            return
        from rich.live import Live

        wide = fmt == Format.WIDE
        with Live(console=console, auto_refresh=False) as live:
            while not stop.is_set():
                live.update(table(fetch(), wide), refresh=True)
                stop.wait(every_s)


@contextmanager
def interrupted() -> Iterator[threading.Event]:
    """An event set by Ctrl-C (SIGINT, and SIGTERM) instead of a KeyboardInterrupt raised
    wherever the program happens to be: one raised inside an HTTP request can leave the
    connection pool's lock held, and closing the client then waits forever."""
    stop = threading.Event()
    # The handler only sets a flag; a helper thread wakes `stop.wait` (a signal handler that
    # set the event itself could run while the main thread holds the event's own lock).
    woken = threading.Event()

    def handle(_signum: int, _frame: object) -> None:
        woken.set()

    def relay() -> None:
        woken.wait()
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    threading.Thread(target=relay, daemon=True).start()
    try:
        yield stop
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        woken.set()


def _document(fmt: Format, data: Any) -> None:
    if fmt == Format.JSON:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        import yaml

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
