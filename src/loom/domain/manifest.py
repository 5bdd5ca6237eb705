"""The training job manifest: FfDL's fields with FfDL's meaning, plus Loom's optional keys.

Strict: an unknown key or a bad value is a `ManifestError` that names the field path and the value.
"""

from __future__ import annotations

import difflib
import json
import re
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from loom.domain.environments import MAX_PACKAGES, requirement_problem
from loom.domain.errors import NUL_WHY, ManifestError
from loom.domain.patterns import PatternError, compile_pattern, reference
from loom.domain.replicas import layout_of
from loom.domain.resources import ResourceError, Resources, parse_memory
from loom.domain.safe_yaml import UnsafeYaml, safe_load

REDACTED = "***"

# Connection keys that are safe to show; every other value of a `connection` is a secret.
PUBLIC_CONNECTION_KEYS = frozenset(
    {"auth_url", "endpoint", "endpoint_url", "region", "type", "name", "path", "bucket"}
)


def _to_text(value: Any) -> Any:
    """YAML reads `version: 1.0` as a number; FfDL meant a string."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


Text = Annotated[str, BeforeValidator(_to_text)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Container(_Strict):
    container: Text = Field(min_length=1)


class DataStoreType(StrEnum):
    """FfDL's store types and Loom's `local`; which ones can run is the platform's business."""

    LOCAL = "local"
    MOUNT_VOLUME = "mount_volume"
    HOST_MOUNT = "host_mount"
    S3_DATASTORE = "s3_datastore"
    MOUNT_COS = "mount_cos"
    SWIFT_DATASTORE = "swift_datastore"
    INMEM_DATASTORE = "inmem_datastore"
    SOFTLAYER_OBJECTSTORE = "softlayer_objectstore"
    BLUEMIX_OBJECTSTORE = "bluemix_objectstore"


class DataStore(_Strict):
    id: Text = Field(min_length=1)
    type: DataStoreType
    training_data: Container | None = None
    training_results: Container | None = None
    connection: dict[str, Text] = Field(default_factory=dict)

    @property
    def secrets(self) -> list[str]:
        return [v for k, v in self.connection.items() if k not in PUBLIC_CONNECTION_KEYS and v]

    @field_validator("connection")
    @classmethod
    def _plain_path(cls, value: dict[str, str]) -> dict[str, str]:
        path = value.get("path")
        if path is not None and (
            not path.startswith("/") or ".." in path.split("/") or "\0" in path
        ):
            raise ValueError(f"`path` must be an absolute host path without '..', got {path!r}")
        return value


class ImageLocation(_Strict):
    registry: Text | None = None
    namespace: Text | None = None
    access_token: Text | None = None
    email: Text | None = None


class Framework(_Strict):
    name: Text = Field(min_length=1)
    version: Text | None = None
    command: Text = Field(min_length=1)
    image_tag: Text | None = None
    image_location: ImageLocation | None = None
    # Loom's addition: the image the learners run in (Kubernetes launcher only).
    image: Text | None = Field(default=None, min_length=1, max_length=300)

    @field_validator("image")
    @classmethod
    def _one_word(cls, value: str | None) -> str | None:
        if value is not None and (value != value.strip() or " " in value or "\n" in value):
            raise ValueError("an image reference such as registry/name:tag, without spaces")
        return value

    @field_validator("command")
    @classmethod
    def _command_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        # A folded YAML block keeps the newline before a more-indented line; FfDL's manifests use
        # such lines to continue one long command, so they are joined, not run as new commands.
        return re.sub(r"\n[ \t]+", " ", value.strip())


class MetricsType(StrEnum):
    NONE = "none"
    LOGGER = "logger"
    REGEX_EXTRACTOR = "regex_extractor"
    TENSORBOARD = "tensorboard"
    EMETRICS_FILE = "emetrics_file"
    KATIB = "katib"
    PROMETHEUS = "prometheus"  # Katib's PrometheusMetric: `in` is PORT/PATH on the learner


