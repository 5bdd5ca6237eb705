"""Pipelines written in Python: a `Pipeline` whose methods add steps, and the `${{ … }}`
references between them, giving the spec of docs/pipelines.md as a dict or as YAML.

    p = Pipeline("digits", parameters={"widths": [8, 16]})
    data = p.python("data", file="make_data.py")
    train = p.job("train", manifest={...}, for_each=param("widths"), after=[data])
    pick = p.select("pick", from_=[train], metric="accuracy", mode="max")
    p.deploy("serve", deployment="digits", model=pick.output("model"))
    text = p.to_yaml()

Nothing here talks to the platform: `LoomClient.run_pipeline(p.to_dict())` does."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict, Unpack

import yaml

__all__ = ["Common", "Pipeline", "Step", "item", "param", "run_ref"]

COMMON_FIELDS = (
    "after",
    "when",
    "for_each",
    "parallelism",
    "retry",
    "timeout_s",
    "cache",
    "cache_max_age_s",
    "trigger",
)


def _ref(path: str) -> str:
    return "${{ " + path + " }}"


def param(name: str) -> str:
    """`${{ parameters.NAME }}`: a parameter of the run."""
    return _ref(f"parameters.{name}")


def item(key: str | None = None) -> str:
    """`${{ item }}`, or `${{ item.KEY }}` for an item that is a mapping: a fan-out's item."""
    return _ref("item" if key is None else f"item.{key}")


def run_ref(key: Literal["id", "name"]) -> str:
    """`${{ run.id }}` or `${{ run.name }}`."""
    return _ref(f"run.{key}")


@dataclass
class Step:
    """A step of a pipeline: its name, kind and fields as the spec has them."""

    name: str
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)

    def output(self, key: str) -> str:
        """`${{ steps.NAME.outputs.KEY }}`: one of this step's outputs (`model`,
        `metrics.accuracy`, `values.KEY`…); referencing it makes the referrer depend on it."""
        return _ref(f"steps.{self.name}.outputs.{key}")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **copy.deepcopy(self.fields)}


StepRef = Step | str


class Retry(TypedDict, total=False):
    limit: int
    backoff_s: float
    factor: float
    max_backoff_s: float


class Common(TypedDict, total=False):
    """The fields every kind of step may have (docs/pipelines.md, Steps)."""

    after: Sequence[StepRef]
    when: str
    for_each: list[Any] | str
    parallelism: int
    retry: Retry | dict[str, Any]
    timeout_s: float
    cache: bool
    cache_max_age_s: float
    trigger: Literal["all_succeeded", "none_failed", "all_done"]


def _name(step: StepRef) -> str:
    return step.name if isinstance(step, Step) else step


def _names(steps: Sequence[StepRef]) -> list[str]:
    return [_name(s) for s in steps]


def _one_of(step: str, **given: Any) -> None:
    said = [k for k, v in given.items() if v is not None]
    if len(said) != 1:
        keys = " or ".join(f"`{k.rstrip('_')}`" for k in given)
        raise ValueError(f"step {step!r}: give exactly one of {keys}")


