"""What each kind of step does, given its fields with their references resolved: the job a
`job`, `python` or `shell` step submits (under an id chosen before), the experiment of an
`experiment` step, the registry query of a `select` and the deployment of a `deploy`; and what
a finished job or experiment leaves as the step's outputs."""

from __future__ import annotations

import copy
import hashlib
import io
import json
import shlex
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from loom.domain.credentials import Credentials, merge
from loom.domain.errors import InvalidInput, LoomError, NotFound
from loom.domain.manifest import manifest_from_dict
from loom.domain.pipeline import STEP_NAME, Step
from loom.domain.pipeline_refs import MAX_DEPTH
from loom.domain.safe_yaml import UnsafeYaml, safe_load
from loom.domain.states import JobState
from loom.hpo.records import trial_spec_of
from loom.hpo.service import Experiments
from loom.lifecycle.manager import LifecycleManager
from loom.lifecycle.workspace import Workspace
from loom.registry.models import ModelRegistry, metric_value
from loom.sandbox.files import UnsafePath, open_regular, regular_files
from loom.serving.canary import CanaryChange
from loom.serving.deployments import Deployments
from loom.serving.monitoring import Monitoring
from loom.serving.scaling import Scaling
from loom.settings import Settings
from loom.storage.artifacts import ArtifactStore
from loom.store import jobs as job_rows
from loom.store.tables import PipelineRun, User
from loom.tds.service import TrainingData

MAX_VALUES = 64 * 1024
MAX_INPUTS = 256 * 2**20  # an earlier step's results copied into a step's code
SCRIPT_DIR = ".loom-steps"


class StepFailed(LoomError):
    """The step cannot do what it says (a bad value at run time, a model that is not there):
    the step fails with this message; the platform is fine."""


@dataclass(frozen=True)
class Finished:
    """A job or experiment that has ended: SUCCEEDED, FAILED or HALTED, with its outputs."""

    state: str
    message: str
    outputs: dict[str, Any]