# What Loom itself sets for a learner; a manifest's `environment.env` cannot change it.
RESERVED_ENV = frozenset(
    {"DATA_DIR", "MODEL_DIR", "RESULT_DIR", "LOG_DIR", "CHECKPOINT_DIR", "JOB_STATE_DIR"}
    | {"TRAINING_ID", "LEARNER_ID", "NUM_LEARNERS", "GPU_COUNT", "CUDA_VISIBLE_DEVICES"}
    | {"TRAINING_ATTEMPT", "PATH", "PYTHONPATH"}
)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class Environment(_Strict):
    """What a job runs with beyond its framework: packages from the platform's index (`pip`),
    a requirements file in its code (`requirements`), Python's version, and variables."""

    pip: list[Text] = Field(default_factory=list, max_length=MAX_PACKAGES)
    requirements: Text | None = Field(default=None, min_length=1, max_length=300)
    python: Text | None = Field(default=None, pattern=r"^3\.\d{1,2}$")
    # False: the job brings its framework itself (its pip list, its image), or needs only the
    # framework's launch variables; the platform installs nothing for `framework.name`.
    install_framework: bool = True
    env: dict[str, Text] = Field(default_factory=dict)

    @field_validator("pip")
    @classmethod
    def _requirements(cls, value: list[str]) -> list[str]:
        for index, text in enumerate(value):
            problem = requirement_problem(text)
            if problem is not None:
                raise ValueError(f"[{index}] {text!r}: {problem}")
        return value

    @field_validator("requirements")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or ".." in value.split("/")):
            raise ValueError("must be a path inside the model code, such as requirements.txt")
        return value

    @field_validator("env")
    @classmethod
    def _names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name")
            if name in RESERVED_ENV or name.startswith("LOOM_"):
                raise ValueError(f"{name!r} is set by Loom and cannot be changed")
        return value


# FfDL's other spellings of the same collectors.
_METRICS_SYNONYMS = {
    "tensorboard_extractor": "tensorboard",
    "optivist": "emetrics_file",
    "file": "emetrics_file",
    "null": "none",
    "nil": "none",
    "": "none",
}


def _metrics_type(value: Any) -> Any:
    if value is None:
        return "none"
    if isinstance(value, str):
        return _METRICS_SYNONYMS.get(value.lower(), value.lower())
    return value


class ValueType(StrEnum):
    STRING = "STRING"
    JSONSTRING = "JSONSTRING"
    INT = "INT"
    FLOAT = "FLOAT"


class TypedValue(_Strict):
    """A value of a metric point: a literal, or `$name` for a named group of the regex."""

    type: ValueType = ValueType.STRING
    value: Text


class GroupMeta(_Strict):
    time: Text | None = None
    subid: Text | None = None


class RegexGroup(_Strict):
    """One group of FfDL's regex_extractor: a pattern, and what of its match makes a point."""

    regex: Text = Field(min_length=1)
    meta: GroupMeta = Field(default_factory=GroupMeta)
    scalars: dict[str, TypedValue] | None = None
    values: dict[str, TypedValue] | None = None
    etimes: dict[str, TypedValue] | None = None

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            compile_pattern(value)
        except PatternError as exc:
            raise ValueError(str(exc)) from exc
        return value

    @model_validator(mode="after")
    def _references_exist(self) -> RegexGroup:
        if not (self.scalars or self.values):
            raise ValueError("a group needs `scalars` (or FfDL's `values`): the values to extract")
        named = set(compile_pattern(self.regex).groupindex)
        fields = {**(self.scalars or {}), **(self.values or {}), **(self.etimes or {})}
        for key, typed in fields.items():
            ref = reference(typed.value)
            if ref is not None and ref not in named:
                raise ValueError(
                    f"{key} refers to ${ref}, which the regex does not capture "
                    f"(named groups: {', '.join(sorted(named)) or 'none'})"
                )
        return self


class EvaluationMetrics(_Strict):
    type: Annotated[MetricsType, BeforeValidator(_metrics_type)] = MetricsType.NONE
    in_: Text | None = Field(default=None, alias="in")
    image_tag: Text | None = None
    event_types: list[Text] | None = Field(default=None, alias="eventTypes")
    line_lookahead: int | None = Field(default=None, ge=1)
    linelookahead: int | None = Field(default=None, ge=1)
    eval_metric: Text | None = None
    file: Text | None = None
    groups: dict[str, RegexGroup] | None = None
    # Katib's collectors (type katib): its filters (group 1 a name, 2 a value), and with `in`
    # a file of TEXT lines or JSON lines instead of the output. Type prometheus: the metrics'
    # names to keep of what the endpoint `in` (PORT/PATH) exposes.
    filters: list[Text] | None = None
    format: Literal["TEXT", "JSON"] | None = None

    @property
    def lookahead(self) -> int:
        return self.line_lookahead or self.linelookahead or 4

    def _two_groups(self) -> None:
        for index, pattern in enumerate(self.filters or []):
            try:
                groups = re.compile(pattern).groups
            except re.error as exc:
                raise ValueError(f"filters[{index}] is not a regular expression: {exc}") from None
            if groups < 2:
                raise ValueError(f"filters[{index}] needs two groups: a metric's name, its value")

    @model_validator(mode="after")
    def _groups_for_regex(self) -> EvaluationMetrics:
        if self.type == MetricsType.REGEX_EXTRACTOR and not self.groups:
            raise ValueError("regex_extractor needs `groups`, each with a `regex`")
        if self.type == MetricsType.PROMETHEUS:
            if not self.in_ or not re.fullmatch(r"\d{1,5}/\S*", self.in_) or self.format:
                raise ValueError(
                    "prometheus needs `in`: the learner's PORT/PATH, e.g. 8080/metrics"
                )
            return self
        if (self.filters or self.format) and self.type != MetricsType.KATIB:
            raise ValueError("filters and format are Katib's: only with type katib")
        self._two_groups()
        if self.format and not self.in_:
            raise ValueError("format is a metrics file's: give the file with `in`")
        if self.format == "JSON" and self.filters:
            raise ValueError("a JSON metrics file's metrics are its keys: no filters")
        return self


