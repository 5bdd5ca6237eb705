"""Katib's Experiment as Kubeflow users write it, with a Kubernetes trial spec (a batch Job, a
TFJob, a PyTorchJob, ..., a TrainJob, or one kept in a ConfigMap), as the Experiment Loom's
`hpo` runs: its trial spec a Loom manifest, `${trialParameters.X}` placeholders kept for each
trial, Katib's metadata references (`${trialSpec.Kind}`, `.APIVersion`, `.Labels[k]`,
`.Annotations[k]`, `.Namespace`) resolved, and the paths Katib mounts into a trial's pod
(`/katib`, `/var/log/katib`, the metrics collector's folder, PBT's checkpoints) mapped into the
trial's own folders. Pure."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from loom.dialects.kinds import Document, Note
from loom.dialects.kubeflow import pods
from loom.dialects.kubeflow.images import IMAGE_KEY, runtime_of
from loom.dialects.kubeflow.pods import ConfigMaps, Notes, Paths, mount_root
from loom.dialects.kubeflow.training import FAMILIES, run_policy, training_job
from loom.dialects.kubeflow.trainjob import train_job
from loom.domain import spec_checks as check
from loom.domain.safe_yaml import UnsafeYaml, safe_load

KATIB_PATHS = ("/katib", "/var/log/katib")  # where Katib's collectors and examples write
_METADATA = re.compile(
    r"^\$\{trialSpec\.(Name|Namespace|Kind|APIVersion|Labels|Annotations)(?:\[(.+)\])?\}$"
)
_JOB = ("template", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished")
_JOB_REFUSED = ("parallelism", "completions", "completionMode", "podFailurePolicy")


@dataclass
class ExperimentPlan:
    document: Document  # Loom's form: the trial spec a Loom manifest
    notes: tuple[Note, ...]
    files: dict[str, str] = field(default_factory=dict)  # brought with the code


def katib_experiment(
    document: Document, code: frozenset[str], config_maps: ConfigMaps = lambda _name: None
) -> ExperimentPlan:
    found = copy.deepcopy(document)
    found.pop("status", None)
    notes = Notes()
    metadata = found.get("metadata") or {}
    name = str(metadata.get("name"))
    spec = found.get("spec")
    template = spec.get("trialTemplate") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(template, dict):
        return ExperimentPlan(found, notes.all())  # Loom's own checks say what is missing
    where = "spec.trialTemplate"
    trial_spec = _source(template, where, config_maps)
    if trial_spec is None or ("apiVersion" not in trial_spec and "kind" not in trial_spec):
        return ExperimentPlan(found, notes.all())  # a Loom manifest already
    _resolve_metadata(template, trial_spec, str(metadata.get("namespace") or "default"), where)
    paths = Paths(code, entrypoint=pods.entrypoint_of(trial_spec) or pods.entrypoint_of(found))
    for path in KATIB_PATHS:
        paths.mount(path, "${LOG_DIR}" + path)
    _collector(spec, paths, notes)
    _checkpoints(spec, paths)
    primary = template.pop("primaryContainerName", None)
    template["trialSpec"] = trial_manifest(
        trial_spec, name, paths, notes, config_maps, f"{where}.trialSpec", primary
    )
    return ExperimentPlan(found, notes.all(), dict(paths.files))


def _source(template: dict[str, Any], where: str, config_maps: ConfigMaps) -> dict[str, Any] | None:
    """The trial spec, inline or in a ConfigMap applied with the experiment (or before it)."""
    source = template.pop("configMap", None)
    if source is None:
        found = template.get("trialSpec")
        return found if isinstance(found, dict) else None
    at = f"{where}.configMap"
    source = check.mapping(source, at)
    check.known(source, ("configMapName", "configMapNamespace", "templatePath"), at)
    name = check.name(source.get("configMapName"), f"{at}.configMapName")
    path = check.name(source.get("templatePath"), f"{at}.templatePath")
    data = config_maps(name)
    if data is None:
        raise check.fail(
            f"{at}.configMapName",
            f"no ConfigMap {name!r}: apply it with the experiment (loom apply -f) or before it",
        )
    if path not in data:
        raise check.fail(f"{at}.templatePath", f"ConfigMap {name} has no key {path!r}")
    try:
        loaded = safe_load(data[path])
    except (UnsafeYaml, ValueError) as exc:
        raise check.fail(f"{at}.templatePath", f"{path} is not a YAML trial spec: {exc}") from None
    template["trialSpec"] = check.mapping(loaded, f"{at}.templatePath")
    return template["trialSpec"]  # type: ignore[no-any-return]


def _resolve_metadata(
    template: dict[str, Any], trial_spec: dict[str, Any], namespace: str, where: str
) -> None:
    """Katib's references to the trial's own object: the ones known now become their values;
    `${trialSpec.Name}` stays, the trial's name, given with each trial."""
    kept = []
    constants: dict[str, str] = {}
    meta = trial_spec.get("metadata") if isinstance(trial_spec.get("metadata"), dict) else {}
    for index, entry in enumerate(template.get("trialParameters") or []):
        reference = entry.get("reference") if isinstance(entry, dict) else None
        match = _METADATA.match(reference) if isinstance(reference, str) else None
        if match is None or match.group(1) == "Name":
            kept.append(entry)
            continue
        at = f"{where}.trialParameters[{index}].reference"
        what, key = match.group(1), match.group(2)
        if what == "Namespace":
            value = namespace
        elif what == "Kind":
            value = str(trial_spec.get("kind"))
        elif what == "APIVersion":
            value = str(trial_spec.get("apiVersion"))
        else:
            bag = (meta or {}).get(what.lower()) or {}
            if key is None or key not in bag:
                raise check.fail(at, f"the trial spec's metadata.{what.lower()} has no {key!r}")
            value = str(bag[key])
        constants[str(entry.get("name"))] = value
    template["trialParameters"] = kept
    _replace(trial_spec, constants)


