"""`loom apply -f FILE [CODE]`, `loom get KIND [NAME]`, `loom delete -f FILE`: Kubernetes-style
objects (Kubeflow's TFJob, PyTorchJob, ..., TrainJob, Experiment, InferenceService) applied to
the platform as `kubectl` applies them to a cluster."""

from __future__ import annotations

import calendar
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from loom.cli.common import client, console, err
from loom.cli.jobs import zip_code
from loom.cli.output import Format, OutputOpt, emit, whole

FileOpt = Annotated[
    Path,
    typer.Option(
        "--filename", "-f", help="a YAML or JSON file (or a folder of them; - reads stdin)"
    ),
]
SUFFIXES = (".yaml", ".yml", ".json")


def read_documents(path: Path) -> bytes:
    """The file's text; a folder's YAML and JSON files one after the other, by name."""
    if str(path) == "-":
        return sys.stdin.buffer.read()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES and p.is_file())
        if not files:
            err.print(f"[red]error:[/red] {path} holds no .yaml, .yml or .json file")
            raise typer.Exit(2)
        return b"\n---\n".join(p.read_bytes() for p in files)
    if not path.is_file():
        err.print(f"[red]error:[/red] {path}: no such file")
        raise typer.Exit(2)
    return path.read_bytes()


def _said(result: dict[str, Any]) -> str:
    group = str(result["apiVersion"]).rpartition("/")[0]
    kind = str(result["kind"]).lower() + (f".{group}" if group else "")
    return f"{kind}/{result['name']} {result['action']}"


def apply(
    filename: FileOpt,
    code: Annotated[
        Path | None, typer.Argument(help="the code the objects run: a folder or a zip")
    ] = None,
    output: OutputOpt = Format.TABLE,
) -> None:
    """Apply Kubeflow objects: TFJob, PyTorchJob, MPIJob, XGBoostJob, JAXJob, PaddleJob,
    TrainJob, Katib Experiment, KServe InferenceService (and the ConfigMaps and Secrets they
    read). Each field Loom ignores or approximates is said, with why."""
    text = read_documents(filename)
    zipped = zip_code(code) if code is not None else None
    with client() as loom:
        results = loom.apply(text, zipped)

    def table(_wide: bool) -> None:
        for result in results:
            console.print(_said(result), highlight=False)
            for note in result["notes"]:
                err.print(
                    f"  [yellow]{note['treatment']}:[/yellow] {escape(note['field'])}: "
                    f"{escape(note['why'])}",
                    highlight=False,
                )

    emit(output, {"objects": results}, table)


def get(
    kind: Annotated[str, typer.Argument(help="tfjobs, pytorchjobs, trainjobs, experiments, isvc…")],
    name: Annotated[str | None, typer.Argument()] = None,
    output: OutputOpt = Format.TABLE,
) -> None:
    """Your objects of a kind, or one, with their status as Kubeflow shows it."""
    with client() as loom:
        data: Any = loom.object(kind, name) if name else loom.objects(kind)
    items = [data] if name else data
    if name is None:
        data = {"apiVersion": "v1", "kind": "List", "items": data}
    emit(output, data, lambda wide: objects_table(items, wide))


def state_of(item: dict[str, Any]) -> str:
    """The object's state as `kubectl get` shows it: its newest true condition."""
    conditions = (item.get("status") or {}).get("conditions") or []
    true = [c for c in conditions if c.get("status") == "True"]
    return str(true[-1]["type"]) if true else ""


def _age(item: dict[str, Any]) -> str:
    made = (item.get("metadata") or {}).get("creationTimestamp")
    if not made:
        return ""
    seconds = max(0, int(time.time() - calendar.timegm(time.strptime(made, "%Y-%m-%dT%H:%M:%SZ"))))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def objects_table(items: list[dict[str, Any]], wide: bool) -> Table | None:
    if not items:
        err.print("No objects found.")
        return None
    names = [str(i["metadata"]["name"]) for i in items]
    table = Table(whole("NAME", names), "KIND", "STATE", box=None, pad_edge=False)
    urls = any((i.get("status") or {}).get("url") for i in items)
    if urls:
        table.add_column("URL")
    table.add_column("AGE")
    if wide:
        table.add_column("LOOM")
    for item, shown in zip(items, names, strict=True):
        status = item.get("status") or {}
        row = [shown, str(item["kind"]), state_of(item)]
        if urls:
            row.append(str(status.get("url") or ""))
        row.append(_age(item))
        if wide:
            annotations = (item["metadata"].get("annotations") or {}).items()
            row.append(
                " ".join(
                    f"{k.removeprefix('loom.dev/')}={v}"
                    for k, v in annotations
                    if k.startswith("loom.dev/") and k != "loom.dev/notes"
                )
            )
        table.add_row(*row)
    return table


def delete_objects(filename: Path | None, refs: list[str]) -> bool:
    """`loom delete -f FILE` or `loom delete KIND NAME`; False when neither was asked."""
    if filename is None and len(refs) != 2:
        return False
    with client() as loom:
        if filename is not None:
            results = loom.delete_documents(read_documents(filename))
        else:
            results = [loom.delete_object(refs[0], refs[1])]
    for result in results:
        console.print(_said(result), highlight=False)
    return True
