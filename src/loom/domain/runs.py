"""Tracked runs: what a run is, who may touch it, and what may be logged to it (MLflow's rules).

A run is a record of params, metrics (their whole history), tags, a status and an artifact
folder. Every job is a run (its id is the job's), a run a job's code starts is that job's child
run, and a run started anywhere else (a notebook, CI) is a run with no job. Runs are grouped in
*projects* — MLflow calls them experiments, a word Loom keeps for hyperparameter searches.
Project 0 is everyone's "Default"; the others belong to their owner.

Standard library only: the store, the services and the dialects share these types.
"""

from __future__ import annotations

import functools
import math
import posixpath
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, NamedTuple, TypeVar

from loom.domain.errors import Forbidden, InvalidInput
from loom.domain.states import JobState


class RunStatus(StrEnum):
    RUNNING = "RUNNING"
    SCHEDULED = "SCHEDULED"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"


class Stage(StrEnum):
    """A run's or a project's lifecycle: deleted ones are kept until purged, and restorable."""

    ACTIVE = "active"
    DELETED = "deleted"


class View(StrEnum):
    """Which lifecycle stages a search sees (MLflow's `ViewType`)."""

    ACTIVE_ONLY = "ACTIVE_ONLY"
    DELETED_ONLY = "DELETED_ONLY"
    ALL = "ALL"

    @property
    def stages(self) -> tuple[str, ...]:
        if self is View.ACTIVE_ONLY:
            return (Stage.ACTIVE.value,)
        if self is View.DELETED_ONLY:
            return (Stage.DELETED.value,)
        return (Stage.ACTIVE.value, Stage.DELETED.value)


JOB_RUN_STATUS = {
    JobState.QUEUED: RunStatus.SCHEDULED,
    JobState.PENDING: RunStatus.RUNNING,
    JobState.DOWNLOADING: RunStatus.RUNNING,
    JobState.PROCESSING: RunStatus.RUNNING,
    JobState.STORING: RunStatus.RUNNING,
    JobState.COMPLETED: RunStatus.FINISHED,
    JobState.FAILED: RunStatus.FAILED,
    JobState.HALTED: RunStatus.KILLED,
}

DEFAULT_PROJECT = 0
DEFAULT_PROJECT_NAME = "Default"
PARENT_TAG = "mlflow.parentRunId"
RUN_NAME_TAG = "mlflow.runName"
JOB_GROUP = "mlflow"  # a job's metric group for MLflow keys without a group of their own
MAX_GROUP = 100  # the length of a metric point's group column

MAX_KEY = 250
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_PROJECT_NAME = 500
MAX_PROJECT_TAG_VALUE = 20_000
MAX_RUN_NAME = 250
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_ENTRIES_PER_BATCH = 1000
MAX_RESULTS = 50_000
LARGEST_FLOAT = 1.7976931348623157e308
_NAME = re.compile(r"^[/\w.\- :]*$")
_RUN_ID = re.compile(r"^[a-zA-Z0-9][\w\-]{0,255}$")
T = TypeVar("T")


@dataclass(frozen=True)
class Actor:
    """Who asks: a user (an admin sees and may change everything), or a job's learners acting
    for the job's owner, who may change only that job's runs."""

    user_id: str
    user_name: str
    is_admin: bool = False
    job_id: str | None = None

    def may_read(self, owner_id: str | None) -> bool:
        return self.is_admin or owner_id == self.user_id

    def check_write(self, owner_id: str | None, job_id: str | None, what: str) -> None:
        """Raises `Forbidden` unless this actor may change `what` (owned by `owner_id`, part of
        job `job_id`); a caller checks `may_read` first, so that others' runs stay unseen."""
        if self.job_id is not None and job_id != self.job_id:
            raise Forbidden(f"a job's token may change only that job's runs, not {what}")
        if not (self.is_admin or owner_id == self.user_id):
            raise Forbidden(f"only its owner may change {what}")


class Metric(NamedTuple):
    """One logged value: `value` may be NaN; times in milliseconds since the epoch. A tuple:
    a batch makes a thousand of them."""

    key: str
    value: float
    timestamp: int
    step: int

    @property
    def order(self) -> tuple[int, int, float]:
        """MLflow's "latest" order: by step, then time, then value (NaN counting as 0)."""
        return (self.step, self.timestamp, 0.0 if math.isnan(self.value) else self.value)


@dataclass(frozen=True)
class Entry:
    """A param or a tag."""

    key: str
    value: str


@dataclass
class RunRecord:
    """A run as its readers see it: its info, and its params, tags and latest metrics."""

    id: str
    project_id: int
    owner_id: str
    name: str
    user_id: str
    status: str
    start_time: int | None
    end_time: int | None
    stage: str
    artifact_uri: str
    job_id: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    metrics: list[Metric] = field(default_factory=list)

    @property
    def is_job(self) -> bool:
        """This run is a job itself (not a run its code started)."""
        return self.job_id == self.id