class Pipeline:
    """A pipeline being written: each method adds a step of its kind and returns it."""

    def __init__(
        self,
        name: str,
        parameters: dict[str, Any] | None = None,
        description: str | None = None,
        outputs: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        self.name = name
        self.parameters = parameters
        self.description = description
        self.outputs = outputs  # the run's own, made of its steps' outputs
        self.timeout_s = timeout_s  # the whole run's deadline
        self.steps: list[Step] = []
        self.exit_step: str | None = None

    # -- the kinds -------------------------------------------------------------------------
    def job(
        self,
        name: str,
        *,
        manifest: dict[str, Any] | None = None,
        manifest_file: str | None = None,
        inputs: dict[str, str] | None = None,
        **common: Unpack[Common],
    ) -> Step:
        """A Loom job: a `manifest` inline, or `manifest_file` in the code folder; `inputs`
        names earlier jobs whose results it gets as `inputs/NAME/`."""
        _one_of(name, manifest=manifest, manifest_file=manifest_file)
        return self._add(
            name, "job", common, manifest=manifest, manifest_file=manifest_file, inputs=inputs
        )

    def python(
        self,
        name: str,
        *,
        file: str | None = None,
        args: Sequence[str] | None = None,
        script: str | None = None,
        cpus: float | None = None,
        memory: str | None = None,
        gpus: int | None = None,
        env: dict[str, str] | None = None,
        inputs: dict[str, Any] | None = None,
        environment: dict[str, Any] | None = None,
        values: dict[str, Any] | None = None,
        model_name: str | None = None,
        **common: Unpack[Common],
    ) -> Step:
        """A small step run as a one-learner job: `file` (in the code folder) with `args`, or
        the code inline as `script`; `environment` as a manifest's, `values` given to it as
        the JSON file `$STEP_VALUES`."""
        _one_of(name, file=file, script=script)
        listed = list(args) if args is not None else None
        return self._add(
            name, "python", common, file=file, args=listed, script=script, cpus=cpus,
            memory=memory, gpus=gpus, env=env, inputs=inputs, environment=environment,
            values=values, model_name=model_name,
        )  # fmt: skip

    def shell(
        self,
        name: str,
        *,
        command: str,
        cpus: float | None = None,
        memory: str | None = None,
        gpus: int | None = None,
        env: dict[str, str] | None = None,
        inputs: dict[str, Any] | None = None,
        environment: dict[str, Any] | None = None,
        values: dict[str, Any] | None = None,
        model_name: str | None = None,
        **common: Unpack[Common],
    ) -> Step:
        """A bash `command`, run in the code folder as a one-learner job."""
        return self._add(
            name, "shell", common, command=command, cpus=cpus, memory=memory, gpus=gpus,
            env=env, inputs=inputs, environment=environment, values=values,
            model_name=model_name,
        )  # fmt: skip

    def pipeline(
        self,
        name: str,
        *,
        pipeline: Pipeline | dict[str, Any],
        parameters: dict[str, Any] | None = None,
        **common: Unpack[Common],
    ) -> Step:
        """A sub-pipeline: `pipeline`'s own steps run as a sub-run (one per item of a
        `for_each`), given `parameters`; its outputs are the sub-run's."""
        spec = pipeline.to_dict() if isinstance(pipeline, Pipeline) else copy.deepcopy(pipeline)
        return self._add(name, "pipeline", common, pipeline=spec, parameters=parameters)

    def experiment(
        self, name: str, *, experiment: dict[str, Any], **common: Unpack[Common]
    ) -> Step:
        """A Katib Experiment (docs/hpo.md) whose trials run the run's code."""
        return self._add(name, "experiment", common, experiment=experiment)

    def select(
        self,
        name: str,
        *,
        metric: str,
        mode: Literal["max", "min"] = "max",
        from_: Sequence[StepRef] | None = None,
        model: str | None = None,
        **common: Unpack[Common],
    ) -> Step:
        """The best model version by `metric`: among the models of the steps `from_`, or among
        the versions of the registered `model`."""
        _one_of(name, from_=from_, model=model)
        chosen = _names(from_) if from_ is not None else None
        return self._add(
            name, "select", common, **{"from": chosen}, model=model, metric=metric, mode=mode
        )

    def deploy(
        self,
        name: str,
        *,
        deployment: str,
        model: str,
        min_replicas: int | None = None,
        max_replicas: int | None = None,
        public: bool | None = None,
        **common: Unpack[Common],
    ) -> Step:
        """The `deployment` created, or updated to `model` (`NAME@VERSION`) if it exists;
        `public` answers without a token."""
        return self._add(
            name, "deploy", common, deployment=deployment, model=model,
            min_replicas=min_replicas, max_replicas=max_replicas, public=public,
        )  # fmt: skip

    def on_exit(self, step: StepRef) -> None:
        """The step run last, whatever happened."""
        self.exit_step = _name(step)

    # -- the spec --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The spec as docs/pipelines.md has it; fields left as None are not in it."""
        spec: dict[str, Any] = {"name": self.name}
        if self.description is not None:
            spec["description"] = self.description
        if self.parameters is not None:
            spec["parameters"] = copy.deepcopy(self.parameters)
        spec["steps"] = [s.to_dict() for s in self.steps]
        if self.exit_step is not None:
            spec["on_exit"] = self.exit_step
        if self.outputs is not None:
            spec["outputs"] = copy.deepcopy(self.outputs)
        if self.timeout_s is not None:
            spec["timeout_s"] = self.timeout_s
        return spec

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)

    def step(self, name: str) -> Step:
        """The step of that name (KeyError if none)."""
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)

    def _add(self, name: str, kind: str, common: Common, **fields: Any) -> Step:
        if any(s.name == name for s in self.steps):
            raise ValueError(f"pipeline {self.name!r} has a step named {name!r} already")
        unknown = sorted(set(common) - set(COMMON_FIELDS))
        if unknown:
            raise TypeError(f"step {name!r}: no field {', '.join(unknown)} for any kind")
        given: dict[str, Any] = {k: common.get(k) for k in COMMON_FIELDS}
        if given["after"] is not None:
            given["after"] = _names(given["after"])
        if given["retry"] is not None:
            given["retry"] = dict(given["retry"])
        kept = {k: v for k, v in {**given, **fields}.items() if v is not None}
        made = Step(name, kind, kept)
        self.steps.append(made)
        return made
