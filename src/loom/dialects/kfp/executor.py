"""`python -m loom.dialects.kfp.executor`: one KFP task inside its Loom job, doing what KFP's
launcher does inside a pod.

It reads the task's `values` (the file `$STEP_VALUES`, written by the pipeline driver with every
reference resolved), builds KFP's executor input (parameters typed as the component declares
them; input artifacts at the paths where the step's `inputs` put their files; output artifacts
under `$RESULT_DIR/artifacts/`), fills in the command's placeholders and runs it. Afterwards it
reads what the component wrote (the executor output file, output parameter files, artifacts and
their metadata) and leaves it as the step's outputs in `$RESULT_DIR/outputs.json`: parameters
by name, and each artifact as a descriptor (its `loom://jobs/JOB/artifacts/NAME` URI, the job and
path that hold its files, its type and metadata) that a later task's `inputs` take. `Metrics`
become the job's metrics; the first `Model` written is put in `$RESULT_DIR/model/`, which Loom
registers when the job completes.

Only the standard library and Loom's tracking SDK are imported: this runs in the job's own
environment, in the sandbox.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from loom.dialects.kfp import ir
from loom.domain.errors import ManifestError

MAX_OUTPUTS = 64 * 1024  # what the driver reads of outputs.json
_PLACEHOLDER = re.compile(r"\{\{\$(?:\.(?P<path>[^{}]*?))?\}\}")
_IO = re.compile(
    r"^(?P<side>inputs|outputs)\.(?P<kind>parameters|artifacts)\[\s*['\"](?P<name>[^'\"]+)['\"]\s*\]"
    r"(?:\.(?P<field>[A-Za-z_]+))?$"
)
# Loom's step states as KFP's PipelineTaskFinalStatus says them.
_FINAL = {
    "SUCCEEDED": "SUCCEEDED",
    "CACHED": "SUCCEEDED",
    "FAILED": "FAILED",
    "HALTED": "CANCELLED",
    "SKIPPED": "SKIPPED",
}


class TaskError(Exception):
    """The task cannot run as given (a value of the wrong type, outputs too large)."""


class Task:
    """One task's executor input, with the local places of its files."""

    def __init__(self, values: dict[str, Any], code: Path, results: Path, scratch: Path) -> None:
        self.values = values
        self.code = code
        self.results = results
        self.scratch = scratch
        self.job_id = os.environ.get("TRAINING_ID", "")
        self.parameters = self._parameters()
        self.inputs = self._input_artifacts()
        self.outputs = self._output_artifacts()
        (scratch / "parameters").mkdir(exist_ok=True)  # a container writes its files there
        self.output_files = {
            name: str(scratch / "parameters" / name) for name in values["outputs"]["parameters"]
        }

    def _parameters(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for name, given in self.values["parameters"].items():
            kind = self.values["types"].get(name, "STRING")
            value = given
            if kind == "TASK_FINAL_STATUS" and isinstance(given, dict):
                value = {**given, "state": _FINAL.get(str(given.get("state")), "FAILED")}
            try:
                found[name] = ir.coerce(value, kind, f"input {name}")
            except ManifestError as exc:
                raise TaskError(exc.message) from None
        return {k: v for k, v in found.items() if v is not None}

    def _input_artifacts(self) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {}
        for name, given in self.values["artifacts"].items():
            kind = self.values["artifact_types"].get(name) or {}
            listed = _flat(given) if isinstance(given, list) else [given]
            found[name] = [
                self._input_artifact(name, index, each, kind)
                for index, each in enumerate(listed)
                if isinstance(each, dict)
            ]
        return found

    def _input_artifact(
        self, name: str, index: int, given: dict[str, Any], kind: dict[str, Any]
    ) -> dict[str, Any]:
        """Where the step's `inputs` put the artifact's files; its URI if it has none here."""
        local = self.code / "inputs" / name / str(index)
        uri = str(local.resolve()) if given.get("job_id") else str(given.get("uri") or "")
        return {
            "name": str(given.get("name") or name),
            "type": {
                "schemaTitle": kind.get("schemaTitle", "system.Artifact"),
                "schemaVersion": kind.get("schemaVersion", "0.0.1"),
            },
            "uri": uri,
            "metadata": dict(given.get("metadata") or {}),
        }

    def _output_artifacts(self) -> dict[str, dict[str, Any]]:
        found = {}
        for name, kind in self.values["outputs"]["artifacts"].items():
            local = self.results / "artifacts" / name
            local.parent.mkdir(parents=True, exist_ok=True)
            found[name] = {
                "name": name,
                "type": {
                    "schemaTitle": kind["schemaTitle"],
                    "schemaVersion": kind["schemaVersion"],
                },
                "uri": str(local),
                "metadata": {},
            }
        return found

    def executor_input(self) -> dict[str, Any]:
        """KFP's ExecutorInput, as JSON."""
        return {
            "inputs": {
                "parameterValues": self.parameters,
                "artifacts": {n: {"artifacts": a} for n, a in self.inputs.items()},
            },
            "outputs": {
                "parameters": {n: {"outputFile": f} for n, f in self.output_files.items()},
                "artifacts": {n: {"artifacts": [a]} for n, a in self.outputs.items()},
                "outputFile": str(self.scratch / "executor_output.json"),
            },
        }

    # -- placeholders ------------------------------------------------------------------------
    def argv(self) -> list[str]:
        """The command and args with every placeholder filled in."""
        found: list[str] = []
        for word in [*self.values["command"], *self.values["args"]]:
            found += self._expand(word)
        return found

    def _expand(self, word: str) -> list[str]:
        """One word; a structural placeholder (`{"Concat": …}`, `{"IfPresent": …}`) may make
        several words or none."""
        stripped = word.strip()
        if stripped.startswith("{") and ('"Concat"' in stripped or '"IfPresent"' in stripped):
            try:
                return self._structure(json.loads(stripped))
            except ValueError:
                pass
        return [_PLACEHOLDER.sub(lambda m: self._value(m.group("path")), word)]

    def _structure(self, node: Any) -> list[str]:
        if isinstance(node, str):
            return self._expand(node)
        if isinstance(node, dict) and "Concat" in node:
            return ["".join(w for part in node["Concat"] for w in self._structure(part))]
        if isinstance(node, dict) and "IfPresent" in node:
            spec = node["IfPresent"]
            name = str(spec.get("InputName"))
            present = name in self.parameters or bool(self.inputs.get(name))
            branch = spec.get("Then" if present else "Else") or []
            parts = branch if isinstance(branch, list) else [branch]
            return [w for part in parts for w in self._structure(part)]
        return [json.dumps(node)]

    def _value(self, path: str | None) -> str:
        if path is None:
            return json.dumps(self.executor_input())
        run = str(self.values.get("run") or "")
        simple = {
            "pipeline_job_name": run,
            "pipeline_job_uuid": run,
            "pipeline_job_resource_name": run,
            "pipeline_task_name": str(self.values["task"]),
            "pipeline_task_uuid": self.job_id,
            "pipeline_root": f"loom://jobs/{self.job_id}",
        }
        if path in simple:
            return simple[path]
        match = _IO.match(path)
        if match is None:
            raise TaskError(f"placeholder {{{{$.{path}}}}} is not one Loom fills in")
        return self._io(
            match.group("side"), match.group("kind"), match.group("name"), match.group("field")
        )

    def _io(self, side: str, kind: str, name: str, part: str | None) -> str:
        if kind == "parameters":
            if side == "outputs":
                return self.output_files[name]
            value = self.parameters.get(name)
            return value if isinstance(value, str) else json.dumps(value)
        artifact = (self.inputs.get(name) or [{}])[0] if side == "inputs" else self.outputs[name]
        if part in ("path", "uri"):
            return str(artifact.get("uri") or "")
        if part == "metadata":
            return json.dumps(artifact.get("metadata") or {})
        raise TaskError(f"placeholder {side}.artifacts['{name}'].{part} is not one Loom fills in")

    # -- after the command -------------------------------------------------------------------
    def outputs_json(self) -> dict[str, Any]:
        """The step's outputs: parameters by name, artifacts as descriptors."""
        written = self._executor_output()
        parameters: dict[str, Any] = {}
        reported = written.get("parameterValues") or {}
        for name, kind in self.values["outputs"]["parameters"].items():
            path = Path(self.output_files[name])
            if name in reported:
                value = reported[name]
            elif path.is_file():
                value = path.read_text()
            else:
                continue
            try:
                parameters[name] = ir.coerce(value, kind, f"output {name}")
            except ManifestError as exc:
                raise TaskError(exc.message) from None
        artifacts = {
            name: [self._descriptor(name, artifact, written)]
            for name, artifact in self.outputs.items()
        }
        return {"parameters": parameters, "artifacts": artifacts}

    def _executor_output(self) -> dict[str, Any]:
        path = self.scratch / "executor_output.json"
        if not path.is_file():
            return {}
        try:
            found = json.loads(path.read_text())
        except ValueError as exc:
            raise TaskError(f"the component's executor output is not JSON: {exc}") from None
        return found if isinstance(found, dict) else {}

    def _descriptor(
        self, name: str, artifact: dict[str, Any], written: dict[str, Any]
    ) -> dict[str, Any]:
        listed = ((written.get("artifacts") or {}).get(name) or {}).get("artifacts") or [{}]
        reported = listed[0] if isinstance(listed[0], dict) else {}
        metadata = dict(reported.get("metadata") or {})
        local = Path(artifact["uri"])
        uri = str(reported.get("uri") or artifact["uri"])
        if uri != artifact["uri"]:  # the component points elsewhere: only its URI is known
            return {
                "name": name,
                "type": artifact["type"]["schemaTitle"],
                "uri": uri,
                "metadata": metadata,
                "job_id": None,
            }
        if not local.exists():  # nothing written: an empty file, as an empty object would be
            local.touch()
        relative = local.relative_to(self.results).as_posix()
        return {
            "name": name,
            "type": artifact["type"]["schemaTitle"],
            "uri": f"loom://jobs/{self.job_id}/{relative}",
            "metadata": metadata,
            "job_id": self.job_id,
            "path": relative,
        }


def _flat(items: list[Any]) -> list[Any]:
    """A fan-out's lists of artifacts laid out in order, as the step's `inputs` lay them."""
    return [each for item in items for each in (_flat(item) if isinstance(item, list) else [item])]


def _metrics(outputs: dict[str, Any]) -> None:
    """Each `Metrics` artifact's numbers, as the job's metrics (group: the artifact's name)."""
    from loom import tracking

    for name, listed in outputs["artifacts"].items():
        for artifact in listed:
            if artifact["type"] != "system.Metrics":
                continue
            numbers: dict[str, float] = {
                str(k): float(v)
                for k, v in artifact["metadata"].items()
                if isinstance(v, int | float)
                and not isinstance(v, bool)
                and str(k).isidentifier()
                and k not in ("step", "group", "etimes")
            }
            if numbers:
                # step, group and etimes were left out above: every name is a metric
                tracking.log_metrics(None, name, **numbers)  # type: ignore[arg-type]


def _model(outputs: dict[str, Any], results: Path) -> None:
    """The first `Model` artifact that has files, put where Loom registers a job's model."""
    for name in sorted(outputs["artifacts"]):
        for artifact in outputs["artifacts"][name]:
            if artifact["type"] != "system.Model" or not artifact.get("job_id"):
                continue
            source = results / artifact["path"]
            if source.is_dir() and any(source.iterdir()):
                shutil.copytree(source, results / "model", dirs_exist_ok=True)
                return
            if source.is_file() and source.stat().st_size:
                (results / "model").mkdir(exist_ok=True)
                shutil.copyfile(source, results / "model" / source.name)
                return


def main() -> int:
    values_file = os.environ.get("STEP_VALUES") or (sys.argv[1] if len(sys.argv) > 1 else "")
    values = json.loads(Path(values_file).read_text())
    results = Path(os.environ.get("RESULT_DIR") or "results").resolve()
    code = Path(os.environ.get("MODEL_DIR") or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="kfp-") as scratch:
        try:
            task = Task(values, code, results, Path(scratch))
            argv = task.argv()
        except TaskError as exc:
            print(f"kfp task {values.get('task')}: {exc}", file=sys.stderr, flush=True)
            return 2
        if not argv:
            print(f"kfp task {values.get('task')}: its container has no command", file=sys.stderr)
            return 2
        try:
            ran = subprocess.run(argv, check=False)
        except OSError as exc:
            print(f"kfp task {values.get('task')}: {argv[0]}: {exc.strerror}", file=sys.stderr)
            return 127
        if ran.returncode != 0:
            return ran.returncode
        try:
            outputs = task.outputs_json()
        except TaskError as exc:
            print(f"kfp task {values.get('task')}: {exc}", file=sys.stderr, flush=True)
            return 2
    text = json.dumps(outputs, default=str)
    if len(text) > MAX_OUTPUTS:
        print(
            f"kfp task {values.get('task')}: its output parameters and artifacts' metadata take "
            f"{len(text)} bytes; at most {MAX_OUTPUTS} (pass large values as artifacts)",
            file=sys.stderr,
        )
        return 2
    _metrics(outputs)
    _model(outputs, results)
    (results / "outputs.json").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