@dataclass
class ProjectRecord:
    id: int
    owner_id: str | None
    name: str
    artifact_location: str
    stage: str
    created_at: int
    updated_at: int
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a search, and the offset of the next one (None: this is the last)."""

    items: list[T]
    next_offset: int | None


# -- what may be logged -------------------------------------------------------------------------
def check_name(kind: str, name: object, where: str = "key") -> str:
    """A metric, param or tag name, as MLflow allows them (see `_check_name`)."""
    if isinstance(name, str) and _good_name(name):
        return name  # a name seen before: a batch repeats its few keys
    return _check_name(kind, name, where)


@functools.lru_cache(maxsize=4096)
def _good_name(name: str) -> bool:
    try:
        _check_name("", name, "")
    except InvalidInput:
        return False
    return True


def _check_name(kind: str, name: object, where: str = "key") -> str:
    """A metric, param or tag name, as MLflow allows them: 1 to 250 of letters, digits, `_ - .
    : / ` and space, and nothing a file path would read as another name."""
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}: a {kind} needs a name", field=where)
    if len(name) > MAX_KEY:
        raise InvalidInput(f"{where}: {kind} names are at most {MAX_KEY} characters", field=where)
    if not _NAME.match(name):
        raise InvalidInput(
            f"{where}: {kind} name {name[:60]!r} may hold only letters, digits, `_ - . : /` and "
            "spaces",
            field=where,
        )
    normal = posixpath.normpath(name)
    if normal != name or normal == "." or normal.startswith(("..", "/")):
        raise InvalidInput(
            f"{where}: {kind} name {name!r} would read as the path {normal!r}", field=where
        )
    return name


def check_value(kind: str, value: object, limit: int, where: str = "value") -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{where}: a {kind} value is a string, got {value!r:.60}", field=where)
    if len(value) > limit:
        raise InvalidInput(
            f"{where}: a {kind} value is at most {limit} characters, got {len(value)}", field=where
        )
    return value


def check_run_id(run_id: object, where: str = "run_id") -> str:
    if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
        raise InvalidInput(f"{where}: not a run id: {run_id!r:.80}", field=where)
    return run_id


def check_project_name(name: object, where: str = "name") -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(f"{where}: a project (MLflow experiment) needs a name", field=where)
    if len(name) > MAX_PROJECT_NAME:
        raise InvalidInput(f"{where}: at most {MAX_PROJECT_NAME} characters", field=where)
    return name


def check_batch(metrics: int, params: int, tags: int) -> None:
    """MLflow's limits on one `log-batch`."""
    for what, count, limit in (
        ("metrics", metrics, MAX_METRICS_PER_BATCH),
        ("params", params, MAX_PARAMS_TAGS_PER_BATCH),
        ("tags", tags, MAX_PARAMS_TAGS_PER_BATCH),
        ("metrics, params and tags", metrics + params + tags, MAX_ENTRIES_PER_BATCH),
    ):
        if count > limit:
            raise InvalidInput(
                f"{what}: a batch holds at most {limit}, got {count}; split it", field=what
            )


def check_unique_params(params: list[Entry]) -> None:
    keys = [p.key for p in params]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise InvalidInput(f"params: each key once per batch, got {twice} twice", field="params")


def param_changed(run_id: str, key: str, before: str, after: str) -> InvalidInput:
    """MLflow's refusal to change a param, in its words (training scripts match on them)."""
    return InvalidInput(
        f"Changing param values is not allowed. Param with key={key!r} was already logged with "
        f"value={before!r} for run ID={run_id!r}. Attempted logging new value {after!r}.",
        field="params",
    )


def stored_value(value: float) -> tuple[float, bool]:
    """How a value is kept: NaN as 0 with a flag, infinities as the largest floats (MLflow's
    store does the same, and answers with them)."""
    if math.isnan(value):
        return 0.0, True
    if math.isinf(value):
        return (LARGEST_FLOAT if value > 0 else -LARGEST_FLOAT), False
    return value, False


def shown_value(value: float | None, is_nan: bool) -> float:
    return math.nan if is_nan or value is None else value


# -- a job's metric points as MLflow keys -----------------------------------------------------
def metric_key(group: str, name: str) -> str:
    """The MLflow key of a job's metric: `group/name`, or the name alone in the group kept for
    keys that had none."""
    return name if group == JOB_GROUP else f"{group}/{name}"


def split_key(key: str) -> tuple[str, str]:
    """The group and name a key is stored under in a job's metric stream (`metric_key`'s
    inverse)."""
    group, _, name = key.rpartition("/")
    if not group or group == JOB_GROUP or len(group) > MAX_GROUP:
        return JOB_GROUP, key
    return group, name


def job_status(state: str) -> RunStatus:
    return JOB_RUN_STATUS[JobState(state)]


def ms(seconds: float) -> int:
    return round(seconds * 1000)


@dataclass
class LoggedModelRecord:
    """MLflow 3's logged model: a model's own artifact folder, made by a run, maybe registered
    later. `status`: LOGGED_MODEL_PENDING, LOGGED_MODEL_READY or LOGGED_MODEL_UPLOAD_FAILED."""

    id: str
    project_id: int
    owner_id: str
    name: str
    source_run_id: str | None
    model_type: str
    status: str
    status_message: str
    stage: str
    artifact_location: str
    params: dict[str, str]
    tags: dict[str, str]
    created_at: int
    updated_at: int


LOGGED_MODEL_STATUSES = ("LOGGED_MODEL_PENDING", "LOGGED_MODEL_READY", "LOGGED_MODEL_UPLOAD_FAILED")


@dataclass(frozen=True)
class Listed:
    """An entry of an artifact folder: a file (with its size) or a folder below; `path` from
    the folder's root."""

    path: str
    is_dir: bool
    size: int | None = None
