"""One attempt of an admitted job: each learner's launch (its spec, the attempt's token, the
stores' credentials) and its row, with the GPUs it was given."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loom.domain.learner_env import MPI
from loom.domain.learner_images import learner_image
from loom.domain.manifest import Manifest
from loom.domain.states import JobState
from loom.launchers.base import LearnerLaunch
from loom.lifecycle.workspace import Workspace, learner_spec, new_gang, store_secrets
from loom.settings import Settings
from loom.store.tables import Learner


@dataclass(frozen=True)
class Attempt:
    job_id: str
    number: int
    manifest: Manifest
    workspace: Workspace
    code_zip: Path
    token: str
    devices: list[list[int]]  # each learner's GPUs
    api_urls: list[str]  # every live server, where there are several
    environment: dict[str, Any] | None = None  # what the wrappers build or reuse
    owner: str = ""  # the owner's name: a cluster launcher labels the job's objects with it


def gang_of(
    attempt: Attempt, settings: Settings, api_ca: str | None
) -> tuple[list[LearnerLaunch], list[Learner]]:
    """The learners' launches and rows; an MPI job's hostfile is written first."""
    gang = new_gang(len(attempt.devices))
    if attempt.manifest.framework.name.lower() in MPI:
        attempt.workspace.write_hostfile(gang)
    secrets = store_secrets(attempt.manifest)
    launches, rows = [], []
    for n, devices in enumerate(attempt.devices, start=1):
        handle = str(attempt.workspace.learner_dir(attempt.number, n))
        spec = learner_spec(
            workspace=attempt.workspace,
            manifest=attempt.manifest,
            job_id=attempt.job_id,
            attempt=attempt.number,
            learner=n,
            code_zip=attempt.code_zip,
            api_url=settings.api_url,
            api_ca=api_ca,
            home=settings.home_dir,
            retry_s=settings.learner_retry_s,
            halt_grace_s=settings.halt_grace_s,
            gang=gang,
            devices=devices,
        )
        spec["environment"] = attempt.environment
        # What a launcher on another machine moves under its own scratch folder.
        spec["roots"] = {"jobs": str(settings.jobs_dir), "environments": str(settings.envs_dir)}
        spec["checkpoint_sync_s"] = settings.learner_checkpoint_sync_s
        # What a launcher that places the gang itself needs to give each learner its addresses.
        options = attempt.manifest.framework_options
        spec["gang"] = {
            "framework": attempt.manifest.framework.name,
            "parameter_servers": int(options.get("parameter_servers", 0)),
            "placement": str(options.get("placement", "pack")),
            "replicas": options.get("replicas"),  # a Kubeflow object's layout, if any
        }
        image = learner_image(attempt.manifest.framework)
        if image is not None:  # refused at submission unless the launcher runs images
            spec["gang"]["image"] = image[0]
        spec["owner"] = attempt.owner
        spec["restart"] = {
            "policy": str(attempt.manifest.restart_policy),
            "max_restarts": attempt.manifest.max_restarts,
        }
        if attempt.api_urls:  # several servers on the database: the wrapper ships to any
            spec["api_urls"] = attempt.api_urls
        launches.append(LearnerLaunch(handle, spec, attempt.token, secrets))
        rows.append(
            Learner(
                job_id=attempt.job_id,
                attempt=attempt.number,
                learner_id=n,
                state=JobState.PENDING.value,
                message="",
                handle=handle,
                devices=",".join(str(d) for d in devices),
                started_at=time.time(),
            )
        )
    return launches, rows
