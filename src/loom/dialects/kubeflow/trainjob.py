"""Trainer v2's TrainJob (`trainer.kubeflow.org/v1alpha1`) as one Loom job: its `runtimeRef` names
one of Loom's built-in runtimes, the twins of Trainer's ClusterTrainingRuntimes, and `trainer`
overrides the runtime's image, command, nodes and resources. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loom.dialects.kinds import Document
from loom.dialects.kubeflow import pods
from loom.dialects.kubeflow.images import runtime_of
from loom.dialects.kubeflow.pods import ConfigMaps, Notes, Paths
from loom.dialects.kubeflow.training import JobPlan, run_policy
from loom.domain import spec_checks as check
from loom.domain.replicas import Layout

TRAINJOB_GROUP = "trainer.kubeflow.org"


@dataclass(frozen=True)
class Runtime:
    """A built-in runtime: its ML policy (the variables its nodes get), Loom's framework, and
    the image Trainer's runtime would run."""

    policy: str
    framework: str
    image: str
    nodes: int = 1


RUNTIMES = {
    "torch-distributed": Runtime(
        "torch", "pytorch", "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"
    ),
    "jax-distributed": Runtime("jax", "jax", "nvcr.io/nvidia/jax:25.10-py3"),
    "xgboost-distributed": Runtime("xgboost", "python", "ghcr.io/kubeflow/trainer/xgboost-runtime"),
}
_REFUSED_RUNTIMES = {
    "deepspeed-distributed": "DeepSpeed's launcher (mpirun over ssh) is not offered",
    "mlx-distributed": "MLX runs on Apple silicon",
}
_SPEC = ("runtimeRef", "trainer", "initializer", "runtimePatches", "suspend", "managedBy")
_TRAINER = ("image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode")


def train_job(
    document: Document,
    name: str,
    code: frozenset[str],
    *,
    config_maps: ConfigMaps = lambda _name: None,
    paths: Paths | None = None,
    where: str = "",
) -> JobPlan:
    notes = Notes()
    paths = paths or Paths(code)
    paths.entrypoint = pods.entrypoint_of(document) or paths.entrypoint
    at = check.join(where, "spec")
    spec = check.section(document, "spec", where, "the runtime and the trainer")
    check.known(spec, (*_SPEC, "activeDeadlineSeconds"), at)
    runtime = _runtime(
        check.section(spec, "runtimeRef", at, "the runtime to run"), f"{at}.runtimeRef"
    )
    trainer_at = f"{at}.trainer"
    trainer = check.mapping(spec.get("trainer") or {}, trainer_at)
    check.known(trainer, _TRAINER, trainer_at)
    if spec.get("initializer"):
        raise check.fail(
            f"{at}.initializer",
            "dataset and model initializers are not offered: bring the data with the code, or "
            "fetch it in the trainer's command",
        )
    if spec.get("runtimePatches"):
        notes.add(
            f"{at}.runtimePatches",
            "ignored",
            "they patch the runtime's pods, which are Loom's learners here",
        )
    if "managedBy" in spec:
        notes.add(f"{at}.managedBy", "ignored", "Loom runs it")
    container: dict[str, Any] = {
        k: trainer[k] for k in ("image", "command", "args", "env") if k in trainer
    }
    container.setdefault("image", runtime.image)
    container["name"] = "node"
    if "resourcesPerNode" in trainer:
        container["resources"] = trainer["resourcesPerNode"]
    translated = pods.container(container, trainer_at, paths, notes)
    nodes = check.count(trainer.get("numNodes", runtime.nodes), f"{trainer_at}.numNodes", 1) or 1
    nproc = trainer.get("numProcPerNode")
    if nproc is not None and nproc not in ("auto", 1, "1"):
        notes.add(
            f"{trainer_at}.numProcPerNode",
            "approximated",
            "PET_NPROC_PER_NODE says it; a learner is given its resourcesPerNode",
        )
    manifest: dict[str, Any] = {
        "name": name,
        "learners": nodes,
        "framework": {"name": runtime.framework, "command": translated.script()},
        "framework_options": {
            "replicas": Layout(
                "TrainJob",
                (("node", nodes),),
                name,
                runtime.policy,
                None if nproc in (None, "auto") else str(nproc),
            ).as_options(),
            "image": str(container["image"]),
        },
    }
    manifest.update(translated.share.manifest())
    image = runtime_of(str(container["image"]))
    if image.known and image.framework == runtime.framework and image.version:
        manifest["framework"]["version"] = image.version
    elif not image.known:
        notes.add(
            f"{trainer_at}.image",
            "approximated",
            f"{container['image']} is not a known {runtime.framework} image: the nodes run in "
            "the platform's Python environment, with the runtime's variables",
        )
        manifest["environment"] = {"install_framework": False}
    policy = run_policy(
        {k: spec[k] for k in ("suspend", "activeDeadlineSeconds") if k in spec},
        at,
        ["Never"],
        notes,
    )
    manifest.update(policy.manifest)
    return JobPlan(manifest, notes.all(), dict(paths.files), policy.suspend)


def _runtime(ref: dict[str, Any], where: str) -> Runtime:
    check.known(ref, ("name", "apiGroup", "kind"), where)
    name = check.name(ref.get("name"), f"{where}.name")
    group = ref.get("apiGroup", TRAINJOB_GROUP)
    if group != TRAINJOB_GROUP:
        raise check.fail(f"{where}.apiGroup", f"{group!r}; runtimes are {TRAINJOB_GROUP}'s")
    kind = ref.get("kind", "ClusterTrainingRuntime")
    if kind not in ("ClusterTrainingRuntime", "TrainingRuntime"):
        raise check.fail(
            f"{where}.kind", f"{kind!r} is not ClusterTrainingRuntime or TrainingRuntime"
        )
    if name in _REFUSED_RUNTIMES:
        raise check.fail(f"{where}.name", f"{name}: {_REFUSED_RUNTIMES[name]}")
    if name not in RUNTIMES:
        offered = ", ".join(sorted(RUNTIMES))
        raise check.fail(
            f"{where}.name", f"no runtime {name!r}; Loom's built-in runtimes are {offered}"
        )
    return RUNTIMES[name]