def _replace(value: Any, constants: dict[str, str]) -> Any:
    """`${trialParameters.NAME}` of each constant replaced in every string, in place."""
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = _replace(item, constants)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = _replace(item, constants)
    elif isinstance(value, str):
        for name, constant in constants.items():
            value = value.replace("${trialParameters." + name + "}", constant)
    return value


def _collector(spec: dict[str, Any], paths: Paths, notes: Notes) -> None:
    """The folder Katib mounts for a File or TensorFlowEvent collector is the trial's own; a
    Custom collector's sidecar is not run: the file it names is read as a File collector's."""
    at = "spec.metricsCollectorSpec"
    collector_spec = spec.get("metricsCollectorSpec")
    if not isinstance(collector_spec, dict):
        return
    collector = collector_spec.get("collector") or {}
    source = collector_spec.get("source") or {}
    system = source.get("fileSystemPath") if isinstance(source, dict) else None
    if isinstance(collector, dict) and collector.get("kind") == "Custom":
        if not isinstance(system, dict) or not system.get("path"):
            raise check.fail(
                f"{at}.collector.kind",
                "Custom is a sidecar container of your own, which is not run; give its "
                "source.fileSystemPath and Loom reads that file as a File collector does",
            )
        collector_spec["collector"] = {"kind": "File"}
        notes.add(
            f"{at}.collector.customCollector",
            "approximated",
            f"the custom collector is not run: {system['path']} is read as Katib's File "
            "collector reads it (TEXT lines of name=value)",
        )
    if not isinstance(system, dict) or not isinstance(system.get("path"), str):
        return
    path = system["path"]
    kind = collector.get("kind") if isinstance(collector, dict) else None
    folder = (
        path
        if kind == "TensorFlowEvent" or system.get("kind") == "Directory"
        else path.rsplit("/", 1)[0]
    )
    root = mount_root(folder or "/")
    if root not in ("", "/") and paths.mapped(root) is None:
        paths.mount(root, "${LOG_DIR}" + root)
    mapped = paths.mapped(path)
    if mapped is not None:
        system["path"] = mapped
        notes.add(
            f"{at}.source.fileSystemPath.path",
            "approximated",
            f"{path} is the trial's own {mapped}",
        )