class RestartPolicy(StrEnum):
    NEVER = "Never"
    ON_FAILURE = "OnFailure"
    EXIT_CODE = "ExitCode"


def _memory(value: Any) -> int:
    try:
        return parse_memory(value)
    except ResourceError as exc:
        raise ValueError(str(exc)) from exc


Memory = Annotated[int, BeforeValidator(_memory)]


PLACEMENTS = ("pack", "spread", "strict_pack", "strict_spread")


class Manifest(_Strict):
    """A training job as FfDL described it. Resources are per learner."""

    name: Text = Field(min_length=1, max_length=200)
    description: Text = ""
    version: Text = "1.0"
    gpus: int = Field(default=0, ge=0)
    gpu_type: Text | None = None
    cpus: float = Field(default=1.0, gt=0)
    memory: Memory = Field(default=parse_memory("1GiB"))
    storage: Memory | None = None
    learners: int = Field(default=1, ge=1, le=256)
    data_stores: list[DataStore] = Field(default_factory=list)
    framework: Framework
    evaluation_metrics: EvaluationMetrics | None = None
    # Loom's additions, all optional.
    priority: int = 0
    restart_policy: RestartPolicy = RestartPolicy.NEVER
    max_restarts: int = Field(default=0, ge=0, le=100)
    # Seconds the job may run from its start (restarts included); past them it is halted.
    timeout_s: int | None = Field(default=None, ge=1, le=366 * 86_400)
    model_name: Text | None = None
    framework_options: dict[str, Any] = Field(default_factory=dict)
    environment: Environment | None = None

    @field_validator("gpus", mode="before")
    @classmethod
    def _whole_gpus(cls, value: Any) -> Any:
        if isinstance(value, float) and not value.is_integer():
            raise ValueError("GPUs are given whole; use an integer")
        return value

    @field_validator("framework_options")
    @classmethod
    def _known_placement(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        placement = value.get("placement", "pack")
        if placement not in PLACEMENTS:
            raise ValueError(
                f"placement {placement!r} is not one of {', '.join(PLACEMENTS)} (how a cluster "
                "launcher spreads the learners over its machines)"
            )
        layout = layout_of(value.get("replicas"))  # a Kubeflow object's: ValueError if bad
        learners = info.data.get("learners")
        if layout is not None and learners is not None and layout.size != learners:
            raise ValueError(
                f"replicas has {layout.size} replicas, but learners is {learners}: one learner "
                "per replica"
            )
        return value

    @field_validator("data_stores")
    @classmethod
    def _unique_store_ids(cls, value: list[DataStore]) -> list[DataStore]:
        ids = [store.id for store in value]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"data store ids must be unique, {dupes[0]!r} appears twice")
        return value

    @property
    def per_learner(self) -> Resources:
        return Resources(cpus=self.cpus, memory=self.memory, gpus=self.gpus)

    @property
    def total(self) -> Resources:
        return self.per_learner.times(self.learners)

    @property
    def secrets(self) -> list[str]:
        found = [s for store in self.data_stores for s in store.secrets]
        location = self.framework.image_location
        if location is not None and location.access_token:
            found.append(location.access_token)
        return found

    def redacted(self, original: dict[str, Any] | None = None) -> dict[str, Any]:
        """The manifest as JSON (the user's own mapping if given), every secret as `***`: the
        one rule of `credentials.split`, which takes them out before a manifest is stored."""
        from loom.domain.credentials import split  # it builds on this module

        if original is None:
            original = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        redacted, _credentials = split(json.loads(json.dumps(original, default=str)))
        return redacted


