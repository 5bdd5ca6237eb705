"""A pipeline's spec (docs/pipelines.md): parameters and a DAG of steps, checked and typed.

Pure. Each refusal names the field (`steps[2].when`, `parameters.epochs`) and why; references
(`${{ … }}`) are checked against what exists, and a step depends on the steps it references as
well as on those in its `after`. A cycle is refused with its path. A `pipeline` step holds a
whole spec of its own (a sub-DAG), checked the same way; its references are its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from loom.domain import spec_checks as check
from loom.domain.errors import InvalidInput, ManifestError
from loom.domain.pipeline_refs import check_condition, check_path, references

StepKind = Literal["job", "python", "shell", "experiment", "select", "deploy", "pipeline"]
KINDS: tuple[StepKind, ...] = (
    *("job", "python", "shell", "experiment", "select", "deploy", "pipeline"),
)
RUNS_A_JOB: tuple[StepKind, ...] = ("job", "python", "shell")
CACHEABLE: tuple[StepKind, ...] = ("job", "python", "shell", "experiment")
# When a step opens once its needs have ended: only if each succeeded (or was cached), also if
# one was skipped, or whatever they came to (a clean-up step).
Trigger = Literal["all_succeeded", "none_failed", "all_done"]
TRIGGERS: tuple[Trigger, ...] = ("all_succeeded", "none_failed", "all_done")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
STEP_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
OUTPUT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,99}$")
MAX_STEPS = 200
MAX_ITEMS = 1000
MAX_NESTING = 8  # pipeline steps inside pipeline steps
_COMMON = (
    *("name", "kind", "after", "when", "for_each", "parallelism", "retry", "timeout_s"),
    *("cache", "cache_max_age_s", "description", "trigger"),
)
_RESOURCES = ("cpus", "memory", "gpus", "env", "environment", "values", "model_name")
_FIELDS: dict[StepKind, tuple[str, ...]] = {
    "job": ("manifest", "manifest_file", "inputs"),
    "python": ("file", "script", "args", "inputs", *_RESOURCES),
    "shell": ("command", "inputs", *_RESOURCES),
    "experiment": ("experiment",),
    "select": ("from", "model", "metric", "mode"),
    "deploy": (
        *("deployment", "model", "min_replicas", "max_replicas", "public", "scaling"),
        *("canary_percent", "monitoring"),
    ),
    "pipeline": ("pipeline", "parameters"),
}
OPAQUE = {"pipeline": "pipeline"}  # a kind's field whose references are not the step's own
_TOP = ("name", "description", "parameters", "steps", "on_exit", "outputs", "timeout_s")
# A deploy step's `scaling`: the deployment's settings beyond its replicas' bounds.
SCALING = (
    *("target_concurrency", "scale_down_delay_s", "batch_size", "batch_wait_ms", "request_log"),
    "gpus_per_replica",
)
# A deploy step's `monitoring`: the API's (`POST /v1/deployments`), its values checked when the
# step deploys (against the version's reference data too).
MONITORING = ("drift", "outliers", "window", "p_value", "outlier_fpr", "payloads")


@dataclass(frozen=True)
class Retry:
    limit: int = 0
    backoff_s: float = 0.0
    factor: float = 2.0
    max_backoff_s: float | None = None

    def delay(self, retries_done: int) -> float:
        """Seconds to wait before retry number `retries_done + 1` (at most `max_backoff_s`)."""
        delay = self.backoff_s * self.factor**retries_done
        return min(delay, self.max_backoff_s) if self.max_backoff_s is not None else delay


@dataclass(frozen=True)
class Step:
    """One step. `fields` holds the kind's own fields as written (references unresolved);
    `needs` is every step it waits for: its `after` and those it references."""

    name: str
    kind: StepKind
    fields: dict[str, Any]
    needs: tuple[str, ...]
    after: tuple[str, ...] = ()
    when: str | None = None
    for_each: Any = None
    parallelism: int | None = None
    retry: Retry = field(default_factory=Retry)
    timeout_s: float | None = None
    cache: bool = True
    cache_max_age_s: float | None = None
    exit_handler: bool = False
    trigger: Trigger = "all_succeeded"
    sub: PipelineSpec | None = None  # a pipeline step's own spec


@dataclass(frozen=True)
class PipelineSpec:
    name: str
    description: str
    parameters: dict[str, Any]
    steps: tuple[Step, ...]
    on_exit: str | None = None
    warnings: tuple[str, ...] = ()
    outputs: dict[str, Any] = field(default_factory=dict)  # as written, references unresolved
    timeout_s: float | None = None  # the whole run's: halted and failed past it

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def with_parameters(self, given: dict[str, Any] | None) -> dict[str, Any]:
        """The run's parameters: the defaults, overridden by `given` (each one declared)."""
        values = dict(self.parameters)
        for key, value in (given or {}).items():
            if key not in self.parameters:
                have = ", ".join(sorted(self.parameters)) or "none"
                raise InvalidInput(
                    f"parameters.{key}: pipeline {self.name} has no such parameter (it has: "
                    f"{have})",
                    field=f"parameters.{key}",
                )
            values[key] = value
        return values


