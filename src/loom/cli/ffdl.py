"""FfDL's CLI verbs that Loom had no word for: `loglines`, `emetrics`, `version`. The others
(`train`, `list`, `show`, `delete`, `download`, `logs`, `halt`) are Loom's own verbs, which take
FfDL's arguments; every verb honours FfDL's `DLAAS_URL`, `DLAAS_USERNAME` and `DLAAS_PASSWORD`
(a Loom token)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer

import loom
from loom.cli.common import client

Pos = Annotated[
    int, typer.Option("--pos", help="line number from the start; negative: from the end")
]
PageSize = Annotated[int, typer.Option("--pagesize", min=1, max=10_000, help="records shown")]
Since = Annotated[
    str | None,
    typer.Option("--since", help="records from this time: epoch milliseconds or RFC 3339"),
]
Json = Annotated[bool, typer.Option("--json", help="each record as FfDL's JSON")]


def loglines(
    model_id: Annotated[str, typer.Argument(metavar="MODEL_ID", help="the job's id or name")],
    pos: Pos = 0,
    pagesize: PageSize = 10,
    since: Since = None,
    as_json: Json = False,
) -> None:
    """A page of a job's log lines, as FfDL printed them: index, time (ms), line."""
    with client() as found:
        job_id = found.find_job(model_id)["id"]
        records = found.ffdl_loglines(job_id, pos=pos, pagesize=pagesize, since=since)
    for record in records:
        meta = record["meta"]
        text = (
            json.dumps(record) if as_json else f"{meta['rindex']} {meta['time']} {record['line']}"
        )
        sys.stdout.write(text + "\n")


def emetrics(
    model_id: Annotated[str, typer.Argument(metavar="MODEL_ID", help="the job's id or name")],
    pos: Pos = 0,
    pagesize: PageSize = 10,
    since: Since = None,
    as_json: Json = False,
) -> None:
    """A page of a job's evaluation metrics, as FfDL printed them."""
    with client() as found:
        job_id = found.find_job(model_id)["id"]
        records = found.ffdl_emetrics(job_id, pos=pos, pagesize=pagesize, since=since)
    for record in records:
        sys.stdout.write((json.dumps(record) if as_json else _emetrics_text(record)) + "\n")


def _emetrics_text(record: dict[str, Any]) -> str:
    meta = record["meta"]
    head = f"time: {meta['time']}, group-label: {record['grouplabel']}, "
    head += f"training-id: {meta['training_id']}"
    etimes = ", ".join(f"{k}: {v['value']}" for k, v in record.get("etimes", {}).items())
    values = ", ".join(f"{k}: {v['value']}" for k, v in record.get("values", {}).items())
    return f"{head}\n    etimes: {etimes}\n    values: {values}"


def version() -> None:
    """The CLI's version (`loom --version` says the same)."""
    typer.echo(f"loom {loom.__version__}")
