"""An experiment's stored parts: its spec (credentials sealed apart, as a job's are), its code,
and what turns one trial into a job of the experiment's owner."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

from loom.domain.credentials import Credentials, merge, split
from loom.domain.errors import SecretKeyError
from loom.domain.katib import ExperimentSpec, parse_experiment, trial_manifest
from loom.domain.manifest import manifest_from_dict
from loom.lifecycle.manager import LifecycleManager
from loom.lifecycle.workspace import Workspace
from loom.sandbox.files import copy_tree
from loom.storage.artifacts import ArtifactStore
from loom.store import experiments as rows
from loom.store.db import Database
from loom.store.secret_keys import SecretKeys
from loom.store.tables import Experiment, Trial, User


def trial_spec_of(document: dict[str, Any]) -> dict[str, Any] | None:
    """The trial template's manifest in a Katib document (whole, or its bare `spec`)."""
    root = document.get("spec", document)
    template = root.get("trialTemplate") if isinstance(root, dict) else None
    spec = template.get("trialSpec") if isinstance(template, dict) else None
    return spec if isinstance(spec, dict) else None


def redact(document: dict[str, Any]) -> tuple[dict[str, Any], Credentials]:
    """The document with its trial spec's credentials replaced by `***`, and the credentials."""
    redacted = copy.deepcopy(document)
    spec = trial_spec_of(redacted)
    if spec is None:
        return redacted, {}
    clean, credentials = split(spec)
    spec.clear()
    spec.update(clean)
    return redacted, credentials


class ExperimentRecords:
    def __init__(
        self,
        db: Database,
        keys: SecretKeys,
        artifacts: ArtifactStore,
        lifecycle: LifecycleManager,
    ) -> None:
        self.db = db
        self.keys = keys
        self.artifacts = artifacts
        self.lifecycle = lifecycle
        self._specs: dict[tuple[str, str], ExperimentSpec] = {}

    def seal(self, experiment_id: str, credentials: Credentials) -> str | None:
        if not credentials:
            return None
        payload = {"experiment": experiment_id, **credentials}
        return self.keys.seal(json.dumps(payload, default=str).encode())

    def credentials(self, experiment: Experiment) -> Credentials:
        if experiment.sealed is None:
            return {}
        try:
            found: Credentials = json.loads(self.keys.open(experiment.sealed))
        except SecretKeyError as exc:
            raise SecretKeyError(
                f"the credentials of experiment {experiment.name} cannot be opened: {exc}"
            ) from exc
        if found.pop("experiment", None) != experiment.id:
            raise SecretKeyError(f"the credentials of experiment {experiment.name} are not its own")
        return found

    def spec_of(self, experiment: Experiment) -> ExperimentSpec:
        """The stored document, parsed (once per experiment and resume)."""
        key = (experiment.id, json.dumps(experiment.spec, sort_keys=True, default=str))
        if key not in self._specs:
            self._specs = {k: v for k, v in self._specs.items() if k[0] != experiment.id}
            self._specs[key] = parse_experiment(experiment.spec)
        return self._specs[key]

    def submit_trial(self, experiment: Experiment, spec: ExperimentSpec, trial: Trial) -> None:
        """The trial's job, queued under the trial's job id (at most once)."""
        full = dataclasses.replace(
            spec, trial_spec=merge(spec.trial_spec, self.credentials(experiment))
        )
        original = trial_manifest(full, assignments(spec, experiment, trial))
        manifest = manifest_from_dict(original)
        self._inherit(experiment, trial)
        code = self.artifacts.path(experiment.code_digest).read_bytes()
        with self.db.session() as session:
            owner = session.get_one(User, experiment.owner_id)
        lineage = {
            "kind": "experiment",
            "experiment": experiment.name,
            "experiment_id": experiment.id,
            "trial": trial.number,
            "parameters": dict(trial.parameters),
        }
        self.lifecycle.submit(owner, manifest, original, code, job_id=trial.job_id, lineage=lineage)

    def _inherit(self, experiment: Experiment, trial: Trial) -> None:
        """PBT: a trial starts from its parent's checkpoints, copied into its own (only the
        regular files: the parent's job wrote them)."""
        attrs = (trial.sampler_state or {}).get("attrs") or {}
        parent = (attrs.get("pbt") or {}).get("parent")
        if parent is None:
            return
        with self.db.session() as session:
            found = {t.number: t.job_id for t in rows.trials_of(session, experiment.id)}
        jobs = self.lifecycle.settings.jobs_dir
        if parent in found:
            source = Workspace(jobs, found[parent]).checkpoints
            copy_tree(source, Workspace(jobs, trial.job_id).checkpoints)


def assignments(spec: ExperimentSpec, experiment: Experiment, trial: Trial) -> dict[str, str]:
    """Each trial parameter's value: the search parameter it refers to, or the trial's name."""
    values = {}
    for parameter in spec.trial_parameters:
        if parameter.reference in trial.parameters:
            values[parameter.name] = trial.parameters[parameter.reference]
        else:  # Katib's metadata references: the trial's name stands for all of them
            values[parameter.name] = f"{experiment.name}-{trial.number}"
    return values
