"""`python -m loom.dialects.argo.executor`: one Argo container or script template inside its
Loom job, doing what Argo's executor does inside a pod.

It reads the step's `values` (`$STEP_VALUES`, every reference resolved by the driver), puts the
input artifacts where the template says (from where the step's `inputs` brought them, or their
`raw` data), runs the command (a script's source as its last argument, as Argo does), and then
leaves in `$RESULT_DIR/outputs.json` what later tasks read: `result` (the standard output, as
Argo keeps it), each output parameter read from its file, and the exit code. A value that is
JSON is kept as JSON (a list for `withParam`, a number for a comparison), as Argo's expressions
read it. Output artifacts are copied under `$RESULT_DIR/artifacts/`. Standard library only: it
runs in the job's environment, in the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

MAX_RESULT = 256 * 1024  # what Argo keeps of a step's output as `result`
MAX_OUTPUTS = 64 * 1024  # what the driver reads of outputs.json


class TaskError(Exception):
    """The template cannot run as given (an artifact not where it should be)."""


def typed(text: str) -> Any:
    """A value as Argo's expressions would read it: JSON where it is JSON, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def place_inputs(values: dict[str, Any], code: Path) -> None:
    """Each input artifact at its path: copied from `inputs/NAME` (where the step's `inputs`
    put it), or written from its `raw` data."""
    for artifact in values.get("inputs") or []:
        target = Path(str(artifact["path"]))
        target = target if target.is_absolute() else code / target
        target.parent.mkdir(parents=True, exist_ok=True)
        if "raw" in artifact:
            target.write_text(str(artifact["raw"]))
            continue
        source = code / "inputs" / str(artifact["name"])
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copyfile(source, target)
        else:
            raise TaskError(f"input artifact {artifact['name']} was not brought to this job")


def argv(values: dict[str, Any], scratch: Path) -> list[str]:
    command = [str(c) for c in values["command"]]
    if values.get("source") is not None:
        script = scratch / "script"
        script.write_text(str(values["source"]))
        return [*command, str(script)]
    return [*command, *(str(a) for a in values.get("args") or [])]


def run(command: list[str], code: Path) -> tuple[int, str]:
    """The command's exit code and its standard output (which still reaches the job's log)."""
    kept: list[str] = []
    process = subprocess.Popen(command, cwd=code, stdout=subprocess.PIPE, text=True, bufsize=1)
    assert process.stdout is not None
    thread = threading.Thread(target=_copy, args=(process.stdout, kept), daemon=True)
    thread.start()
    code_out = process.wait()
    thread.join()
    return code_out, "".join(kept)


def _copy(stream: IO[str], kept: list[str]) -> None:
    size = 0
    for line in stream:
        sys.stdout.write(line)
        sys.stdout.flush()
        if size < MAX_RESULT:
            kept.append(line)
            size += len(line)


def outputs(
    values: dict[str, Any], code: Path, results: Path, exit_code: int, stdout: str
) -> dict[str, Any]:
    """`result`, the output parameters and the exit code; output artifacts copied to results."""
    parameters: dict[str, Any] = {}
    for declared in values["outputs"]["parameters"]:
        path = _local(declared["path"], code)
        if path.is_file():
            parameters[declared["name"]] = typed(path.read_text())
        elif "default" in declared:
            parameters[declared["name"]] = declared["default"]
        elif exit_code == 0:
            raise TaskError(
                f"output parameter {declared['name']}: {declared['path']} was not written"
            )
    for declared in values["outputs"]["artifacts"]:
        source = _local(declared["path"], code)
        target = results / "artifacts" / str(declared["name"])
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        elif source.is_file():
            shutil.copyfile(source, target)
        elif not declared.get("optional") and exit_code == 0:
            raise TaskError(
                f"output artifact {declared['name']}: {declared['path']} was not written"
            )
    return {"result": typed(stdout.strip()), "parameters": parameters, "exit_code": exit_code}


def _local(path: str, code: Path) -> Path:
    found = Path(str(path))
    return found if found.is_absolute() else code / found


def main() -> int:
    values = json.loads(Path(os.environ["STEP_VALUES"]).read_text())
    results = Path(os.environ.get("RESULT_DIR") or "results").resolve()
    code = Path(os.environ.get("MODEL_DIR") or os.getcwd())
    name = values.get("template")
    with tempfile.TemporaryDirectory(prefix="argo-") as scratch:
        try:
            place_inputs(values, code)
            exit_code, stdout = run(argv(values, Path(scratch)), code)
            found = outputs(values, code, results, exit_code, stdout)
        except TaskError as exc:
            print(f"argo template {name}: {exc}", file=sys.stderr, flush=True)
            return 2
        except OSError as exc:
            print(f"argo template {name}: {exc}", file=sys.stderr, flush=True)
            return 127
    text = json.dumps(found, default=str)
    if len(text) > MAX_OUTPUTS:
        print(
            f"argo template {name}: its result and output parameters take {len(text)} bytes; "
            f"at most {MAX_OUTPUTS} (pass large values as artifacts)",
            file=sys.stderr,
        )
        return 2
    (results / "outputs.json").write_text(text)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
