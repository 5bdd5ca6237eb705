"""KServe's storage initializer, as a Loom job runs it: the model at `--uri` (already fetched
into DATA_DIR by the job's data store, or downloaded here from http(s)) laid out in
RESULT_DIR/model the way Loom's server reads it, so the job registers it as a model version.

Standard library only: it runs in the job's sandbox with the job's Python, shipped with the job's
code. `--format` says what the layout must hold: onnx (`model.onnx`), pytorch (a TorchScript
`model.pt`), mlflow (an `MLmodel` folder), xgboost (an XGBoost model file, described by an
MLmodel written here)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tarfile
import urllib.request
import zipfile
from pathlib import Path

SUFFIXES = {"onnx": (".onnx",), "pytorch": (".pt", ".pth"), "xgboost": (".json", ".ubj", ".bst")}
OWN = {"onnx": "model.onnx", "pytorch": "model.pt"}


def fetch(uri: str, target: Path) -> None:
    """An http(s) model: one file, or an archive (.zip, .tar, .tar.gz) unpacked."""
    name = uri.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or "model"
    path = target / name
    with urllib.request.urlopen(uri, timeout=60) as answer, path.open("wb") as out:
        shutil.copyfileobj(answer, out)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            archive.extractall(target)
        path.unlink()
    elif tarfile.is_tarfile(path):
        with tarfile.open(path) as archive:
            archive.extractall(target, filter="data")
        path.unlink()


def lay_out(model: Path, kind: str) -> str:
    """The one file the format serves, named as Loom's server looks for it; what it is."""
    files = [p for p in model.rglob("*") if p.is_file() and not p.name.startswith(".loom")]
    if kind == "mlflow":
        if not (model / "MLmodel").exists():
            raise SystemExit(f"no MLmodel file at the storage URI (has: {names(files)})")
        return "MLmodel"
    found = [p for p in files if p.suffix in SUFFIXES[kind]]
    own = OWN.get(kind)
    if own and (model / own).exists():
        return own
    if len(found) != 1:
        raise SystemExit(
            f"{kind}: expected one {'/'.join(SUFFIXES[kind])} file at the storage URI, found "
            f"{len(found)} (has: {names(files)})"
        )
    if kind == "xgboost":
        (model / "MLmodel").write_text(
            "flavors:\n  xgboost:\n    data: "
            f"{found[0].relative_to(model).as_posix()}\n    model_class: xgboost.core.Booster\n"
        )
        return found[0].name
    found[0].rename(model / str(own))
    return str(own)


def names(files: list[Path]) -> str:
    return ", ".join(sorted(p.name for p in files)[:20]) or "nothing"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--uri", required=True)
    parser.add_argument("--format", required=True, choices=[*SUFFIXES, "mlflow"])
    args = parser.parse_args()
    model = Path(os.environ["RESULT_DIR"]) / "model"
    shutil.rmtree(model, ignore_errors=True)
    model.mkdir(parents=True)
    if args.uri.startswith(("http://", "https://")):
        fetch(args.uri, model)
    else:
        source = Path(os.environ["DATA_DIR"])
        shutil.copytree(source, model, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".loom*"))
    served = lay_out(model, args.format)
    print(f"storage initializer: {args.uri} → {served}", file=sys.stderr)


if __name__ == "__main__":
    main()
