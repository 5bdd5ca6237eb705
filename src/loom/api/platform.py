"""The services one platform process runs, built once from `Settings`."""

from __future__ import annotations

import logging
import socket
import sys
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from loom.api.identity import ServerIdentity
from loom.domain.accounts import admin_token_problem
from loom.domain.environments import Plan
from loom.domain.errors import ConfigError, PlatformError
from loom.domain.resources import parse_memory
from loom.hpo.service import Experiments
from loom.launchers.base import Launcher
from loom.launchers.confinement import SandboxPolicy
from loom.lifecycle.environments import sources_of, spec_section
from loom.lifecycle.isolation import Isolation, decide, sandbox_policy, with_launcher
from loom.lifecycle.leadership import Leadership
from loom.lifecycle.manager import LifecycleManager
from loom.observability import PlatformMetrics
from loom.pipelines.service import Pipelines
from loom.registry.catalog import Catalog
from loom.registry.models import ModelRegistry
from loom.serving.deployments import Deployments
from loom.serving.monitoring import DetectorRuntime
from loom.serving.spec import Tls
from loom.settings import Settings
from loom.storage.artifacts import ArtifactStore
from loom.store import leases, sealed
from loom.store import users as user_rows
from loom.store.db import Database, migrate
from loom.store.private import create_private, tighten, write_private
from loom.store.secret_keys import SecretKeys
from loom.tds.budgets import Allowance, Limits
from loom.tds.logged_models import LoggedModels
from loom.tds.retention import Retention
from loom.tds.run_files import RunFiles
from loom.tds.runs import Runs
from loom.tds.service import TrainingData
from loom.tds.signals import JobSignals

ADMIN = "admin"
WAKE_LIFECYCLE = "*lifecycle"  # not a job id: job ids have no `*`


def live_servers(session: Session, own: str) -> list[str]:
    """Where learners may ship: this server first, then every other one alive."""
    return list(dict.fromkeys([own, *leases.live_servers(session)]))


log = logging.getLogger("loom.api")


@dataclass
class Platform:
    settings: Settings
    db: Database
    artifacts: ArtifactStore
    tds: TrainingData
    registry: ModelRegistry
    lifecycle: LifecycleManager
    deployments: Deployments
    keys: SecretKeys
    isolation: Isolation
    leadership: Leadership
    platform_metrics: PlatformMetrics
    experiments: Experiments
    pipelines: Pipelines
    runs: Runs
    run_files: RunFiles
    logged_models: LoggedModels
    catalog: Catalog
    retention: Retention | None = None
    channel: Any = None  # store.notify.PgChannel on PostgreSQL
    identity: ServerIdentity | None = None  # this install's key pair (`api.identity`)

    @property
    def signals(self) -> JobSignals:
        return self.tds.signals

    def start(self) -> None:
        if self.channel is not None:
            self.channel.start()
        self.leadership.start()
        if self.retention is not None:
            self.retention.start()

    def close(self) -> None:
        """Stop the platform's threads; learners and deployments go on running."""
        if self.retention is not None:
            self.retention.stop()
        self.leadership.stop()
        self.pipelines.driver.stop()
        self.experiments.driver.stop()
        self.lifecycle.stop()
        if self.channel is not None:
            self.channel.close()
        self.db.close()

    def wake_drivers(self, kinds: set[str]) -> None:
        """Jobs made by these kinds of things moved: their drivers look now. A pipeline's step
        may be an experiment, whose trials' outcomes it follows too."""
        if "experiment" in kinds:
            self.experiments.driver.wake()
        if kinds & {"experiment", "pipeline"}:
            self.pipelines.driver.wake()

    def leader_status(self) -> tuple[str, bool]:
        """This server's id, and whether it runs the lifecycle now."""
        return self.leadership.server_id, self.leadership.leading

    # Only the leader launches and watches jobs and supervises deployments' gateways.
    def _lead(self) -> None:
        self.lifecycle.start()
        self.deployments.start()
        self.experiments.driver.start()
        self.pipelines.driver.start()

    def _step_down(self) -> None:
        self.pipelines.driver.stop()
        self.experiments.driver.stop()
        self.deployments.stop()
        self.lifecycle.step_down()

    def _heard(self, payload: str) -> None:
        """A message from a server on the database (this one too): wake whom it concerns."""
        if payload == WAKE_LIFECYCLE:
            if self.leadership.leading:
                self.lifecycle.wake_here()
        else:
            self.signals.wake(payload)


