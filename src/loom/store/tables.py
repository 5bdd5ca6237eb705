"""The tables. Times are UNIX seconds as floats: portable across SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class User(Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[float] = mapped_column(Float)
    # Per-user quotas; None is the platform's default (LOOM_QUOTA_*), itself unlimited if unset.
    quota_cpus: Mapped[float | None] = mapped_column(Float)
    quota_gpus: Mapped[int | None] = mapped_column(Integer)
    quota_jobs: Mapped[int | None] = mapped_column(Integer)
    max_priority: Mapped[int | None] = mapped_column(Integer)  # None: LOOM_MAX_PRIORITY


class Token(Base):
    """Only a token's SHA-256 is kept; `id` is its public name, for listing and revoking.
    A token with a job id is scoped to that job's learners."""

    __tablename__ = "tokens"

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    id: Mapped[str] = mapped_column(String(20), unique=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[str | None] = mapped_column(String(40), index=True)
    name: Mapped[str] = mapped_column(String(100), default="", server_default="")
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float | None] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (  # listings page newest first by (submitted_at, id): see migration 0010
        Index("ix_jobs_submitted_at_id", "submitted_at", "id"),
        Index("ix_jobs_owner_id_submitted_at", "owner_id", "submitted_at", "id"),
        Index("ix_jobs_state_submitted_at", "state", "submitted_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    name: Mapped[str] = mapped_column(String(200))
    state: Mapped[str] = mapped_column(String(20))
    error_code: Mapped[str | None] = mapped_column(String(10))
    status_message: Mapped[str] = mapped_column(Text, default="")
    queue_reason: Mapped[str] = mapped_column(Text, default="")
    manifest: Mapped[str] = mapped_column(Text)
    code_digest: Mapped[str] = mapped_column(String(80))
    priority: Mapped[int] = mapped_column(Integer, default=0)
    learners: Mapped[int] = mapped_column(Integer)
    cpus: Mapped[float] = mapped_column(Float)
    memory: Mapped[int] = mapped_column(BigInteger)
    gpus: Mapped[int] = mapped_column(Integer)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    halt_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    restart_pending: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    submitted_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    # What made the job, when not a user's own submission: an experiment's trial, with its
    # parameters. Its model versions keep it (migration 0014).
    lineage: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class JobSecret(Base):
    """A job's credentials, sealed with the platform's current secret key; None: it has none.
    Every job has one (a job without one was stored before credentials were sealed)."""

    __tablename__ = "job_secrets"

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    sealed: Mapped[str | None] = mapped_column(Text)
    sealed_at: Mapped[float] = mapped_column(Float)


class JobEvent(Base):
    """One stored transition of a job: its history."""

    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    state: Mapped[str] = mapped_column(String(20))
    at: Mapped[float] = mapped_column(Float)
    message: Mapped[str] = mapped_column(Text, default="")


# The queue in its order, and nothing else: a scheduling pass reads it in chunks (migration 0011).
Index(
    "ix_jobs_queue",
    Job.priority.desc(),
    Job.submitted_at,
    Job.id,
    postgresql_where=text("state = 'QUEUED'"),
    sqlite_where=text("state = 'QUEUED'"),
)


class Learner(Base):
    __tablename__ = "learners"
    __table_args__ = (UniqueConstraint("job_id", "attempt", "learner_id"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    attempt: Mapped[int] = mapped_column(Integer)
    learner_id: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(20))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    error_code: Mapped[str | None] = mapped_column(String(10))
    message: Mapped[str] = mapped_column(Text, default="")
    handle: Mapped[str] = mapped_column(Text, default="")
    devices: Mapped[str] = mapped_column(String(200), default="", server_default="")
    started_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    heartbeat_at: Mapped[float | None] = mapped_column(Float)


class LogLine(Base):
    """One line a learner printed. Unique on (job, attempt, learner, seq): resends are no-ops."""

    __tablename__ = "log_lines"
    __table_args__ = (
        UniqueConstraint("job_id", "attempt", "learner_id", "seq"),
        Index("ix_log_lines_job_id_id", "job_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    learner_id: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(BigInteger)
    time: Mapped[float] = mapped_column(Float)
    stream: Mapped[str] = mapped_column(String(8))
    text: Mapped[str] = mapped_column(Text)


class RunInfo(Base):
    """A run's parameters and tags, as its code logged them (`tracking.log_params`, `set_tags`,
    or MLflow's client): a parameter keeps its first value, a tag its newest. A job's own are
    under its run, whose id is the job's."""

    __tablename__ = "run_info"
    __table_args__ = (UniqueConstraint("run_id", "kind", "key"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(8))  # param | tag
    key: Mapped[str] = mapped_column(String(250))
    value: Mapped[str] = mapped_column(Text)
    set_at: Mapped[float] = mapped_column(Float)


class MetricPoint(Base):
    """One evaluation-metrics point of a learner: a group (train, test, ...), a step and the
    other x-axis values (`etimes`), and named values. Unique on (job, attempt, learner, seq)."""

    __tablename__ = "metric_points"
    __table_args__ = (
        UniqueConstraint("job_id", "attempt", "learner_id", "seq"),
        Index("ix_metric_points_job_id_id", "job_id", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    learner_id: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(BigInteger)
    time: Mapped[float] = mapped_column(Float)
    group: Mapped[str] = mapped_column(String(100))
    step: Mapped[int | None] = mapped_column(BigInteger)
    etimes: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    values: Mapped[dict[str, float]] = mapped_column(JSON)
    # A run the job's code started (MLflow's client, in the job): its points are the job's too.
    # None: the job's own run.
    run_id: Mapped[str | None] = mapped_column(String(40))


class Model(Base):
    """A registered model: a name, unique per owner, whose versions come from jobs."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Float)
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    updated_at: Mapped[float | None] = mapped_column(Float)


class ModelVersion(Base):
    """One trained model with its provenance; its files live in the artifact store by digest."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model_id", "version"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    code_digest: Mapped[str] = mapped_column(String(80))
    framework: Mapped[str] = mapped_column(String(100))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    data_stores: Mapped[list[str]] = mapped_column(JSON)
    metrics: Mapped[dict[str, float]] = mapped_column(JSON)
    files: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    # The job's logged parameters and tags when the version was made: {"params": …, "tags": …}
    run_info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    lineage: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the job's, kept
    # What MLflow's registry keeps beside: where the files came from (`runs:/…`, `models:/…`),
    # the run, a description and a stage (None, Staging, Production, Archived).
    source: Mapped[str] = mapped_column(Text, default="", server_default="")
    run_id: Mapped[str] = mapped_column(String(40), default="", server_default="")
    description: Mapped[str] = mapped_column(Text, default="", server_default="")
    stage: Mapped[str] = mapped_column(String(20), default="None", server_default="None")
    updated_at: Mapped[float | None] = mapped_column(Float)


class ModelTag(Base):
    """A tag of a registered model (`version` 0) or of one of its versions."""

    __tablename__ = "model_tags"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class ModelAlias(Base):
    """A name for one version of a model, such as `production`."""

    __tablename__ = "model_aliases"

    model_id: Mapped[str] = mapped_column(
        ForeignKey("models.id", ondelete="CASCADE"), primary_key=True
    )
    alias: Mapped[str] = mapped_column(String(100), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class Experiment(Base):
    """A hyperparameter search (Katib's v1beta1 form): its trials are jobs of its owner."""

    __tablename__ = "experiments"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # as written, credentials redacted
    sealed: Mapped[str | None] = mapped_column(Text)  # the trial spec's credentials, sealed
    code_digest: Mapped[str] = mapped_column(String(80))
    state: Mapped[str] = mapped_column(String(20), index=True)
    reason: Mapped[str] = mapped_column(String(40), default="")  # Katib's: GoalReached, …
    message: Mapped[str] = mapped_column(Text, default="")
    max_trial_count: Mapped[int | None] = mapped_column(Integer)  # raised by a resume
    # The search algorithm's own state between trials (Optuna's study attributes).
    sampler_state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    best_trial: Mapped[int | None] = mapped_column(Integer)
    best_model: Mapped[str] = mapped_column(String(300), default="")  # NAME@VERSION, aliased
    created_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)


class Trial(Base):
    """One point of an experiment's search, run as one job (`job_id`, chosen before it is
    submitted, so that a restart submits it at most once)."""

    __tablename__ = "trials"
    __table_args__ = (UniqueConstraint("experiment_id", "number"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    experiment_id: Mapped[str] = mapped_column(
        ForeignKey("experiments.id", ondelete="CASCADE"), index=True
    )
    number: Mapped[int] = mapped_column(Integer)  # 0, 1, … in the order proposed
    job_id: Mapped[str] = mapped_column(String(40), index=True)
    state: Mapped[str] = mapped_column(String(24))
    parameters: Mapped[dict[str, str]] = mapped_column(JSON)  # as the trial's manifest got them
    sampler_state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # Optuna's trial
    objective: Mapped[float | None] = mapped_column(Float)
    metrics: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)
    intermediate: Mapped[list[float | None]] = mapped_column(JSON, default=list)  # objective's
    stop_reason: Mapped[str] = mapped_column(Text, default="")  # early stopping asked
    message: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[float] = mapped_column(Float)
    submitted_at: Mapped[float | None] = mapped_column(Float)  # its job stored
    finished_at: Mapped[float | None] = mapped_column(Float)


class PipelineRun(Base):
    """One run of a pipeline: its spec (credentials sealed apart), its parameters, and each
    step's state (`steps`: name → {state, message, started_at, finished_at})."""

    __tablename__ = "pipeline_runs"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    pipeline: Mapped[str] = mapped_column(String(100), index=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # as written, credentials redacted
    sealed: Mapped[str | None] = mapped_column(Text)  # the steps' credentials, sealed
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON)  # defaults with the run's own
    code_digest: Mapped[str] = mapped_column(String(80))
    state: Mapped[str] = mapped_column(String(20), index=True)
    message: Mapped[str] = mapped_column(Text, default="")
    steps: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    schedule: Mapped[str] = mapped_column(String(100), default="")  # the one that started it
    created_at: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    # a sub-pipeline's run: the run whose `pipeline` step started it (None: a run of its own)
    parent_id: Mapped[str | None] = mapped_column(String(40), index=True)
    outputs: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the spec's `outputs`, at its end


class PipelineSchedule(Base):
    """A pipeline started at the times a cron expression names (UTC), from its own copy of the
    spec (credentials sealed apart), code and parameters."""

    __tablename__ = "pipeline_schedules"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    pipeline: Mapped[str] = mapped_column(String(100))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    sealed: Mapped[str | None] = mapped_column(Text)
    parameters: Mapped[dict[str, Any]] = mapped_column(JSON)
    code_digest: Mapped[str] = mapped_column(String(80))
    cron: Mapped[str] = mapped_column(String(200))
    enabled: Mapped[bool] = mapped_column(Boolean)
    next_at: Mapped[float | None] = mapped_column(Float, index=True)  # None while disabled
    last_run_id: Mapped[str] = mapped_column(String(40), default="")
    last_run_at: Mapped[float | None] = mapped_column(Float)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[float] = mapped_column(Float)
    # fire on an event rather than (or besides) the cron (`loom.pipelines.triggers`): the
    # trigger as asked, and what it has seen so far
    trigger: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    trigger_state: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class PipelineTask(Base):
    """One execution of a step (one per item of a fan-out): its job (or experiment), chosen
    before it is submitted so that a restart submits it at most once, and its outputs."""

    __tablename__ = "pipeline_tasks"
    __table_args__ = (UniqueConstraint("run_id", "step", "index"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    run_id: Mapped[str] = mapped_column(
        ForeignKey("pipeline_runs.id", ondelete="CASCADE"), index=True
    )
    step: Mapped[str] = mapped_column(String(63))
    index: Mapped[int] = mapped_column(Integer)  # its item's place in for_each; 0 otherwise
    item: Mapped[Any] = mapped_column(JSON, nullable=True)
    state: Mapped[str] = mapped_column(String(20))
    attempt: Mapped[int] = mapped_column(Integer, default=1)  # 1, then 2… on each retry
    ref: Mapped[str] = mapped_column(String(300), default="", index=True)  # job or experiment
    cache_key: Mapped[str] = mapped_column(String(64), default="", index=True)
    outputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    message: Mapped[str] = mapped_column(Text, default="")
    not_before: Mapped[float | None] = mapped_column(Float)  # a retry's backoff
    submitted_at: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)


class Deployment(Base):
    """A registered model version served behind one endpoint by a gateway and its replicas."""

    __tablename__ = "deployments"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(63))
    model_name: Mapped[str] = mapped_column(String(200))
    model_ref: Mapped[str] = mapped_column(String(100))
    model_version: Mapped[int] = mapped_column(Integer)
    port: Mapped[int] = mapped_column(Integer, unique=True)
    grpc_port: Mapped[int | None] = mapped_column(Integer, unique=True)  # the V2 gRPC endpoint
    canary_version: Mapped[int | None] = mapped_column(Integer)  # served beside model_version
    canary_percent: Mapped[float | None] = mapped_column(Float)  # its share of requests
    min_replicas: Mapped[int] = mapped_column(Integer)
    max_replicas: Mapped[int] = mapped_column(Integer)
    target_concurrency: Mapped[float] = mapped_column(Float)
    scale_down_delay_s: Mapped[float] = mapped_column(Float)
    batch_size: Mapped[int] = mapped_column(Integer)
    batch_wait_ms: Mapped[float] = mapped_column(Float)
    request_log: Mapped[bool] = mapped_column(Boolean, default=False)
    # GPUs each replica is pinned to (its model runs there); 0: the CPU
    gpus_per_replica: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    # serving security: a public deployment answers without a token
    public: Mapped[bool] = mapped_column(Boolean, default=False, server_default="0")
    # serving code: the runtime asked for (None: chosen from the files), packages added to the
    # replicas' environment, the built-in explainer, a transformer's code ({digest, files}),
    # and for an inference graph its nodes (then it serves no model of its own)
    runtime: Mapped[str | None] = mapped_column(String(30))
    pip: Mapped[list[str] | None] = mapped_column(JSON)
    explainer: Mapped[str | None] = mapped_column(String(30))
    transformer: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    graph: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # drift and outlier detection, payload logging (`loom.serving.monitoring`); None: off
    monitoring: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class DriftWindow(Base):
    """One window of a deployment's requests as its detector judged it against the version's
    reference data. Kept after the deployment goes: it is the model version's drift history."""

    __tablename__ = "drift_windows"
    __table_args__ = (
        UniqueConstraint("deployment_id", "window_key"),
        Index("ix_drift_windows_model", "owner_id", "model_name", "model_version"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(String(40))
    window_key: Mapped[str] = mapped_column(String(80))  # the gateway's: once per window
    owner_id: Mapped[str] = mapped_column(String(40))
    deployment: Mapped[str] = mapped_column(String(63))
    model_name: Mapped[str] = mapped_column(String(200))
    model_version: Mapped[int] = mapped_column(Integer)
    at: Mapped[float] = mapped_column(Float, index=True)  # when the window closed
    since: Mapped[float] = mapped_column(Float)  # its first request
    drift: Mapped[bool] = mapped_column(Boolean)
    score: Mapped[float] = mapped_column(Float)
    p_value: Mapped[float] = mapped_column(Float)
    size: Mapped[int] = mapped_column(Integer)
    outliers: Mapped[int] = mapped_column(Integer)
    features: Mapped[list[str]] = mapped_column(JSON)  # the features that drifted
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)  # per feature, the test, thresholds


class ModelEvaluation(Base):
    """What an evaluation (accuracy, fairness, robustness, explanations) found of a model
    version, recorded from the job that ran it."""

    __tablename__ = "model_evaluations"
    __table_args__ = (
        UniqueConstraint("job_id", "model_id", "version", "kind"),
        Index("ix_model_evaluations_version", "model_id", "version"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(40))
    job_id: Mapped[str] = mapped_column(String(40))
    lineage: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the run and step, if any
    results: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)


class DeploymentKey(Base):
    """A key that calls one deployment's endpoint; only its SHA-256 is kept, as for tokens."""

    __tablename__ = "deployment_keys"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    deployment_id: Mapped[str] = mapped_column(
        ForeignKey("deployments.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[float] = mapped_column(Float)
    last_used_at: Mapped[float | None] = mapped_column(Float)


class AuditEvent(Base):
    """Who did what to which object, from where. Never a token or a secret in `detail`."""

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_actor_id", "actor", "id"),
        Index("ix_audit_events_action_id", "action", "id"),
    )

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    at: Mapped[float] = mapped_column(Float, index=True)
    actor: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(50))
    target_kind: Mapped[str] = mapped_column(String(30))
    target_id: Mapped[str] = mapped_column(String(200))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON)
    client: Mapped[str] = mapped_column(String(100), default="")


class Lease(Base):
    """A lease one server holds for a while (`lifecycle`: who launches and watches jobs). `term`
    grows at every change of holder: work done under an older term is refused (fencing)."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(50), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    term: Mapped[int] = mapped_column(BigInteger)
    acquired_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class Project(Base):
    """A group of runs with tags: MLflow's experiment (Loom's `Experiment` is a hyperparameter
    search). Project 0 is everyone's "Default" (no owner); the others are their owner's, named
    uniquely per owner."""

    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("owner_id", "name"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    owner_id: Mapped[str | None] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(500))
    artifact_location: Mapped[str] = mapped_column(Text)
    stage: Mapped[str] = mapped_column(String(20))  # active | deleted
    # MLflow's times are integer milliseconds; they are kept so, exactly.
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class ProjectTag(Base):
    __tablename__ = "project_tags"

    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Run(Base):
    """A tracked run: a job (its id is the job's), a run a job's code started (`job_id` is that
    job), or a run logged from anywhere else (no job). Times in milliseconds, as MLflow's."""

    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_project_id_start_time", "project_id", "start_time", "id"),
        Index("ix_runs_owner_id_start_time", "owner_id", "start_time", "id"),
    )

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"))
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"))
    job_id: Mapped[str | None] = mapped_column(String(40), index=True)
    name: Mapped[str] = mapped_column(String(250))
    user_id: Mapped[str] = mapped_column(String(250))  # as the client said (MLflow's `user_id`)
    status: Mapped[str] = mapped_column(String(20))
    start_time: Mapped[int | None] = mapped_column(BigInteger)
    end_time: Mapped[int | None] = mapped_column(BigInteger)
    stage: Mapped[str] = mapped_column(String(20))  # active | deleted
    deleted_at: Mapped[int | None] = mapped_column(BigInteger)
    artifact_uri: Mapped[str] = mapped_column(Text)
    # MLflow's run inputs (datasets) and outputs (logged models), as the client sent them.
    inputs: Mapped[list[Any]] = mapped_column(JSON, default=list)
    outputs: Mapped[list[Any]] = mapped_column(JSON, default=list)


class RunMetric(Base):
    """One logged value of a run that is not part of a job (a job's are its metric points).
    The same point logged twice is kept once, as MLflow does."""

    __tablename__ = "run_metrics"
    __table_args__ = (UniqueConstraint("run_id", "key", "timestamp", "step", "value", "is_nan"),)

    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(250))
    value: Mapped[float] = mapped_column(Float)  # NaN is kept as 0 with `is_nan`
    is_nan: Mapped[bool] = mapped_column(Boolean)
    step: Mapped[int] = mapped_column(BigInteger)
    timestamp: Mapped[int] = mapped_column(BigInteger)


class RunLatestMetric(Base):
    """Each metric's latest value of a run (by step, then time, then value), which searches
    filter and order by. Every run's, jobs' included."""

    __tablename__ = "run_latest_metrics"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(250), primary_key=True)
    value: Mapped[float] = mapped_column(Float)
    is_nan: Mapped[bool] = mapped_column(Boolean)
    step: Mapped[int] = mapped_column(BigInteger)
    timestamp: Mapped[int] = mapped_column(BigInteger)


class TrackedFile(Base):
    """A file of a run's or a logged model's artifact folder, its content in the artifact store
    by digest (`container`: the run's or the logged model's id)."""

    __tablename__ = "tracked_files"

    container: Mapped[str] = mapped_column(String(40), primary_key=True)
    path: Mapped[str] = mapped_column(String(1000), primary_key=True)
    digest: Mapped[str] = mapped_column(String(80))
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)


class LoggedModel(Base):
    """MLflow 3's logged model: a model's files (an artifact folder of its own), made by a run,
    before or without its registration."""

    __tablename__ = "logged_models"

    id: Mapped[str] = mapped_column(String(40), primary_key=True)  # m-<32 hex>
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id"), index=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(500))
    source_run_id: Mapped[str | None] = mapped_column(String(40), index=True)
    job_id: Mapped[str | None] = mapped_column(String(40))  # made by a job's code: that job
    model_type: Mapped[str] = mapped_column(String(500), default="")
    status: Mapped[str] = mapped_column(
        String(30)
    )  # LOGGED_MODEL_PENDING | _READY | _UPLOAD_FAILED
    status_message: Mapped[str] = mapped_column(Text, default="")
    stage: Mapped[str] = mapped_column(String(20))
    artifact_location: Mapped[str] = mapped_column(Text)
    params: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    tags: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    created_at: Mapped[int] = mapped_column(BigInteger)
    updated_at: Mapped[int] = mapped_column(BigInteger)


class DialectObject(Base):
    """What a foreign API keeps that has no Loom table of its own (KFP's pipelines, their
    versions and experiments, a run's KFP fields; Argo's WorkflowTemplates), as that API's
    JSON, owned like everything else."""

    __tablename__ = "dialect_objects"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    dialect: Mapped[str] = mapped_column(String(20))  # kfp, argo
    kind: Mapped[str] = mapped_column(String(40))  # pipeline, pipeline_version, experiment, …
    name: Mapped[str] = mapped_column(String(255))
    parent_id: Mapped[str | None] = mapped_column(String(64), index=True)  # a version's pipeline
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (Index("ix_dialect_objects_kind", "owner_id", "dialect", "kind", "name"),)


class KubeObject(Base):
    """A Kubernetes-style object applied with `loom apply` (a TFJob, an Experiment, an
    InferenceService, a ConfigMap…): the document as applied (secrets redacted, sealed apart),
    what it became in Loom (`refs`: a job, an experiment, a deployment…), and what of it was
    ignored or approximated (`notes`). One per owner, API group, kind and name, as in a
    namespace of a cluster."""

    __tablename__ = "kube_objects"
    __table_args__ = (UniqueConstraint("owner_id", "api_group", "kind", "name"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    api_group: Mapped[str] = mapped_column(String(100))  # "" for Kubernetes' core group
    api_version: Mapped[str] = mapped_column(String(120))
    kind: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
    sealed: Mapped[str | None] = mapped_column(Text)  # a Secret's data, sealed
    refs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    notes: Mapped[list[dict[str, str]]] = mapped_column(JSON, default=list)
    generation: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
