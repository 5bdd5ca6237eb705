"""What a replica runs with: the packages its model's format needs, its `requirements.txt` and
the deployment's own `pip` list, as an environment plan built like a job's (§3.9) — once per
content hash, shared read-only — by the gateway before it starts the replica.

A model Loom's own runtimes read (ONNX, TorchScript, MLflow's xgboost) needs nothing but the
platform's Python. A format whose loading runs its author's code gets what loads it: KServe's
package for a `kserve.Model`, TensorFlow for a SavedModel, and so on, unless its requirements
name it (their pin wins), and never what the platform's own Python already has.

Told from the files' names and `requirements.txt` alone: nothing here imports or unpickles.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from loom.domain import environments
from loom.environments.sections import Sources, provided
from loom.serving.formats import REQUIREMENTS, Chosen

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
KSERVE = "kserve==0.21.0"  # the release Loom's adapter is tested with
EXPLAINERS = {"captum": "captum==0.9.0"}  # the built-in explainer's library

# What loads each format that runs its author's code; the framework's runtime where the
# domain knows one (its version and its GPU build), else the packages themselves.
FRAMEWORK: dict[str, str] = {"tensorflow": "tensorflow", "keras": "tensorflow"}
PACKAGES: dict[str, tuple[str, ...]] = {
    "kserve": (KSERVE,),
    "pyfunc": ("pandas",),  # MLflow's pyfunc imports it; mlflow-skinny does not bring it
    "sklearn": ("scikit-learn", "joblib"),
    "torch": ("torch",),
    "lightgbm": ("lightgbm",),
    "xgboost_native": ("xgboost-cpu",),
    "huggingface": ("transformers",),
}
# The distributions that already bring a package: a requirement on one of these is the model's
# own pin of it (xgboost and xgboost-cpu are one library).
SAME = {"xgboost-cpu": {"xgboost", "xgboost-cpu"}, "tensorflow-cpu": {"tensorflow"}}


def plan(
    chosen: Chosen,
    requirements: Sequence[str],
    pip: Sequence[str] = (),
    *,
    explainer: str | None = None,
    gpus: int = 0,
    transformer: bool = False,
) -> environments.Plan | None:
    """The replica's environment; None when the platform's Python serves the model as it is.
    A transformer's code always runs with KServe's package. A format Loom's own runtimes read
    (ONNX, TorchScript, XGBoost) takes no requirements: its loader is the platform's."""
    if not (chosen.runs_code or transformer):
        requirements = []
    wanted = [*requirements, *pip]
    named = {_name(r) for r in wanted}
    kind = "kserve" if transformer else chosen.kind
    extra = [
        p
        for p in PACKAGES.get(kind, ())
        if not ({_name(p)} | SAME.get(_name(p), set())) & named and _name(p) not in provided()
    ]
    if explainer is not None and _name(EXPLAINERS[explainer]) not in provided():
        extra.append(EXPLAINERS[explainer])  # better in the platform's: loom-dl[explain]
    if kind == "pyfunc":  # MLflow's model loader, without its tracking server
        requirements = [_skinny(r) for r in requirements]
    return environments.plan(
        framework=FRAMEWORK.get(kind, "python"),
        version=None,
        pip=[*extra, *pip],
        requirements=requirements,
        python=PYTHON,
        provided=provided(),
        gpus=gpus,
    )


def model_requirements(folder: Path) -> list[str]:
    """The model's `requirements.txt`, checked as a job's is (no URL, no installer option)."""
    path = folder / REQUIREMENTS
    if not path.is_file():
        return []
    return environments.read_requirements(_text(path), REQUIREMENTS)


def section_for(
    folder: Path,
    chosen: Chosen,
    sources: Sources,
    pip: Sequence[str] = (),
    **options: Any,
) -> dict[str, Any] | None:
    """The `environment` section of a generation's spec: what the gateway builds or reuses."""
    return sources.section(plan(chosen, model_requirements(folder), pip, **options))


def names_in(folder: Path) -> set[str]:
    """A model folder's files, as paths relative to it."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def small_reader(folder: Path, limit: int) -> Callable[[str], bytes]:
    """Reads a small file of the model (its MLmodel, its requirements); a large one reads as
    too large, never in full."""

    def read(name: str) -> bytes:
        with (folder / name).open("rb") as handle:
            return handle.read(limit + 1)

    return read


def _text(path: Path) -> str:
    data = path.read_bytes()[: environments.MAX_REQUIREMENTS_FILE + 1]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise environments.EnvironmentProblem(
            f"{REQUIREMENTS}: not UTF-8 text", "environment.requirements"
        ) from None


def _name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return requirement.strip().lower()


def _skinny(requirement: str) -> str:
    """`mlflow==X` as `mlflow-skinny==X`: the same pyfunc loader without MLflow's server and UI
    (hundreds of MB a replica never uses)."""
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        return requirement
    if canonicalize_name(parsed.name) != "mlflow":
        return requirement
    marker = f"; {parsed.marker}" if parsed.marker else ""
    return f"mlflow-skinny{parsed.specifier}{marker}"
