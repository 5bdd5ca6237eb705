"""The one `Settings` object: read from `LOOM_*` variables in the entry point and passed down."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from loom.sandbox.environment import check_passed_names


def _names(value: Any) -> Any:
    """A list from the environment: JSON, or plain comma-separated words."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


Names = Annotated[list[str], NoDecode, BeforeValidator(_names)]
Numbers = Annotated[list[Annotated[int, Field(ge=0, le=255)]], NoDecode, BeforeValidator(_names)]


class Settings(BaseSettings):
    """Everything configurable about a Loom platform process."""

    model_config = SettingsConfigDict(env_prefix="LOOM_", extra="ignore")

    home: Path = Field(default=Path("~/.loom"), description="state: database, jobs, artifacts")
    host: str = "127.0.0.1"
    port: int = Field(default=8470, ge=0, le=65535)
    public_url: str | None = Field(
        default=None, description="URL learners use to reach the API; default http://host:port"
    )
    database_url: str | None = Field(default=None, description="default: SQLite under home")
    admin_token: SecretStr | None = None
    docs_public: bool = Field(
        default=False,
        description="serve /docs, /redoc and /openapi.json to anyone; default: signed-in users",
    )
    metrics_public: bool = Field(
        default=False,
        description="serve /metrics to anyone (a scraper on a trusted network); default: admins",
    )
    launcher: Literal["local", "ray", "kubernetes", "fake"] = "local"
    ray_address: str = Field(
        default="auto", description="the Ray cluster for LOOM_LAUNCHER=ray: auto or HOST:PORT"
    )
    ray_namespace: str = Field(default="loom", description="Ray namespace of Loom's actors")
    ray_place_timeout_s: float = Field(
        default=30.0, gt=0, description="how long a gang may wait for Ray to place it"
    )
    kube_namespace: str = Field(
        default="loom-jobs", description="LOOM_LAUNCHER=kubernetes: the namespace of the jobs"
    )
    kube_image: str = Field(
        default="ghcr.io/loom-ml/loom-learner:latest",
        description="the learner image: Loom installed, its entry `python -m loom.learner.pod`",
    )
    kube_kind: Literal["auto", "job", "trainjob"] = Field(
        default="auto",
        description="what a job becomes: a Kubeflow TrainJob where the cluster has the CRD "
        "(auto), always (trainjob), or an indexed batch Job (job)",
    )
    kube_config: Path | None = Field(
        default=None, description="kubeconfig file; default: in-cluster, else ~/.kube/config"
    )
    kube_context: str | None = Field(default=None, description="the kubeconfig's context")
    kube_runtimes: dict[str, str] = Field(
        default_factory=dict,
        description="framework → ClusterTrainingRuntime (JSON), over the defaults "
        "(pytorch: torch-distributed, …)",
    )
    kube_gpu_resource: str = Field(default="nvidia.com/gpu", description="a GPU's resource name")
    kube_image_pull_secrets: Names = Field(
        default_factory=list, description="Secrets the learner pods pull their image with"
    )
    kube_node_selector: dict[str, str] = Field(
        default_factory=dict, description="node labels learner pods must match (JSON)"
    )
    kube_service_account: str = Field(
        default="loom-learner",
        description="learner pods' service account: no rights, no mounted token",
    )
    kube_queue_name: str | None = Field(
        default=None,
        description="a Kueue LocalQueue for the jobs: Kueue then admits each gang whole",
    )
    kube_pull_timeout_s: float = Field(
        default=300.0, gt=0, description="how long a learner's image may fail to pull"
    )
    artifact_url: str | None = Field(
        default=None, description="fsspec URL of the artifact store, e.g. s3://bucket/loom"
    )
    artifact_options: dict[str, Any] = Field(
        default_factory=dict, description="fsspec options (JSON), e.g. endpoint_url, key, secret"
    )

    cpus: float | None = Field(default=None, description="capacity override; default: all cores")
    memory: str | None = Field(default=None, description="capacity override, e.g. 16GiB")
    gpus: int | None = Field(default=None, description="capacity override; default: detected")

    quota_cpus: float | None = Field(default=None, description="per user, running jobs; unlimited")
    quota_gpus: int | None = Field(default=None, description="per user, running jobs; unlimited")
    quota_jobs: int | None = Field(default=None, description="running jobs per user; unlimited")

    max_upload_mb: int = Field(default=200, ge=1)
    max_unpacked_mb: int = Field(default=2000, ge=1)
    halt_grace_s: float = Field(default=10.0, ge=0)
    gang_stop_grace_s: float = Field(
        default=3.0, ge=0, description="when one learner fails, how long the others get"
    )
    serving_host: str = Field(
        default="127.0.0.1", description="where deployments listen (0.0.0.0: every address)"
    )
    serving_proxy: Literal["haproxy", "off"] = Field(
        default="haproxy",
        description="the deployments' data path: haproxy (a compiled proxy in front of the "
        "replicas, steered by each deployment's gateway; used where it is installed) or off "
        "(the gateway answers every request itself)",
    )
    serving_proxy_cpus: Numbers | None = Field(
        default=None,
        description="the CPUs (numbers, e.g. 1 or 2,3) the deployments' HAProxy runs on, away "
        "from the replicas' (on a core of its own, a deployment answers as fast as its replica; "
        "sharing one with it, the proxy's work per request slows both); default: any CPU",
    )
    serving_gpus: Numbers | None = Field(
        default=None,
        description="the GPUs (numbers, e.g. 0,1) deployments' replicas may be pinned to; "
        "default: every GPU of the machine (LOOM_GPUS counts them when set)",
    )
    watchdog_interval_s: float = Field(default=2.0, gt=0)
    # How often experiments are moved on (trials followed, stopped early, proposed) at most.
    experiment_interval_s: float = Field(default=2.0, gt=0)
    # How often pipeline runs are moved on at most (they also move when one of their jobs does).
    pipeline_interval_s: float = Field(default=2.0, gt=0)
    server_id: str | None = Field(
        default=None,
        max_length=200,
        description="this API server among several on one database; default: host:port",
    )
    leader_ttl_s: float = Field(
        default=10.0,
        ge=1.0,
        description="the lifecycle lease: another server takes over this long after a crash",
    )
    learner_retry_s: float = Field(
        default=600.0, description="how long a learner keeps resending to an unreachable API"
    )
    learner_upload_max_mb: int = Field(
        default=10240,
        ge=1,
        description="what one upload of a learner's checkpoints or results may unpack to, and "
        "what a job's checkpoints (or its results) may take on the platform",
    )
    learner_checkpoint_sync_s: float = Field(
        default=5.0, gt=0, description="how often a learner elsewhere sends its new checkpoints"
    )
    learner_scratch_dir: Path | None = Field(
        default=None,
        description="learners on this machine keep nothing in the platform's folders; code, "
        "checkpoints and results move through the API as on a cluster",
    )

    # job environments
    environments_dir: Path | None = Field(
        default=None,
        description="where job environments are built and cached, on each machine that runs "
        "learners; default: LOOM_HOME/environments",
    )
    environments_index_url: str | None = Field(
        default=None, description="the package index environments install from; default: PyPI"
    )
    environments_extra_index_urls: Names = Field(
        default_factory=list, description="more indexes, searched before the main one"
    )
    environments_find_links: Names = Field(
        default_factory=list, description="folders or pages of wheels, searched too"
    )
    environments_index_strategy: Literal["first-index", "unsafe-best-match"] = Field(
        default="first-index",
        description="first-index: a package comes from the first index that has it (a "
        "squatter on a later index cannot shadow it); unsafe-best-match: the best version "
        "from any index, as pip does, for indexes the admin trusts alike (e.g. local mirrors)",
    )
    environments_source_builds: bool = Field(
        default=False,
        description="let environments build packages from source (that runs the package's "
        "build code on the platform's machine); default: wheels only",
    )
    environments_max_gb: float = Field(
        default=20.0, gt=0, description="environments kept per machine, least recently used go"
    )
    environments_max_age_days: float = Field(
        default=30.0, gt=0, description="an environment no job used for this long is removed"
    )
    environments_build_timeout_s: float = Field(default=1800.0, gt=0)

    # monitoring: the drift and outlier detectors of deployments
    monitoring_packages: Names = Field(
        default_factory=lambda: ["alibi-detect==0.13.0"],
        description="what the detectors' environment installs beside the platform's packages; "
        "built once per machine by the environment builder (LOOM_ENVIRONMENTS_* settings)",
    )
    monitoring_python: str = Field(
        default="",
        description="an admin's override: an interpreter that already has the detector's "
        "packages (Alibi Detect), used instead of the built environment",
    )
    monitoring_start_timeout_s: float = Field(
        default=900.0,
        gt=0,
        description="a detector not ready this long after it started (importing Alibi Detect "
        "and fitting on the reference) is reported failing and started again",
    )
    monitoring_cpu_budget: float = Field(
        default=0.02,
        ge=0,
        le=1,
        description="on busy cores (under 5% idle), a detector's CPU at most this share of what "
        "the rest uses there, by sending it a random share of the requests; 0: every request "
        "is sent, busy or not",
    )

    # isolation
    isolation: Literal["auto", "sandbox", "off"] = Field(
        default="auto",
        description="sandbox: confine every learner (refuse to start if this machine cannot); "
        "auto: confine when possible, else serve one user only; off: jobs run with the "
        "platform's rights",
    )
    job_network: Literal["auto", "isolated", "host"] = Field(
        default="auto",
        description="isolated: each sandboxed job and replica on a network of its own (refuse to "
        "start if this machine cannot); auto: so where possible, else the host's network, said "
        "at start; host: jobs share the host's network (they can reach its ports and each other)",
    )
    sandbox_uid_base: int = Field(default=1_500_000_000, ge=1000, le=2**31 - 2**24 - 1)
    sandbox_pids: int = Field(default=4096, ge=16, description="processes/threads per learner")
    sandbox_tmp_mb: int = Field(default=1024, ge=1, description="a learner's private /tmp")
    sandbox_read_only: Names = Field(
        default_factory=list, description="more host folders shown read-only to learners"
    )
    learner_env: Names = Field(
        default_factory=list, description="server variables passed on to learners by name"
    )
    replica_cpus: float = Field(default=1.0, gt=0, description="CPUs of each serving replica")
    replica_memory: str = Field(default="2GiB", description="memory of each serving replica")
    host_mount_roots: Names = Field(
        default_factory=list,
        description="host folders under which host_mount/mount_volume data stores may be",
    )
    # secrets at rest
    secret_keys: SecretStr | None = Field(
        default=None,
        description="Fernet keys sealing stored credentials, comma-separated, the current one "
        "first; default: the key file LOOM_HOME/secret.key, created at first start",
    )

    # accounts
    token_ttl_days: float | None = Field(
        default=90.0, gt=0, description="lifetime of new user tokens; `never`: no expiry"
    )
    max_priority: int = Field(
        default=10, description="highest job priority a user may ask for, unless set per user"
    )

    @field_validator("token_ttl_days", mode="before")
    @classmethod
    def _never(cls, value: Any) -> Any:
        return None if str(value).strip().lower() in ("", "never", "none") else value

    # limits: what one user (or one address, or one job's learners) may cost the platform
    max_manifest_bytes: int = Field(default=2**20, ge=1024, description="a manifest's size")
    max_json_mb: int = Field(
        default=16, ge=1, description="request bodies other than uploads (learners' batches too)"
    )
    rate_per_s: float = Field(default=20.0, gt=0, description="requests a second, per user")
    rate_burst: int = Field(default=200, ge=1, description="requests at once, per user")
    learner_rate_per_s: float = Field(default=500.0, gt=0, description="per job's learners")
    learner_rate_burst: int = Field(default=5000, ge=1, description="per job's learners")
    auth_failures_per_min: float = Field(
        default=30.0, gt=0, description="failed authentications a minute, per client address"
    )
    auth_failures_burst: int = Field(default=30, ge=1, description="per client address")
    max_queued_jobs: int | None = Field(
        default=100, ge=0, description="queued (not yet running) jobs per user; None: unlimited"
    )
    scheduler_horizon: int = Field(
        default=1000,
        ge=1,
        description="queued jobs waiting for resources that a pass gives an exact reason; those "
        "behind are told there are more ahead, and are not read",
    )
    max_model_mb: float | None = Field(
        default=4096, ge=0, description="a registered model's files (apparent size), per job"
    )
    max_log_lines: int | None = Field(default=1_000_000, ge=0, description="per job")
    max_log_mb: float | None = Field(default=1024, ge=0, description="of log text per job")
    max_metric_points: int | None = Field(default=1_000_000, ge=0, description="per job")
    max_metric_mb: float | None = Field(default=512, ge=0, description="of metric values per job")
    max_run_info: int | None = Field(
        default=10_000, ge=0, description="parameters and tags per job (all its runs)"
    )
    max_run_info_mb: float | None = Field(
        default=16, ge=0, description="of parameter and tag keys and values per job"
    )
    ingest_mb_per_s: float | None = Field(
        default=8.0,
        gt=0,
        description="logs, metrics and run info a user's jobs and clients may send, per second "
        "over all of them (429 past it; learners resend)",
    )
    ingest_burst_mb: float = Field(default=64.0, gt=0, description="of ingest at once, per user")
    log_retention_days: float | None = Field(
        default=None, gt=0, description="delete logs and metrics of jobs ended this long ago"
    )
    retention_interval_s: float = Field(default=3600.0, gt=0)

    # serving security
    tls_certfile: Path | None = Field(
        default=None, description="PEM certificate (chain): the API and deployments serve HTTPS"
    )
    tls_keyfile: Path | None = Field(
        default=None, description="PEM private key of tls_certfile (default: in that file)"
    )

    @model_validator(mode="after")
    def _tls_pair(self) -> Settings:
        if self.tls_keyfile is not None and self.tls_certfile is None:
            raise ValueError(
                f"tls_keyfile is set ({self.tls_keyfile}) but tls_certfile is not: set both "
                "(LOOM_TLS_CERTFILE, LOOM_TLS_KEYFILE) to serve HTTPS"
            )
        return self

    @property
    def tls(self) -> tuple[Path, Path] | None:
        """(certificate, key), absolute, when the platform serves HTTPS."""
        if self.tls_certfile is None:
            return None
        cert = self.tls_certfile.expanduser().resolve()
        key = self.tls_keyfile.expanduser().resolve() if self.tls_keyfile else cert
        return cert, key

    @field_validator("learner_env")
    @classmethod
    def _no_platform_settings(cls, value: list[str]) -> list[str]:
        check_passed_names(value)
        return value

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def api_url(self) -> str:
        """Where learners and the CLI reach the API: `public_url`, else this host and port
        (loopback when the server listens on every address)."""
        if self.public_url:
            return self.public_url
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        return f"{'https' if self.tls_certfile else 'http'}://{host}:{self.port}"

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home_dir / 'loom.db'}"

    @property
    def jobs_dir(self) -> Path:
        return self.home_dir / "jobs"

    @property
    def envs_dir(self) -> Path:
        return (self.environments_dir or self.home_dir / "environments").expanduser()

    @property
    def artifacts_dir(self) -> Path:
        return self.home_dir / "artifacts"

    @property
    def secret_key_file(self) -> Path:  # secrets at rest
        return self.home_dir / "secret.key"