# -- the document ------------------------------------------------------------------------------
def load_pipeline(text: str | bytes) -> dict[str, Any]:
    """The YAML text of a pipeline, as a mapping; refused with the reason."""
    return check.load_mapping(text, "the pipeline")


def parse_pipeline(
    data: str | bytes | dict[str, Any], where: str = "", depth: int = 0
) -> PipelineSpec:
    """The spec, checked; `where` prefixes each field a refusal names (a sub-pipeline's, at
    `depth` pipelines down)."""
    document = load_pipeline(data) if isinstance(data, str | bytes) else data
    try:
        return _spec(document, depth)
    except ManifestError as exc:
        if not where:
            raise
        inner = exc.field or ""
        raise ManifestError(
            f"{where}.{exc.message}" if inner else f"{where}: {exc.message}",
            field=f"{where}.{inner}" if inner else where,
        ) from None


def _spec(document: dict[str, Any], depth: int) -> PipelineSpec:
    if depth > MAX_NESTING:
        raise ManifestError(f"pipelines nested more than {MAX_NESTING} deep")
    check.known(document, _TOP, "")
    name = document.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise check.fail(
            "name", f"letters, digits, `-`, `_` and `.`, ≤ 100 characters; got {name!r}"
        )
    parameters = _parameters(document.get("parameters"))
    raw = check.sequence(document.get("steps"), "steps")
    if not raw:
        raise check.fail("steps", "a pipeline needs at least one step")
    if len(raw) > MAX_STEPS:
        raise check.fail("steps", f"at most {MAX_STEPS} steps, got {len(raw)}")
    names = _names(raw)
    on_exit = document.get("on_exit")
    if on_exit is not None and on_exit not in names:
        raise check.fail("on_exit", f"{on_exit!r} is not a step; the steps are {', '.join(names)}")
    steps = tuple(
        _step(check.mapping(item, f"steps[{i}]"), f"steps[{i}]", names, parameters, on_exit, depth)
        for i, item in enumerate(raw)
    )
    _acyclic(steps)
    return PipelineSpec(
        name=name,
        description=str(document.get("description") or ""),
        parameters=parameters,
        steps=steps,
        on_exit=on_exit,
        outputs=_outputs(document.get("outputs"), names, parameters),
        timeout_s=_seconds(document.get("timeout_s"), "timeout_s"),
    )


def _outputs(value: Any, names: list[str], parameters: dict[str, Any]) -> dict[str, Any]:
    """A run's own outputs: names of values made of its steps' outputs and its parameters."""
    found = check.mapping(value, "outputs") if value is not None else {}
    for key, item in found.items():
        at = f"outputs.{key}"
        if not isinstance(key, str) or not OUTPUT_NAME.fullmatch(key):
            raise check.fail(at, "an output's name is letters, digits, - and _")
        for path in references(item):
            parts = check_path(path, at)
            if parts[0] in ("item", "run"):
                raise check.fail(at, f"`{path}`: an output is made of parameters and steps")
            if parts[0] == "parameters" and parts[1] not in parameters:
                raise check.fail(at, f"`{path}`: no such parameter")
            if parts[0] == "steps":
                _known_step(parts[1], at, names, "")
    return dict(found)