def _field_path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if path else "") + ("in" if part == "in_" else str(part))
    return path


def _did_you_mean(loc: tuple[int | str, ...]) -> str:
    """ "; did you mean `learners`?" when the unknown field is close to one its parent takes."""
    name = loc[-1] if loc else None
    if not isinstance(name, str):
        return ""
    close = difflib.get_close_matches(name, _fields_under(loc[:-1]), n=1, cutoff=0.6)
    return f"; did you mean `{close[0]}`?" if close else ""


def _fields_under(loc: tuple[int | str, ...]) -> list[str]:
    """The field names (as written in a manifest) of the model found at `loc`."""
    model: type[BaseModel] = Manifest
    keyed = False  # the next part is a key of a mapping of models, not a field
    for part in loc:
        if isinstance(part, int) or keyed:
            keyed = False
            continue
        field = next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None)
        found = _model_in(field.annotation) if field is not None else None
        if found is None:
            return []
        model, keyed = found
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> tuple[type[BaseModel], bool] | None:
    """The model inside an annotation (`X`, `X | None`, `list[X]`, `dict[str, X]`), and whether
    it sits in a mapping."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found[0], found[1] or get_origin(annotation) is dict
    return None


def _shown(value: Any, limit: int = 200) -> str:
    """A value for an error message: a manifest's value may be most of a MiB."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text):,} characters)"


def _describe(error: Any) -> tuple[str, str]:
    loc = tuple(p for p in error["loc"] if not str(p).startswith("function-"))
    field = _field_path(loc)
    kind = error["type"]
    # A credential's value is never repeated, not even to its owner: errors end up in logs.
    secret = "connection" in loc or "image_location" in loc
    if kind == "extra_forbidden":
        value = "" if secret else f" (value {_shown(error['input'])})"
        return field, f"unknown field `{field}`{value}{_did_you_mean(loc)}"
    if kind == "missing":
        return field, f"field `{field}` is required"
    message = str(error["msg"]).removeprefix("Value error, ")
    shown = _shown(error["input"])
    if secret or shown in message:
        return field, f"field `{field}`: {message}"
    return field, f"field `{field}`: {message}, got {shown}"


def load_manifest(
    text: str | bytes, source: str = "the manifest"
) -> tuple[Manifest, dict[str, Any]]:
    """Parse and validate a YAML manifest: the model, and the mapping as the user wrote it
    (what the platform stores, so that `1Gb` stays `1Gb`). Raises `ManifestError`; YAML's own
    errors name `source` (a file name, say), the line and the column."""
    try:
        data = safe_load(text)
    except UnsafeYaml as exc:
        raise ManifestError(f"{source} is refused: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source} is not valid YAML: {yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise ManifestError(f"the manifest must be a YAML mapping, got {type(data).__name__}")
    return manifest_from_dict(data), data


def yaml_problem(exc: yaml.YAMLError) -> str:
    """ "line 4, column 2: did not find expected key (in the block mapping at line 1, column 1)"."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or problem is None:
        return str(exc)
    said = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, where = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and where is not None:
        at = f"line {where.line + 1}, column {where.column + 1}"
        said += f" ({context.removeprefix('while ')} at {at})"
    return said


def parse_manifest(text: str | bytes) -> Manifest:
    """Parse and validate a YAML manifest; raises `ManifestError` naming the first bad field."""
    return load_manifest(text)[0]


def _nul_at(value: Any, where: str = "") -> str | None:
    """The dotted path of the first string (or key) holding a NUL character, if any."""
    if isinstance(value, str):
        return where if "\x00" in value else None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        path = f"{where}.{key}" if where else str(key)
        found = path if isinstance(key, str) and "\x00" in key else _nul_at(item, path)
        if found is not None:
            return found
    return None


def manifest_from_dict(data: dict[str, Any]) -> Manifest:
    where = _nul_at(data)
    if where is not None:  # stored as text, which cannot hold one on PostgreSQL
        shown = where.replace("\x00", "\\0")
        raise ManifestError(f"{shown}: {NUL_WHY}", field=shown)
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # A misspelt field is both unknown and missing: naming the unknown one (with what it
        # might be) tells the user what to fix.
        unknown = [e for e in errors if e["type"] == "extra_forbidden"]
        field, message = _describe((unknown or errors)[0])
        others = exc.error_count() - 1
        if others:
            message += f" (and {others} more problem{'s' if others > 1 else ''})"
        raise ManifestError(message, field=field) from exc