class StepKinds:
    def __init__(
        self,
        settings: Settings,
        lifecycle: LifecycleManager,
        artifacts: ArtifactStore,
        tds: TrainingData,
        registry: ModelRegistry,
        deployments: Deployments,
        experiments: Experiments,
    ) -> None:
        self.settings = settings
        self.lifecycle = lifecycle
        self.artifacts = artifacts
        self.tds = tds
        self.registry = registry
        self.deployments = deployments
        self.experiments = experiments
        self._identities: dict[str, str] = {}  # the code's digest → its identity

    # -- job, python and shell ---------------------------------------------------------------
    def job_of(
        self,
        run: PipelineRun,
        step: Step,
        fields: dict[str, Any],
        credentials: Credentials,
        render: Callable[[Any], Any],
    ) -> tuple[dict[str, Any], bytes]:
        """The manifest (as written, credentials put back) and the code a job step runs; a
        `manifest_file`'s references are resolved with `render`."""
        code = self.artifacts.path(run.code_digest).read_bytes()
        if fields.get("inputs"):
            code = _with_files(code, self._inputs(run.owner_id, fields["inputs"]))
        if step.kind == "job":
            manifest = fields.get("manifest")
            if manifest is None:
                manifest = render(_manifest_file(code, str(fields["manifest_file"])))
            return merge(dict(manifest), credentials), code
        command = _command(step, fields)
        if step.kind == "python" and fields.get("script") is not None:
            script = f"{SCRIPT_DIR}/{step.name}.py"
            code = _with_files(code, [(script, str(fields["script"]).encode())])
            command = _env(fields) + shlex.join(
                ["python", script, *map(str, fields.get("args") or [])]
            )
        if fields.get("values") is not None:  # its typed inputs, as a JSON file in its code
            values = f"{SCRIPT_DIR}/{step.name}.values.json"
            text = json.dumps(fields["values"], default=str).encode()
            code = _with_files(code, [(values, text)])
            command = f"export STEP_VALUES={values}; {command}"
        made: dict[str, Any] = {
            "name": f"{run.pipeline}-{step.name}",
            "framework": {"name": "python", "command": command},
            "cpus": fields.get("cpus", 1),
            "memory": fields.get("memory", "1Gb"),
            "gpus": fields.get("gpus", 0),
        }
        if fields.get("environment") is not None:  # checked with the manifest at submission
            made["environment"] = fields["environment"]
        if fields.get("model_name") is not None:  # what its model is registered as
            made["model_name"] = str(fields["model_name"])
        return made, code

    def _inputs(self, owner_id: str, inputs: Any) -> list[tuple[str, bytes]]:
        """Each named earlier job's RESULT_DIR files (or those under one `path` of it), as
        `inputs/NAME/…` in the code: files travel through the artifact store, not a shared
        disk. A list of them is `inputs/NAME/0/…`, `inputs/NAME/1/…`. Only the owner's
        completed jobs."""
        if not isinstance(inputs, dict):
            raise StepFailed("inputs: a mapping of names to job ids (`steps.NAME.outputs.job_id`)")
        found: list[tuple[str, bytes]] = []
        budget = [MAX_INPUTS]
        for name, given in inputs.items():
            if not STEP_NAME.fullmatch(str(name)):
                raise StepFailed(f"inputs.{name}: a name is letters, digits, - and _")
            if isinstance(given, list):
                for index, each in enumerate(_flat(given)):
                    where = f"inputs/{name}/{index}"
                    found += self._input(owner_id, f"inputs.{name}[{index}]", each, where, budget)
            else:
                found += self._input(owner_id, f"inputs.{name}", given, f"inputs/{name}", budget)
        return found

    def _input(
        self, owner_id: str, field: str, given: Any, target: str, budget: list[int]
    ) -> list[tuple[str, bytes]]:
        """One input's files: a job id (its results), or `{job_id, path}` (a file or a folder
        of its results), put under `target`."""
        if isinstance(given, dict) and given.get("job_id", "") is None:
            return []  # an artifact known only by its URI: no files to bring
        job_id, path = _input_source(field, given)
        with self.lifecycle.db.session() as session:
            job = job_rows.get_job(session, job_id)
        if job is None or job.owner_id != owner_id:
            raise StepFailed(f"{field}: you have no job {job_id!r}")
        if job.state != JobState.COMPLETED.value:
            raise StepFailed(f"{field}: job {job_id} is {job.state}, not COMPLETED")
        root = Workspace(self.settings.jobs_dir, job.id).results
        found: list[tuple[str, bytes]] = []
        for relative in regular_files(root):
            if path and relative != path and not relative.startswith(path + "/"):
                continue
            try:
                with open_regular(root, relative) as handle:
                    content = handle.read(budget[0] + 1)
            except UnsafePath:
                continue
            budget[0] -= len(content)
            if budget[0] < 0:
                raise StepFailed(
                    f"inputs: more than {MAX_INPUTS // 2**20} MiB of earlier results; pass "
                    "large data through a data store"
                )
            inner = relative[len(path) :].lstrip("/") if path else relative
            found.append((f"{target}/{inner}" if inner else target, content))
        if path and not found:
            raise StepFailed(f"{field}: job {job_id} left nothing at {path}")
        return found

    def submit(
        self,
        owner: User,
        job_id: str,
        manifest: dict[str, Any],
        code: bytes,
        lineage: dict[str, Any],
    ) -> None:
        try:
            parsed = manifest_from_dict(manifest)
        except InvalidInput as exc:
            raise StepFailed(f"its manifest is refused: {exc.message}") from None
        self.lifecycle.submit(owner, parsed, manifest, code, job_id=job_id, lineage=lineage)

    def follow_job(self, job_id: str) -> Finished | None:
        """The job's end, once it has ended (None while it runs)."""
        with self.lifecycle.db.session() as session:
            job = job_rows.get_job(session, job_id)
        if job is None:
            return Finished("FAILED", f"its job {job_id} was deleted", {})
        state = JobState(job.state)
        if state == JobState.COMPLETED:
            try:
                return Finished("SUCCEEDED", "", self.job_outputs(job_id))
            except StepFailed as exc:  # what it left cannot be this step's outputs
                return Finished("FAILED", f"its job {job_id} completed, but {exc}", {})
        if state == JobState.FAILED:
            return Finished("FAILED", f"its job {job_id} failed: {job.status_message}", {})
        if state == JobState.HALTED:
            return Finished("HALTED", f"its job {job_id} was halted", {})
        return None

    def job_outputs(self, job_id: str) -> dict[str, Any]:
        outputs: dict[str, Any] = {
            "job_id": job_id,
            "metrics": _metrics(self.tds.metrics.final(job_id)),
        }
        found = self.registry.of_job(job_id)
        if found is not None:
            name, version = found
            outputs.update(_model(name, version.version))
        values = _values(Workspace(self.settings.jobs_dir, job_id).results)
        if values is not None:
            outputs["values"] = values
        return outputs

    def code_identity(self, digest: str) -> str:
        if digest not in self._identities:
            self._identities[digest] = code_identity(self.artifacts.path(digest).read_bytes())
        return self._identities[digest]

    # -- experiment --------------------------------------------------------------------------
    def create_experiment(
        self,
        owner: User,
        run: PipelineRun,
        fields: dict[str, Any],
        credentials: Credentials,
        name: str,
    ) -> None:
        """The step's experiment under `name` (at most once), its trial spec's credentials
        put back."""
        try:
            self.experiments.find(owner.id, name)
            return
        except NotFound:
            pass
        document = copy.deepcopy(fields["experiment"])
        trial_spec = trial_spec_of(document)
        if trial_spec is not None and credentials:
            restored = merge(trial_spec, credentials)
            trial_spec.clear()
            trial_spec.update(restored)
        if "spec" in document:
            document["metadata"] = {**(document.get("metadata") or {}), "name": name}
        else:
            document["name"] = name
        code = self.artifacts.path(run.code_digest).read_bytes()
        try:
            self.experiments.create(owner, yaml.safe_dump(document, sort_keys=False), code)
        except InvalidInput as exc:
            raise StepFailed(f"its experiment is refused: {exc.message}") from None

    def follow_experiment(self, owner_id: str, name: str) -> Finished | None:
        try:
            experiment = self.experiments.find(owner_id, name)
        except NotFound:
            return Finished("FAILED", f"its experiment {name} was deleted", {})
        if experiment.state in ("CREATED", "RUNNING"):
            return None
        if experiment.state == "HALTED":
            return Finished("HALTED", f"its experiment {name} was halted", {})
        trials = self.experiments.trials(experiment.id)
        best = next((t for t in trials if t.number == experiment.best_trial), None)
        outputs: dict[str, Any] = {"experiment": name, "state": experiment.state}
        if best is not None:
            outputs |= {
                "best_trial": best.number,
                "objective": best.objective,
                "parameters": best.parameters,
                "metrics": best.metrics,
            }
        if experiment.best_model:
            model, _, version = experiment.best_model.partition("@")
            outputs.update(_model(model, int(version)))
        if experiment.state != "SUCCEEDED":
            return Finished("FAILED", f"its experiment {name}: {experiment.message}", outputs)
        return Finished("SUCCEEDED", "", outputs)

    # -- select and deploy -------------------------------------------------------------------
    def select(
        self, owner_id: str, fields: dict[str, Any], candidates: list[str]
    ) -> dict[str, Any]:
        """The best version among `candidates` (NAME@VERSION), or of the model `model`."""
        metric, mode = str(fields["metric"]), str(fields.get("mode", "max"))
        if fields.get("model") is not None:
            try:
                version = self.registry.best(owner_id, str(fields["model"]), metric, mode)
            except (NotFound, InvalidInput) as exc:
                raise StepFailed(exc.message) from None
            name = str(fields["model"])
            return {**_model(name, version.version), "metrics": _metrics(version.metrics)}
        scored = []
        for ref in candidates:
            name, _, number = ref.partition("@")
            try:
                version = self.registry.version(owner_id, name, number)
            except NotFound:
                continue
            value = metric_value(version.metrics, metric)
            if value is not None:
                scored.append((value if mode == "max" else -value, ref, name, version))
        if not scored:
            said = ", ".join(candidates) or "none"
            raise StepFailed(
                f"no model of the steps it selects from has a final {metric!r} ({said})"
            )
        _, ref, name, version = max(scored, key=lambda s: s[0])
        return {**_model(name, version.version), "metrics": _metrics(version.metrics)}

    def follow_deploy(
        self, owner_id: str, name: str, outputs: dict[str, Any], waited: float, limit: float
    ) -> Finished | None:
        """Done when the deployment serves the version; failed if it fails or is not serving
        it within `limit` seconds."""
        try:
            view = self.deployments.get(owner_id, name)
        except NotFound:
            return Finished("FAILED", f"deployment {name} was deleted", outputs)
        if _serving(view):
            return Finished("SUCCEEDED", "", outputs)
        if view["state"] == "failing" or waited > limit:
            why = view.get("message") or view["state"]
            said = (
                "is failing" if view["state"] == "failing" else f"is not serving after {limit:g} s"
            )
            return Finished("FAILED", f"deployment {name} {said}: {why}", outputs)
        return None

    def deploy(self, owner_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """The deployment created, or moved to the version if it exists (with a
        `canary_percent` under 100, the version is its canary, served that share of requests)."""
        name, ref = str(fields["deployment"]), str(fields["model"])
        model, _, version = ref.partition("@")
        version = version or "latest"
        public = fields.get("public") is True  # answers without a token: on a trusted network
        scaling: dict[str, Any] = {
            key: int(fields[key]) for key in ("min_replicas", "max_replicas") if key in fields
        }
        scaling.update(fields.get("scaling") or {})
        percent = fields.get("canary_percent")
        watch = fields.get("monitoring") or None  # the API's shape; changes what it names
        try:
            try:
                current = self.deployments.get(owner_id, name)
            except NotFound:
                view = self.deployments.create(
                    owner_id, name, model, version, Scaling(**scaling), None, public=public,
                    monitoring=Monitoring().changed(watch) if watch else None,
                )  # fmt: skip
            else:
                if current["model"] != model:
                    raise StepFailed(
                        f"deployment {name} serves model {current['model']}, not {model}; "
                        "delete it or deploy under another name"
                    )
                canary = None
                if percent is not None and float(percent) < 100:
                    served = self.registry.version(owner_id, model, version).version
                    if served != int(current["model_version"]):
                        canary = CanaryChange(str(served), float(percent), False, False)
                view = self.deployments.update(
                    owner_id, name, scaling, None if canary else version, public=public,
                    canary=canary, monitoring=watch,
                )  # fmt: skip
        except (InvalidInput, NotFound) as exc:
            raise StepFailed(exc.message) from None
        return {
            "deployment": name,
            "url": view["endpoint"],
            "infer_url": view["urls"]["v2_infer"],
            **_model(model, int(view["model_version"])),
        }


def code_identity(code: bytes) -> str:
    """What the code is, not how it was zipped: each file's name and content (a zip made
    again from the same folder has new timestamps, and the same identity)."""
    digest = hashlib.sha256()
    with zipfile.ZipFile(io.BytesIO(code)) as archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            if not info.is_dir():
                digest.update(info.filename.encode() + b"\0")
                digest.update(hashlib.sha256(archive.read(info)).digest())
    return digest.hexdigest()


def _serving(view: dict[str, Any]) -> bool:
    """Whether a deployment answers with the version it was given."""
    ready = view["state"] in ("ready", "scaled to zero")
    return ready and str(view.get("serving_version")) == str(view["model_version"])


def _model(name: str, version: int) -> dict[str, Any]:
    return {"model": f"{name}@{version}", "model_name": name, "model_version": version}


def _metrics(final: dict[str, float]) -> dict[str, float]:
    """Each final metric as `group/name`, and by its name alone (a test-like group first)."""
    found = dict(final)
    for key in final:
        bare = key.split("/", 1)[-1]
        if bare not in found:
            value = metric_value(final, bare)
            if value is not None:
                found[bare] = value
    return found


def _values(results: Path) -> dict[str, Any] | None:
    """`RESULT_DIR/outputs.json`: a JSON object of at most 64 KiB nested at most MAX_DEPTH
    levels, or nothing (no file); one that is there but is not that fails the step
    (`StepFailed`, saying why). The folder was written by untrusted code: no link is
    followed, as the registry reads `model/`."""
    try:
        with open_regular(results, "outputs.json") as handle:
            text = handle.read(MAX_VALUES + 1)
    except OSError:
        return None
    if len(text) > MAX_VALUES:
        raise StepFailed(f"its outputs.json is larger than {MAX_VALUES // 1024} KiB")
    try:
        found = json.loads(text)
    except (ValueError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else f"not JSON ({exc})"
        raise StepFailed(f"its outputs.json is {why}") from None
    if not isinstance(found, dict):
        raise StepFailed(f"its outputs.json is a {type(found).__name__}, not a JSON object")
    if nesting(found) > MAX_DEPTH:
        raise StepFailed(f"its outputs.json is nested deeper than {MAX_DEPTH} levels")
    return found


def nesting(value: Any) -> int:
    """How deep mappings and lists go in a value, found without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _flat(items: list[Any]) -> list[Any]:
    """A list of inputs with the lists in it laid out in order (a fan-out's lists of files)."""
    return [each for item in items for each in (_flat(item) if isinstance(item, list) else [item])]


def _input_source(field: str, given: Any) -> tuple[str, str]:
    """An input's job and path within its results ('' for all of them)."""
    if isinstance(given, dict):
        job_id, path = given.get("job_id"), str(given.get("path") or "").strip("/")
        if ".." in path.split("/"):
            raise StepFailed(f"{field}.path: {path!r} leaves the job's results")
    else:
        job_id, path = given, ""
    if not isinstance(job_id, str) or not job_id:
        raise StepFailed(f"{field}: a job id, or {{job_id, path}}; got {given!r}")
    return job_id, path


def _command(step: Step, fields: dict[str, Any]) -> str:
    if step.kind == "shell":
        return _env(fields) + str(fields["command"])
    args = [str(a) for a in fields.get("args") or []]
    return _env(fields) + shlex.join(["python", str(fields.get("file") or ""), *args])


def _env(fields: dict[str, Any]) -> str:
    env = fields.get("env") or {}
    if not isinstance(env, dict):
        raise StepFailed(f"env must be a mapping of names to values, got {env!r}")
    return "".join(
        f"export {k}={shlex.quote(str(v))}; " for k, v in env.items() if str(k).isidentifier()
    )


def _manifest_file(code: bytes, path: str) -> dict[str, Any]:
    try:
        with zipfile.ZipFile(io.BytesIO(code)) as archive:
            text = archive.read(path.removeprefix("./"))
    except KeyError:
        raise StepFailed(f"manifest_file: {path} is not in the code folder") from None
    try:
        found = safe_load(text)
    except (UnsafeYaml, yaml.YAMLError) as exc:
        raise StepFailed(f"manifest_file {path} is not a manifest: {exc}") from None
    if not isinstance(found, dict):
        raise StepFailed(f"manifest_file {path} is not a mapping")
    return found


def _with_files(code: bytes, added: list[tuple[str, bytes]]) -> bytes:
    """The code zip with more files (an inline script, an earlier step's results)."""
    names = {path for path, _ in added}
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(code)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            if info.filename not in names:
                target.writestr(info, source.read(info))
        for path, content in added:
            target.writestr(path, content)
    return out.getvalue()