def _parameters(value: Any) -> dict[str, Any]:
    found = check.mapping(value, "parameters") if value is not None else {}
    for key in found:
        if not isinstance(key, str) or not STEP_NAME.fullmatch(key):
            raise check.fail(f"parameters.{key}", "a parameter's name is letters, digits, - and _")
    return dict(found)


def _names(raw: list[Any]) -> list[str]:
    names: list[str] = []
    for index, item in enumerate(raw):
        name = check.mapping(item, f"steps[{index}]").get("name")
        if not isinstance(name, str) or not STEP_NAME.fullmatch(name):
            raise check.fail(
                f"steps[{index}].name",
                f"a step's name is a letter, then letters, digits, - and _; got {name!r}",
            )
        if name in names:
            raise check.fail(f"steps[{index}].name", f"{name!r} is the name of an earlier step")
        names.append(name)
    return names


# -- one step ----------------------------------------------------------------------------------
def _step(
    item: dict[str, Any],
    where: str,
    names: list[str],
    parameters: dict[str, Any],
    on_exit: Any,
    depth: int = 0,
) -> Step:
    name = str(item["name"])
    kind = check.choice(item.get("kind"), f"{where}.kind", KINDS)
    trigger = check.choice(item.get("trigger", "all_succeeded"), f"{where}.trigger", TRIGGERS)
    check.known(item, (*_COMMON, *_FIELDS[kind]), where)
    fields = {key: item[key] for key in _FIELDS[kind] if key in item}
    after = tuple(
        str(check.text(a, f"{where}.after"))
        for a in check.sequence(item.get("after"), f"{where}.after")
    )
    for index, other in enumerate(after):
        _known_step(other, f"{where}.after[{index}]", names, name)
    for_each = item.get("for_each")
    uses = _uses(item, where, names, name, parameters, for_each is not None, OPAQUE.get(kind))
    _kind_fields(kind, fields, where, names)
    sub = _sub_pipeline(fields, where, depth + 1) if kind == "pipeline" else None
    if for_each is not None and not isinstance(for_each, list | str):
        raise check.fail(f"{where}.for_each", "a list, or a reference to one")
    if isinstance(for_each, list) and len(for_each) > MAX_ITEMS:
        raise check.fail(f"{where}.for_each", f"at most {MAX_ITEMS} items, got {len(for_each)}")
    when = item.get("when")
    if when is not None:
        check_condition(check.text(when, f"{where}.when"), f"{where}.when")
    exit_handler = name == on_exit
    if kind == "select":  # the steps whose models it compares
        uses += [str(other) for other in fields.get("from") or []]
    needs = tuple(n for n in names if n in {*after, *uses})  # in the spec's order
    if exit_handler and needs:
        raise check.fail(
            f"{where}.after", "the exit handler runs after every other step; it needs no other"
        )
    return Step(
        name=name,
        kind=kind,
        fields=fields,
        needs=needs,
        after=after,
        when=str(when) if when is not None else None,
        for_each=for_each,
        parallelism=_parallelism(item, where),
        retry=_retry(item.get("retry"), f"{where}.retry"),
        timeout_s=_seconds(item.get("timeout_s"), f"{where}.timeout_s"),
        cache=_flag(item.get("cache", True), f"{where}.cache"),
        cache_max_age_s=_seconds(item.get("cache_max_age_s"), f"{where}.cache_max_age_s"),
        exit_handler=exit_handler,
        trigger=trigger,
        sub=sub,
    )


