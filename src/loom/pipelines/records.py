"""A run's stored parts: its spec with each step's credentials taken out and sealed apart, as a
job's are, and the spec parsed again when it is needed."""

from __future__ import annotations

import copy
import hashlib
import json
import time
from typing import Any

from loom.domain.credentials import Credentials, split
from loom.domain.errors import SecretKeyError
from loom.domain.pipeline import PipelineSpec, parse_pipeline
from loom.domain.pipeline_states import RunState, StepState
from loom.hpo.records import redact as redact_experiment
from loom.store import pipelines as rows
from loom.store.secret_keys import SecretKeys
from loom.store.tables import PipelineRun


def redact(document: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Credentials]]:
    """The document with every inline manifest's credentials (a job step's, an experiment
    step's trial spec) replaced by `***`, and the credentials by step name (`outer/inner` for
    a step of a sub-pipeline)."""
    redacted = copy.deepcopy(document)
    return redacted, _redact_in(redacted, "")


def _redact_in(document: dict[str, Any], prefix: str) -> dict[str, Credentials]:
    found: dict[str, Credentials] = {}
    for step in document.get("steps") or []:
        if not isinstance(step, dict):
            continue
        credentials: Credentials = {}
        if isinstance(step.get("manifest"), dict):
            step["manifest"], credentials = split(step["manifest"])
        elif isinstance(step.get("experiment"), dict):
            step["experiment"], credentials = redact_experiment(step["experiment"])
        elif step.get("kind") == "pipeline" and isinstance(step.get("pipeline"), dict):
            found |= _redact_in(step["pipeline"], f"{prefix}{step.get('name')}/")
        if credentials:
            found[f"{prefix}{step.get('name')}"] = credentials
    return found


def inner(credentials: dict[str, Credentials], step: str) -> dict[str, Credentials]:
    """The credentials of a sub-pipeline step's own steps, by their names there."""
    prefix = f"{step}/"
    return {k[len(prefix) :]: v for k, v in credentials.items() if k.startswith(prefix)}


class RunRecords:
    def __init__(self, keys: SecretKeys) -> None:
        self.keys = keys
        self._specs: dict[str, PipelineSpec] = {}

    def seal(self, owner: str, credentials: dict[str, Credentials]) -> str | None:
        """The steps' credentials sealed for `owner` (`run:ID` or `schedule:ID`)."""
        if not credentials:
            return None
        payload = {"for": owner, "steps": credentials}
        return self.keys.seal(json.dumps(payload, default=str).encode())

    def open(self, sealed: str | None, owner: str) -> dict[str, Credentials]:
        if sealed is None:
            return {}
        try:
            found = json.loads(self.keys.open(sealed))
        except SecretKeyError as exc:
            raise SecretKeyError(f"the credentials of {owner} cannot be opened: {exc}") from exc
        if found.get("for") != owner:
            raise SecretKeyError(f"the credentials of {owner} are not its own")
        steps: dict[str, Credentials] = found.get("steps") or {}
        return steps

    def credentials(self, run: PipelineRun) -> dict[str, Credentials]:
        return self.open(run.sealed, f"run:{run.id}")

    def new_run(
        self,
        owner_id: str,
        spec: PipelineSpec,
        redacted: dict[str, Any],
        credentials: dict[str, Credentials],
        parameters: dict[str, Any],
        code_digest: str,
        schedule: str = "",
        run_id: str | None = None,
        parent_id: str | None = None,
    ) -> PipelineRun:
        """A run, not yet stored, every step WAITING."""
        run_id = run_id or rows.new_run_id()
        return PipelineRun(
            id=run_id,
            owner_id=owner_id,
            pipeline=spec.name,
            spec=redacted,
            sealed=self.seal(f"run:{run_id}", credentials),
            parameters=parameters,
            code_digest=code_digest,
            state=RunState.PENDING.value,
            message="",
            steps={s.name: {"state": StepState.WAITING.value, "message": ""} for s in spec.steps},
            schedule=schedule,
            created_at=time.time(),
            parent_id=parent_id,
        )

    def credentials_digest(self, run: PipelineRun, step: str) -> str:
        """Stands for a step's credentials in its cache key: another secret, another key."""
        given = self.credentials(run).get(step)
        if not given:
            return ""
        text = json.dumps(given, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def spec_of(self, run: PipelineRun) -> PipelineSpec:
        if run.id not in self._specs:
            self._specs[run.id] = parse_pipeline(run.spec)
        return self._specs[run.id]
