"""Whether this platform confines its jobs, decided once at start from `LOOM_ISOLATION` and
what the machine can do.

- `sandbox`: every learner is confined; a machine that cannot do it refuses to start.
- `auto` (the default): confined when the machine can; otherwise the platform serves one user
  only, since a job would run with the platform's rights and could act as anyone.
- `off`: jobs run with the platform's rights, said at start and in `loom capacity`.
"""

from __future__ import annotations

from dataclasses import dataclass

from loom.domain.errors import Conflict, PlatformError
from loom.domain.resources import parse_memory
from loom.launchers.confinement import SandboxPolicy
from loom.sandbox import bwrap
from loom.sandbox.probe import Support, probe
from loom.settings import Settings


@dataclass(frozen=True)
class Isolation:
    confined: bool
    description: str
    single_user: bool = False
    cgroups: bool = False
    bwrap: str | None = None
    # Why serving replicas cannot be confined where learners are (on Kubernetes: the platform's
    # pod cannot sandbox them); deployments are then refused rather than run unconfined.
    replicas_unconfined: str | None = None
    # Each job (and each replica) on a network of its own; else `network_why` says why not.
    network: bool = False
    network_why: str | None = None

    def as_json(self) -> dict[str, object]:
        shown: dict[str, object] = {
            "confined": self.confined,
            "description": self.description,
            "single_user": self.single_user,
            "network": self.network,
        }
        if self.network_why:
            shown["network_why"] = self.network_why
        return shown

    def check_new_user(self) -> None:
        if self.single_user:
            raise Conflict(
                f"this platform serves one user only: {self.description}. Make it able to "
                "sandbox jobs (run as root with bubblewrap installed), or set LOOM_ISOLATION=off "
                "to accept that every user's jobs run with the platform's rights"
            )


def decide(settings: Settings, support: Support | None = None) -> Isolation:
    if settings.isolation == "off":
        return Isolation(
            False, "off (LOOM_ISOLATION=off): jobs run with the platform's rights, unconfined"
        )
    found = support or probe(settings.sandbox_uid_base)
    if settings.launcher == "kubernetes":
        return _pods(found)
    if found.sandbox:
        cgroups = found.cgroups.startswith("cgroup v")
        network, why = _network(settings, found)
        return Isolation(
            True,
            found.reason,
            cgroups=cgroups,
            bwrap=found.bwrap,
            network=network,
            network_why=why,
        )
    if settings.isolation == "sandbox":
        raise PlatformError(
            f"LOOM_ISOLATION=sandbox, but jobs cannot be sandboxed here: {found.reason}"
        )
    return Isolation(
        False,
        f"jobs are not sandboxed ({found.reason}); they run with the platform's rights",
        single_user=True,
    )


def _network(settings: Settings, found: Support) -> tuple[bool, str | None]:
    """Whether jobs get networks of their own, and if not, the sentence that says why."""
    if settings.job_network == "host":
        return False, (
            "jobs share the host's network (LOOM_JOB_NETWORK=host): a job can reach every port "
            "on this machine and other jobs' ports"
        )
    if found.network:
        if settings.job_network == "isolated":
            raise PlatformError(
                "LOOM_JOB_NETWORK=isolated, but jobs cannot have networks of their own here: "
                f"{found.network} (LOOM_JOB_NETWORK=host accepts the host's network)"
            )
        return False, (
            f"no network namespaces ({found.network}): jobs share the host's network and can "
            "reach other jobs' ports"
        )
    return True, None


def _pods(found: Support) -> Isolation:
    """On Kubernetes every learner is its own pod (non-root, all capabilities dropped, no
    service-account token, only its own job's Secret); this machine's sandbox, where it has
    one, still confines the deployments' replicas that run beside the platform."""
    replicas = (
        "replicas sandboxed here" if found.sandbox else f"replicas not sandboxed ({found.reason})"
    )
    return Isolation(
        True,
        f"learners are Kubernetes pods, each confined to its own job; {replicas}",
        cgroups=found.sandbox and found.cgroups.startswith("cgroup v"),
        bwrap=found.bwrap if found.sandbox else None,
        replicas_unconfined=None if found.sandbox else found.reason,
    )


def with_launcher(isolation: Isolation, settings: Settings, launcher: object) -> Isolation:
    """A sandbox holds only where nothing outside it takes a job's orders: a cluster engine
    that runs anyone's tasks (Ray without token authentication) would run a learner's code
    with the engine's rights. Such a platform serves one user only, as one that cannot
    sandbox; with LOOM_ISOLATION=sandbox it refuses to start."""
    why = getattr(launcher, "open_to_jobs", None)
    if not isolation.confined or not why:
        return isolation
    if settings.isolation == "sandbox":
        raise PlatformError(f"LOOM_ISOLATION=sandbox, but {why}")
    return Isolation(
        False,
        f"{why}; a job could run code there outside its sandbox",
        single_user=True,
        cgroups=isolation.cgroups,
        bwrap=isolation.bwrap,
    )


def sandbox_policy(settings: Settings, isolation: Isolation) -> SandboxPolicy:
    return SandboxPolicy(
        bwrap=isolation.bwrap if isolation.confined else None,
        cgroups=isolation.cgroups,
        uid_base=settings.sandbox_uid_base,
        pids=settings.sandbox_pids,
        tmp_bytes=settings.sandbox_tmp_mb * 2**20,
        read_only=tuple(settings.sandbox_read_only),
        python=tuple(bwrap.python_paths()) if isolation.confined else (),
        replica_cpus=settings.replica_cpus,
        replica_memory=parse_memory(settings.replica_memory),
        pass_env=tuple(settings.learner_env),
        network=isolation.network,
    )