def _sub_pipeline(fields: dict[str, Any], where: str, depth: int) -> PipelineSpec:
    """A pipeline step's own spec, and the parameters it is given (each one it declares)."""
    document = check.mapping(fields.get("pipeline"), f"{where}.pipeline")
    sub = parse_pipeline(document, f"{where}.pipeline", depth)
    given = check.mapping(fields.get("parameters") or {}, f"{where}.parameters")
    for key in given:
        if key not in sub.parameters:
            have = ", ".join(sorted(sub.parameters)) or "none"
            raise check.fail(
                f"{where}.parameters.{key}",
                f"pipeline {sub.name} has no such parameter (it has: {have})",
            )
    return sub


def _known_step(other: str, where: str, names: list[str], own: str) -> None:
    if other == own:
        raise check.fail(where, f"step {own} cannot wait for itself")
    if other not in names:
        raise check.fail(where, f"{other!r} is not a step; the steps are {', '.join(names)}")


def _uses(
    item: dict[str, Any],
    where: str,
    names: list[str],
    own: str,
    parameters: dict[str, Any],
    fans_out: bool,
    opaque: str | None = None,
) -> list[str]:
    """The steps the step's references name, each reference checked (not those of its
    `opaque` field, a sub-pipeline's own)."""
    used: list[str] = []
    for key, value in item.items():
        if key in ("name", "kind", "after", opaque):
            continue
        at = f"{where}.{key}"
        for path in references(value):
            parts = check_path(path, at)
            if parts[0] == "parameters" and parts[1] not in parameters:
                have = ", ".join(sorted(parameters)) or "none"
                raise check.fail(at, f"`{path}`: no such parameter (the parameters: {have})")
            if parts[0] == "item" and (not fans_out or key in ("for_each", "when")):
                raise check.fail(at, f"`{path}`: only a step with for_each has an item")
            if parts[0] == "steps":
                _known_step(parts[1], at, names, own)
                used.append(parts[1])
    return used


def _kind_fields(kind: StepKind, fields: dict[str, Any], where: str, names: list[str]) -> None:
    if not isinstance(fields.get("inputs", {}), dict | str):
        raise check.fail(f"{where}.inputs", "a mapping of names to earlier steps' job ids")
    for key in ("environment", "values"):
        if key in fields and not isinstance(fields[key], dict):
            raise check.fail(f"{where}.{key}", f"must be a mapping, got {fields[key]!r}")
    _KIND_CHECKS[kind](fields, where, names)


def _one_of(fields: dict[str, Any], where: str, *keys: str) -> None:
    given = [k for k in keys if fields.get(k) is not None]
    if len(given) != 1:
        said = "both" if given else "neither"
        raise check.fail(f"{where}.{keys[0]}", f"give one of {' or '.join(keys)} ({said} given)")


def _job_fields(fields: dict[str, Any], where: str, _names: list[str]) -> None:
    _one_of(fields, where, "manifest", "manifest_file")
    if "manifest" in fields:
        check.mapping(fields["manifest"], f"{where}.manifest")


def _python_fields(fields: dict[str, Any], where: str, _names: list[str]) -> None:
    _one_of(fields, where, "file", "script")
    check.sequence(fields.get("args"), f"{where}.args")


def _shell_fields(fields: dict[str, Any], where: str, _names: list[str]) -> None:
    _one_of(fields, where, "command")


def _experiment_fields(fields: dict[str, Any], where: str, _names: list[str]) -> None:
    check.mapping(fields.get("experiment"), f"{where}.experiment")


def _pipeline_fields(fields: dict[str, Any], where: str, _names: list[str]) -> None:
    check.mapping(fields.get("pipeline"), f"{where}.pipeline")


def _select_fields(fields: dict[str, Any], where: str, names: list[str]) -> None:
    _one_of(fields, where, "from", "model")
    for index, other in enumerate(check.sequence(fields.get("from"), f"{where}.from")):
        _known_step(str(other), f"{where}.from[{index}]", names, "")
    check.text(fields.get("metric"), f"{where}.metric")
    check.choice(fields.get("mode", "max"), f"{where}.mode", ("max", "min"))


