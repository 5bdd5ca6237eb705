"""A deployment's code, the platform's side: the runtime its owner asked for, packages added to
its replicas' environment, its built-in explainer and its transformer — checked, stored, and
described to the gateway as one environment per folder its replicas serve.

The platform reads names and text here (a zip's directory, `requirements.txt`, an MLmodel);
it never imports, unpickles or runs what the owner sent: a replica does, in its sandbox.
"""

from __future__ import annotations

import base64
import binascii
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loom.domain import environments
from loom.domain.errors import InvalidInput, LoomError
from loom.environments.sections import Sources
from loom.sandbox.zips import ArchiveRefused, unpack_over
from loom.serving import replica_env
from loom.serving.formats import (
    MAX_MLMODEL,
    RUNTIME_NAMES,
    TRANSFORMER,
    Chosen,
    NotServable,
    model_file,
    zip_entries,
)
from loom.storage.archive import check_zip
from loom.storage.artifacts import ArtifactStore
from loom.store.tables import Deployment

EXPLAINERS = tuple(replica_env.EXPLAINERS)
MAX_TRANSFORMER = 16 * 2**20  # a transformer is code, not a model: zipped, at most this


@dataclass(frozen=True)
class Code:
    """What the owner asked for beside the model version; checked by `checked`."""

    runtime: str | None = None
    pip: list[str] = field(default_factory=list)
    explainer: str | None = None
    transformer: str | bool | None = None  # on input, the folder's zip in base64

    def checked(self) -> Code:
        if self.runtime is not None and self.runtime not in RUNTIME_NAMES:
            raise InvalidInput(
                f"runtime: {self.runtime!r} is not one of {', '.join(RUNTIME_NAMES)}",
                field="runtime",
            )
        for number, requirement in enumerate(self.pip):
            problem = environments.requirement_problem(requirement)
            if problem is not None:
                raise InvalidInput(f"pip[{number}]: {requirement!r}: {problem}", field="pip")
        if self.explainer is not None and self.explainer not in EXPLAINERS:
            raise InvalidInput(
                f"explainer: {self.explainer!r}; the built-in one is {', '.join(EXPLAINERS)}",
                field="explainer",
            )
        return self


def code_of(row: Deployment) -> Code:
    """What the deployment's owner asked for beside the model version."""
    return Code(row.runtime, list(row.pip or []), row.explainer, bool(row.transformer) or None)


def check_version(chosen: Chosen, code: Code, *, on_ray: bool) -> None:
    """What cannot be served as asked, refused with the field."""
    if on_ray and (chosen.runs_code or code.transformer or code.explainer or code.pip):
        raise InvalidInput(
            f"a {chosen.kind} model (or a transformer, an explainer or packages) is not served "
            "on a Ray cluster yet: its replicas need an environment built on their node",
            field="model",
        )
    if code.explainer and chosen.kind == "kserve":
        raise InvalidInput(
            "explainer: a predictor.py explains with its model's own explain()",
            field="explainer",
        )


def store_transformer(artifacts: ArtifactStore, encoded: str) -> dict[str, Any]:
    """The transformer's zip (base64), checked — a safe archive holding `transformer.py` —
    and kept in the artifact store by its digest."""
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(f"transformer: not base64 ({exc})", field="transformer") from exc
    if len(data) > MAX_TRANSFORMER:
        raise InvalidInput(
            f"transformer: {len(data)} bytes zipped, at most {MAX_TRANSFORMER}",
            field="transformer",
        )
    try:
        names = check_zip(data, max_unpacked=8 * MAX_TRANSFORMER)
    except LoomError as exc:
        raise InvalidInput(f"transformer: {exc}", field="transformer") from exc
    if TRANSFORMER not in names:
        shown = ", ".join(sorted(names))[:200]
        raise InvalidInput(
            f"transformer: the folder holds no {TRANSFORMER} (a kserve.Model with preprocess "
            f"and postprocess); it has: {shown}",
            field="transformer",
        )
    return {"digest": artifacts.put(data), "size": len(data)}


def materialize_transformer(artifacts: ArtifactStore, info: dict[str, Any], root: Path) -> Path:
    """The transformer's files, unpacked once into the deployment's folder."""
    target = root / f"transformer-{str(info['digest']).split(':')[-1][:16]}"
    if target.is_dir():
        return target
    partial = Path(tempfile.mkdtemp(dir=root, prefix=".transformer-"))
    try:
        unpack_over(artifacts.path(info["digest"]), partial, max_bytes=8 * MAX_TRANSFORMER)
    except ArchiveRefused as exc:
        raise InvalidInput(f"transformer: {exc}", field="transformer") from exc
    partial.rename(target)
    return target


def environments_of(row: Deployment, sources: Sources, *folders: Path) -> dict[str, dict[str, Any]]:
    """The environment of each folder the deployment's replicas serve (its model versions and
    its transformer), where they need one beyond the platform's Python."""
    made = {}
    for folder in folders:
        transformer = folder.name.startswith("transformer-")
        section = environment(
            folder,
            sources,
            runtime=None if transformer else row.runtime,
            pip=row.pip or [],
            explainer=None if transformer else row.explainer,
            gpus=row.gpus_per_replica,
            transformer=transformer,
        )
        if section is not None:
            made[str(folder)] = section
    return made


def transformer_dir(row: Deployment, artifacts: ArtifactStore, root: Path) -> str:
    """The deployment's transformer folder ("" without one), unpacked on first use."""
    if not row.transformer:
        return ""
    return str(materialize_transformer(artifacts, row.transformer, root))


def choose(folder: Path, runtime: str | None) -> Chosen:
    """What a materialized model folder serves, by its names (as its replicas will choose)."""
    names = replica_env.names_in(folder)
    try:
        return model_file(
            names,
            replica_env.small_reader(folder, MAX_MLMODEL),
            lambda name: zip_entries(folder / name),
            runtime,
        )
    except NotServable as exc:
        raise InvalidInput(f"model: {exc}", field="model") from exc


def environment(
    folder: Path,
    sources: Sources,
    *,
    runtime: str | None = None,
    pip: Sequence[str] = (),
    explainer: str | None = None,
    gpus: int = 0,
    transformer: bool = False,
) -> dict[str, Any] | None:
    """The environment section for the replicas that serve `folder` (None: the platform's
    Python as it is); a bad requirement is refused with the field."""
    chosen = Chosen(TRANSFORMER, "kserve") if transformer else choose(folder, runtime)
    try:
        return replica_env.section_for(
            folder,
            chosen,
            sources,
            pip,
            explainer=explainer,
            gpus=gpus,
            transformer=transformer,
        )
    except environments.EnvironmentProblem as exc:
        raise InvalidInput(f"{exc.field}: {exc.message}", field=exc.field) from exc