def make_launcher(settings: Settings, sandbox: SandboxPolicy) -> Launcher:
    if settings.launcher == "fake":
        from loom.launchers.fake import FakeLauncher

        return FakeLauncher()
    if settings.launcher == "ray":
        from loom.launchers.ray import RayLauncher

        return RayLauncher(
            settings.ray_address,
            namespace=settings.ray_namespace,
            sandbox=sandbox,
            place_timeout_s=settings.ray_place_timeout_s,
        )
    if settings.launcher == "kubernetes":
        return kubernetes_launcher(settings)
    from loom.launchers.local import LocalLauncher

    return LocalLauncher(
        cpus=settings.cpus,
        memory=settings.memory,
        gpus=settings.gpus,
        sandbox=sandbox,
        scratch=settings.learner_scratch_dir,
    )


def kubernetes_launcher(settings: Settings) -> Launcher:
    from loom.kube.objects import KubeOptions
    from loom.launchers.kubernetes import ClusterApi, KubernetesLauncher

    if not settings.public_url:
        raise ConfigError(
            "LOOM_LAUNCHER=kubernetes needs LOOM_PUBLIC_URL: the platform's address as the "
            "learner pods reach it (e.g. http://loom.loom.svc.cluster.local:8470)"
        )
    options = KubeOptions(
        namespace=settings.kube_namespace,
        image=settings.kube_image,
        gpu_resource=settings.kube_gpu_resource,
        runtimes=dict(settings.kube_runtimes),
        image_pull_secrets=tuple(settings.kube_image_pull_secrets),
        node_selector=dict(settings.kube_node_selector),
        halt_grace_s=settings.halt_grace_s,
        service_account=settings.kube_service_account,
        queue_name=settings.kube_queue_name,
        tmp_bytes=settings.sandbox_tmp_mb * 2**20,
    )
    api = ClusterApi(
        settings.kube_namespace, config_file=settings.kube_config, context=settings.kube_context
    )
    return KubernetesLauncher(
        api,
        options,
        kind=settings.kube_kind,
        cpus=settings.cpus,  # each one the operator gives stands over the nodes' figure
        memory=parse_memory(settings.memory) if settings.memory else None,
        gpus=settings.gpus,
        pull_timeout_s=settings.kube_pull_timeout_s,
    )


def serving_gpus(settings: Settings) -> list[int]:
    """The GPUs deployments' replicas may be pinned to: LOOM_SERVING_GPUS, else every GPU of
    this machine (as many as LOOM_GPUS says, else as many as `nvidia-smi` lists)."""
    if settings.serving_gpus is not None:
        return list(settings.serving_gpus)
    if settings.launcher == "kubernetes":
        return []
    from loom.launchers.local import detect_gpus

    return list(range(settings.gpus if settings.gpus is not None else detect_gpus()))


def budget_limits(settings: Settings) -> Limits:
    """What a job may store and a user may send a second (`tds.budgets`), from the settings."""

    def mib(value: float | None) -> int | None:
        return None if value is None else int(value * 2**20)

    return Limits(
        lines=Allowance(settings.max_log_lines, mib(settings.max_log_mb)),
        points=Allowance(settings.max_metric_points, mib(settings.max_metric_mb)),
        run_info=Allowance(settings.max_run_info, mib(settings.max_run_info_mb)),
        ingest_bytes_per_s=mib(settings.ingest_mb_per_s),
        ingest_burst_bytes=settings.ingest_burst_mb * 2**20,
    )