def _deploy_fields(fields: dict[str, Any], where: str, _names: list[str]) -> None:
    check.text(fields.get("deployment"), f"{where}.deployment")
    check.text(fields.get("model"), f"{where}.model")
    if "public" in fields:
        _flag(fields["public"], f"{where}.public")
    for key in ("min_replicas", "max_replicas"):
        if not isinstance(fields.get(key), str):  # a reference is checked when it is used
            check.count(fields.get(key), f"{where}.{key}", 0)
    scaling = check.mapping(fields.get("scaling") or {}, f"{where}.scaling")
    check.known(scaling, SCALING, f"{where}.scaling")
    monitoring = check.mapping(fields.get("monitoring") or {}, f"{where}.monitoring")
    check.known(monitoring, MONITORING, f"{where}.monitoring")
    if fields.get("canary_percent") is not None:
        percent = check.number(fields["canary_percent"], f"{where}.canary_percent")
        if not 0 <= percent <= 100:
            raise check.fail(f"{where}.canary_percent", f"0 to 100, got {percent:g}")


_KIND_CHECKS = {
    "job": _job_fields,
    "python": _python_fields,
    "shell": _shell_fields,
    "experiment": _experiment_fields,
    "pipeline": _pipeline_fields,
    "select": _select_fields,
    "deploy": _deploy_fields,
}


def _parallelism(item: dict[str, Any], where: str) -> int | None:
    value = check.count(item.get("parallelism"), f"{where}.parallelism", 1)
    if value is not None and item.get("for_each") is None:
        raise check.fail(f"{where}.parallelism", "only a step with for_each runs in parallel")
    return value


def _retry(value: Any, where: str) -> Retry:
    if value is None:
        return Retry()
    if isinstance(value, int) and not isinstance(value, bool):
        value = {"limit": value}
    found = check.mapping(value, where)
    check.known(found, ("limit", "backoff_s", "factor", "max_backoff_s"), where)
    limit = check.count(found.get("limit", 0), f"{where}.limit", 0) or 0
    if limit > 20:
        raise check.fail(f"{where}.limit", f"at most 20 retries, got {limit}")
    backoff = _seconds(found.get("backoff_s", 0.0), f"{where}.backoff_s", low=0.0) or 0.0
    factor = check.number(found.get("factor", 2.0), f"{where}.factor")
    if not 1.0 <= factor <= 10.0:
        raise check.fail(f"{where}.factor", f"between 1 and 10, got {factor:g}")
    longest = _seconds(found.get("max_backoff_s"), f"{where}.max_backoff_s", low=0.0)
    return Retry(limit, backoff, factor, longest)


def _seconds(value: Any, where: str, low: float = 0.001) -> float | None:
    if value is None:
        return None
    seconds = check.number(value, where)
    if seconds < low or seconds > 366 * 86400:
        raise check.fail(where, f"seconds, ≥ {low:g} and at most a year; got {value!r}")
    return seconds


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise check.fail(where, f"true or false, got {value!r}")
    return value


def _acyclic(steps: tuple[Step, ...]) -> None:
    """Refuses a cycle, naming the steps around it."""
    needs = {s.name: s.needs for s in steps}
    index = {s.name: i for i, s in enumerate(steps)}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            loop = [*path[path.index(name) :], name]
            raise check.fail(
                f"steps[{index[loop[0]]}].after",
                f"a cycle: {' → '.join(loop)} (each waits for the next)",
            )
        if name in done:
            return
        for other in needs[name]:
            visit(other, [*path, name])
        done.add(name)

    for step in steps:
        visit(step.name, [])


def order(spec: PipelineSpec) -> dict[str, int]:
    """Each step's depth: the longest chain of steps it waits for (roots are 0)."""
    depth: dict[str, int] = {}

    def of(name: str) -> int:
        if name not in depth:
            needs = spec.step(name).needs
            depth[name] = 1 + max((of(n) for n in needs), default=-1)
        return depth[name]

    for step in spec.steps:
        of(step.name)
    return depth
