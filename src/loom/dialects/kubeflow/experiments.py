"""Katib's Experiment applied as a Loom experiment (`loom.hpo`), its status read back as Katib
writes it."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

from loom.dialects.kinds import Applied, Context, Document, Immutable, KindInfo, Note, Stored
from loom.dialects.kubeflow import code as codes
from loom.dialects.kubeflow import images
from loom.dialects.kubeflow.jobs import config_maps, runs_images
from loom.dialects.kubeflow.katib import ExperimentPlan, katib_experiment
from loom.dialects.kubeflow.katib_status import ExperimentView, TrialView, experiment_status
from loom.domain.errors import NotFound
from loom.domain.experiments import best
from loom.hpo import observations

EXPERIMENT = KindInfo("kubeflow.org", ("v1beta1",), "Experiment", "experiments", ("exp",))


def plan(ctx: Context, document: Document) -> ExperimentPlan:
    found = katib_experiment(document, codes.names(ctx.code), config_maps(ctx))
    template = (found.document.get("spec") or {}).get("trialTemplate") or {}
    if isinstance(template.get("trialSpec"), dict) and "framework" in template["trialSpec"]:
        images.place(template["trialSpec"], runs_images(ctx))
    return found


class KatibExperiments(Immutable):
    kinds = (EXPERIMENT,)

    def check(self, ctx: Context, document: Document) -> None:
        ctx.platform.experiments.check(json.dumps(plan(ctx, document).document))

    def create(self, ctx: Context, document: Document) -> Applied:
        found = plan(ctx, document)
        text = json.dumps(found.document)
        _document, spec = ctx.platform.experiments.check(text)
        zipped = codes.with_files(ctx.code, found.files)
        experiment = ctx.platform.experiments.create(ctx.user, text, zipped)
        notes = list(found.notes)
        for warning in spec.warnings:
            field = warning.split(" ", 1)[0] if " is ignored" in warning else "spec"
            notes.append(Note(field, "ignored", warning))
        return Applied({"experiment": experiment.id}, tuple(notes))

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        """Only `maxTrialCount` may change, as Katib lets an ended experiment with resumePolicy
        LongRunning (or FromVolume) go on: it is resumed with the larger budget."""
        if _without_budget(stored.document) != _without_budget(document):
            return super().update(ctx, stored, document)
        wanted = (document.get("spec") or {}).get("maxTrialCount")
        experiments = ctx.platform.experiments
        experiment = experiments.find(ctx.user.id, str(stored.refs.get("experiment")))
        experiments.resume(experiment, wanted if isinstance(wanted, int) else None)
        return Applied(stored.refs, stored.notes)

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]:
        view = experiment_view(ctx, str(stored.refs.get("experiment")))
        return experiment_status(view) if view is not None else {}

    def delete(self, ctx: Context, stored: Stored) -> None:
        experiments = ctx.platform.experiments
        with contextlib.suppress(NotFound):
            experiments.delete(experiments.find(ctx.user.id, str(stored.refs.get("experiment"))))


def experiment_view(ctx: Context, experiment_id: str) -> ExperimentView | None:
    experiments = ctx.platform.experiments
    try:
        experiment = experiments.find(ctx.user.id, experiment_id)
    except NotFound:
        return None
    spec = experiments.records.spec_of(experiment)
    trials = experiments.trials(experiment.id)
    scored = [
        (t.number, t.objective)
        for t in trials
        if t.state == "SUCCEEDED" and t.objective is not None
    ]
    found = best(spec, [(n, v) for n, v in scored if v is not None])
    number = (
        experiment.best_trial
        if experiment.best_trial is not None
        else (found[0] if found else None)
    )
    observation: dict[str, tuple[float, float, float]] = {}
    chosen = next((t for t in trials if t.number == number), None)
    if chosen is not None:
        for name in (spec.objective.metric, *spec.objective.additional):
            values = [
                v
                for v in observations.series(ctx.platform.tds, chosen.job_id, name)
                if v is not None
            ]
            if values:
                observation[name] = (min(values), max(values), values[-1])
    return ExperimentView(
        name=experiment.name,
        state=experiment.state,
        reason=experiment.reason,
        message=experiment.message,
        created_at=experiment.created_at,
        finished_at=experiment.finished_at,
        trials=tuple(TrialView(t.number, t.state, dict(t.parameters)) for t in trials),
        best_trial=number,
        observation=observation,
    )


def _without_budget(document: Document) -> Document:
    found = copy.deepcopy(document)
    found.pop("status", None)
    if isinstance(found.get("spec"), dict):
        found["spec"].pop("maxTrialCount", None)
    return found