def _checkpoints(spec: dict[str, Any], paths: Paths) -> None:
    """PBT's `suggestion_trial_dir`: where a trial finds its parent's checkpoints."""
    algorithm = spec.get("algorithm") or {}
    for entry in algorithm.get("algorithmSettings") or []:
        if isinstance(entry, dict) and entry.get("name") == "suggestion_trial_dir":
            value = str(entry.get("value") or "")
            if value.startswith("/"):
                paths.mount(value, "${CHECKPOINT_DIR}")


def trial_manifest(
    trial_spec: dict[str, Any],
    name: str,
    paths: Paths,
    notes: Notes,
    config_maps: ConfigMaps,
    where: str,
    primary: str | None,
) -> dict[str, Any]:
    """A Kubernetes trial spec as the Loom manifest each trial runs."""
    kind = trial_spec.get("kind")
    api = trial_spec.get("apiVersion")
    if (api, kind) == ("batch/v1", "Job"):
        return _batch_job(trial_spec, name, paths, notes, config_maps, where, primary)
    if api == "kubeflow.org/v1" and kind in FAMILIES:
        plan = training_job(
            trial_spec, name, paths.code, config_maps=config_maps, paths=paths, where=where
        )
    elif api == "trainer.kubeflow.org/v1alpha1" and kind == "TrainJob":
        plan = train_job(
            trial_spec, name, paths.code, config_maps=config_maps, paths=paths, where=where
        )
    else:
        offered = "batch/v1 Job, kubeflow.org/v1 " + ", ".join(FAMILIES) + ", TrainJob"
        raise check.fail(f"{where}.kind", f"{api} {kind} cannot be a trial here; use {offered}")
    for note in plan.notes:
        notes.add(note.field, note.treatment, note.why)
    return plan.manifest


def _batch_job(
    trial_spec: dict[str, Any],
    name: str,
    paths: Paths,
    notes: Notes,
    config_maps: ConfigMaps,
    where: str,
    primary: str | None,
) -> dict[str, Any]:
    """A batch Job: one learner, its pod's main container (Katib's primaryContainerName)."""
    check.known(trial_spec, ("apiVersion", "kind", "metadata", "spec"), where)
    at = f"{where}.spec"
    spec = check.section(trial_spec, "spec", where, "the Job's pod template")
    check.known(spec, (*_JOB, *_JOB_REFUSED), at)
    for key in _JOB_REFUSED:
        if key in spec and spec[key] not in (None, 1, "NonIndexed"):
            raise check.fail(f"{at}.{key}", "a trial is one run: leave it out (or 1)")
    pod = pods.pod(
        spec.get("template"),
        f"{at}.template",
        paths,
        notes,
        primary=primary,
        config_maps=config_maps,
    )
    image = pod.main.image
    runtime = runtime_of(image) if image else None
    framework: dict[str, Any] = {"name": "python", "command": pod.script()}
    environment: dict[str, Any] = {}
    if runtime is not None and runtime.known and runtime.framework:
        framework["name"] = runtime.framework
        if runtime.version:
            framework["version"] = runtime.version
    elif image is not None:
        notes.add(
            f"{at}.template.spec.containers[*].image",
            "approximated",
            f"{image} is not a known framework image: the trial runs in the platform's Python "
            "environment",
        )
    manifest: dict[str, Any] = {"name": name, "framework": framework, **pod.main.share.manifest()}
    if image is not None:
        manifest["framework_options"] = {IMAGE_KEY: image}
    if environment:
        manifest["environment"] = environment
    policy = run_policy(
        {k: spec[k] for k in ("backoffLimit", "activeDeadlineSeconds") if k in spec},
        at,
        ["OnFailure" if "backoffLimit" in spec else "Never"],
        notes,
    )
    manifest.update(policy.manifest)
    if "ttlSecondsAfterFinished" in spec:
        notes.add(
            f"{at}.ttlSecondsAfterFinished", "ignored", "a trial's job is kept with its experiment"
        )
    return manifest