def build_platform(settings: Settings, launcher: Launcher | None = None) -> Platform:
    check_admin_token(settings)
    home = settings.home_dir
    tighten(home)  # what an older version or a looser umask left readable to others
    if settings.database_url is None:
        create_private(home / "loom.db")  # SQLite gives its WAL and SHM files the same mode
    db = Database(settings.db_url)
    migrate(db.engine)
    keys = sealed.open_keys(db, settings.secret_keys, settings.secret_key_file)
    bootstrap_admin(db, settings)
    isolation = decide(settings)
    policy = sandbox_policy(settings, isolation)
    artifacts = ArtifactStore(
        settings.artifacts_dir, url=settings.artifact_url, options=settings.artifact_options
    )
    observed = PlatformMetrics()
    tds = TrainingData(db, JobSignals(), platform_metrics=observed, limits=budget_limits(settings))
    registry = ModelRegistry(db, artifacts)
    launcher = launcher or make_launcher(settings, policy)
    isolation = with_launcher(isolation, settings, launcher)
    if isolation.single_user:
        with db.session() as session:
            if len(user_rows.list_users(session)) > 1:
                raise PlatformError(
                    f"this database has several users, but {isolation.description}: set "
                    "LOOM_ISOLATION=off to serve them anyway, or run where jobs can be sandboxed"
                )
    lifecycle = LifecycleManager(settings, db, launcher, artifacts, tds, keys, registry, observed)
    tls = Tls(*(str(path) for path in settings.tls)) if settings.tls else None
    ray = (settings.ray_address, settings.ray_namespace) if settings.launcher == "ray" else None
    deployments = Deployments(
        db,
        registry,
        home,
        settings.serving_host,
        tls,
        policy,
        ray,
        unconfined=isolation.replicas_unconfined,
        gpus=serving_gpus(settings),
        detector=detector_environment(settings),
        sources=sources_of(settings),
        proxy=settings.serving_proxy,
        proxy_cpus=settings.serving_proxy_cpus,
    )
    server_id = settings.server_id or f"{socket.gethostname()}:{settings.port}"
    leadership = Leadership(
        db, server_id, settings.api_url, settings.leader_ttl_s, lambda: None, lambda: None
    )
    experiments = Experiments(settings, db, keys, artifacts, lifecycle, tds, registry)
    platform = Platform(
        settings,
        db,
        artifacts,
        tds,
        registry,
        lifecycle,
        deployments,
        keys,
        isolation,
        leadership,
        observed,
        experiments,
        Pipelines(
            settings, db, keys, artifacts, lifecycle, tds, registry, deployments, experiments
        ),
        Runs(db, tds),
        RunFiles(db, artifacts),
        LoggedModels(db),
        Catalog(db),
    )
    platform.identity = ServerIdentity.load(home)
    platform.experiments.driver.fence = leadership.fence
    platform.pipelines.driver.fence = leadership.fence
    lifecycle.on_change = platform.wake_drivers  # a trial's or a step's job moved: look now
    leadership.on_gain, leadership.on_loss = platform._lead, platform._step_down
    lifecycle.fence = leadership.fence
    lifecycle.api_urls = lambda session: live_servers(session, settings.api_url)
    if db.dialect == "postgresql":
        from loom.store.notify import PgChannel

        platform.channel = PgChannel(settings.db_url, platform._heard)
        tds.signals.broadcast = platform.channel.send
        lifecycle.on_wake = lambda: platform.channel.send(WAKE_LIFECYCLE)
    if settings.log_retention_days is not None:
        platform.retention = Retention(
            tds, settings.log_retention_days, settings.retention_interval_s
        )
    return platform


def detector_environment(settings: Settings) -> DetectorRuntime:
    """How gateways run drift detectors: in an environment of the monitoring packages over
    the platform's own, built by the platform's environment builder (its indexes and index
    strategy), or in the interpreter LOOM_MONITORING_PYTHON names (an admin's override)."""
    timeout, budget = settings.monitoring_start_timeout_s, settings.monitoring_cpu_budget
    if settings.monitoring_python:
        return DetectorRuntime(
            python=settings.monitoring_python, start_timeout_s=timeout, cpu_budget=budget
        )
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    plan = Plan("monitoring", python, tuple(sorted(settings.monitoring_packages)))
    section = spec_section(plan, settings)
    return DetectorRuntime(environment=section, start_timeout_s=timeout, cpu_budget=budget)


def check_admin_token(settings: Settings) -> None:
    """A guessable `LOOM_ADMIN_TOKEN` would open the whole platform: refuse to start."""
    if settings.admin_token is not None:
        problem = admin_token_problem(settings.admin_token.get_secret_value())
        if problem is not None:
            raise ConfigError(problem)


def bootstrap_admin(db: Database, settings: Settings) -> None:
    """The first start creates the admin and its token; `LOOM_ADMIN_TOKEN` is honoured if set.
    Neither expires: they are how an operator gets in at all."""
    wanted = settings.admin_token.get_secret_value() if settings.admin_token else None
    with db.session() as session:
        admin = user_rows.user_by_name(session, ADMIN)
        created = admin is None
        if admin is None:
            admin = user_rows.add_user(session, ADMIN, is_admin=True)
        token = wanted or (user_rows.new_token() if created else None)
        if token is not None:
            name = "LOOM_ADMIN_TOKEN" if wanted else "bootstrap"
            row = user_rows.add_token(session, admin, token, name=name)
            if row.revoked_at is not None:
                log.warning("LOOM_ADMIN_TOKEN was revoked (token %s); set a new one", row.id)
    if token is not None:
        write_private(settings.home_dir / "token", (token + "\n").encode())
