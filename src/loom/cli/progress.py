"""Progress on long work, on standard error and only on a terminal: a bar for large uploads and
downloads, a spinner while a deployment comes up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from loom.cli.common import err
from loom.client.http import Progress as Told

SHOWN_FROM = 1 << 20  # smaller transfers are over before a bar would help


@contextmanager
def transfer(label: str) -> Iterator[Told]:
    """A `progress(done, total)` callback drawing a bar while the block runs."""
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = bar.add_task(label, total=None, visible=False)

    def told(done: int, total: int | None) -> None:
        big = (total or done) >= SHOWN_FROM
        bar.update(task, completed=done, total=total, visible=big)

    with bar:
        yield told
