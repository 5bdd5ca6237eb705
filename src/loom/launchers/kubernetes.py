"""The Kubernetes launcher: each attempt of a job becomes a Kubeflow Trainer v2 TrainJob (where the
cluster has its CRD) or an indexed batch Job, with its Secret, headless Service and NetworkPolicy
(`loom.kube.objects`), all owned by the workload so that one delete removes them.

Loom stays the one queue: it admits a gang, and Kubernetes places it; a gang Kubernetes cannot
place yet stays PENDING with the scheduler's reason. Learners are followed by their pods
(`kube_states`), halted by suspending the workload and deleting their pods with the grace asked,
and released by deleting the workload. Nothing moves through a shared folder: the pod's wrapper
moves code, checkpoints and results through the platform's API. The `kubernetes` client is
imported here only, and its errors are translated at `ClusterApi`'s boundary.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from loom.domain.errors import LaunchError
from loom.domain.resources import Resources, parse_memory
from loom.kube import objects
from loom.kube.objects import JobShape, KubeOptions
from loom.launchers.base import LearnerLaunch, LearnerStatus, Liveness, handle_parts, translated
from loom.launchers.kube_states import learner_status

log = logging.getLogger("loom.launchers.kubernetes")

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
VIEW_TTL_S = 1.0
JOB = ("batch/v1", "Job")
TRAINJOB = (objects.TRAINJOB_API, "TrainJob")
POD = ("v1", "Pod")
PARTS = [("v1", "Secret"), ("v1", "Service"), ("networking.k8s.io/v1", "NetworkPolicy")]
UNKNOWN_CAPACITY = Resources(cpus=4096.0, memory=2**44, gpus=512)


class KubeApi(Protocol):
    """The few calls the launcher makes, in one namespace; objects as JSON dicts."""

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None: ...

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> None: ...

    def delete(
        self, api_version: str, kind: str, name: str, grace_s: float | None = None
    ) -> None: ...

    def listing(self, api_version: str, kind: str, selector: str) -> list[dict[str, Any]]: ...

    def served(self, api_version: str, kind: str) -> bool: ...

    def nodes(self) -> list[dict[str, Any]] | None: ...

    def events(self, name: str) -> list[dict[str, Any]]:
        """The events about the object of that name (why a Job made no pod, say)."""
        ...


class ClusterApi:
    """`KubeApi` over the `kubernetes` client's dynamic client."""

    def __init__(
        self, namespace: str, *, config_file: Path | None = None, context: str | None = None
    ) -> None:
        from kubernetes import config as kube_config  # type: ignore[attr-defined]
        from kubernetes.client import ApiClient
        from kubernetes.dynamic import DynamicClient

        with translated("Kubernetes", "load its configuration"):
            if config_file is None and _in_cluster():
                kube_config.load_incluster_config()
            else:
                path = str(config_file.expanduser()) if config_file else None
                kube_config.load_kube_config(config_file=path, context=context)
            self._client = DynamicClient(ApiClient())
        self.namespace = namespace

    def _kind(self, api_version: str, kind: str) -> Any:
        return self._client.resources.get(api_version=api_version, kind=kind)

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        with translated("Kubernetes", f"create {obj['kind']} {obj['metadata']['name']}"):
            made = self._client.create(
                self._kind(obj["apiVersion"], obj["kind"]), body=obj, namespace=self.namespace
            )
        return dict(made.to_dict())

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        from kubernetes.dynamic.exceptions import NotFoundError

        try:
            with translated("Kubernetes", f"read {kind} {name}"):
                found = self._client.get(self._kind(api_version, kind), name, self.namespace)
        except LaunchError as exc:
            if isinstance(exc.__cause__, NotFoundError):
                return None
            raise
        return dict(found.to_dict())

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> None:
        with translated("Kubernetes", f"change {kind} {name}"):
            self._client.patch(
                self._kind(api_version, kind),
                body=body,
                name=name,
                namespace=self.namespace,
                content_type="application/merge-patch+json",
            )

    def delete(self, api_version: str, kind: str, name: str, grace_s: float | None = None) -> None:
        from kubernetes.dynamic.exceptions import NotFoundError

        options: dict[str, Any] = {"propagationPolicy": "Background"}
        if grace_s is not None:  # 0 would force the deletion: the object goes, not the process
            options["gracePeriodSeconds"] = max(math.ceil(grace_s), 1)
        try:
            with translated("Kubernetes", f"delete {kind} {name}"):
                self._client.delete(
                    self._kind(api_version, kind), name, self.namespace, body=options
                )
        except LaunchError as exc:
            if not isinstance(exc.__cause__, NotFoundError):
                raise

    def listing(self, api_version: str, kind: str, selector: str) -> list[dict[str, Any]]:
        with translated("Kubernetes", f"list {kind}s"):
            found = self._client.get(
                self._kind(api_version, kind), namespace=self.namespace, label_selector=selector
            )
        return [dict(item) for item in found.to_dict().get("items", [])]

    def served(self, api_version: str, kind: str) -> bool:
        from kubernetes.dynamic.exceptions import ResourceNotFoundError

        try:
            self._kind(api_version, kind)
        except ResourceNotFoundError:
            return False
        return True

    def events(self, name: str) -> list[dict[str, Any]]:
        with translated("Kubernetes", f"list the events of {name}"):
            found = self._client.get(
                self._kind("v1", "Event"),
                namespace=self.namespace,
                field_selector=f"involvedObject.name={name}",
            )
        return [dict(item) for item in found.to_dict().get("items", [])]

    def nodes(self) -> list[dict[str, Any]] | None:
        """The cluster's nodes, where the platform may read them (an optional ClusterRole)."""
        try:
            found = self._client.get(self._kind("v1", "Node"))
        except Exception as exc:
            log.info("the cluster's nodes cannot be read (%s): capacity is not known", exc)
            return None
        return [dict(item) for item in found.to_dict().get("items", [])]


def _in_cluster() -> bool:
    return Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists()


@dataclass(frozen=True)
class _View:
    at: float
    workload: dict[str, Any] | None
    pods: dict[int, dict[str, Any]]
    events: tuple[dict[str, Any], ...] = ()  # about the workload, while it has no pod


def _names(handle: str) -> tuple[str, int, int]:
    job, learner, attempt = handle_parts(handle)
    return job, attempt, learner


def shape_of(learners: list[LearnerLaunch]) -> JobShape:
    """The attempt's shape, from its first learner's spec (the gang's are alike)."""
    spec = learners[0].spec
    restart = spec.get("restart") or {}
    return JobShape(
        job_id=str(spec["job_id"]),
        attempt=int(spec["attempt"]),
        owner=str(spec.get("owner") or ""),
        framework=str((spec.get("gang") or {}).get("framework", "custom")),
        learners=len(learners),
        per_learner=Resources(
            cpus=float(spec.get("cpus") or 1),
            memory=int(spec.get("memory_limit") or parse_memory("1GiB")),
            gpus=int((spec.get("env") or {}).get("GPU_COUNT") or 0),
        ),
        restart_policy=str(restart.get("policy", "Never")),
        max_restarts=int(restart.get("max_restarts", 0)),
        storage=int(spec.get("storage_limit") or 0) or None,
        image=(spec.get("gang") or {}).get("image"),
    )


class KubernetesLauncher:
    name = "kubernetes"
    elastic = True  # nodes come and go (autoscalers): Kubernetes queues what does not fit now
    open_to_jobs = None  # learners are pods: nothing else on the cluster takes their orders

    def __init__(
        self,
        api: KubeApi,
        options: KubeOptions,
        *,
        kind: str = "auto",
        cpus: float | None = None,
        memory: int | None = None,
        gpus: int | None = None,
        pull_timeout_s: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.options = options
        self._kind_setting = kind
        self._kind: objects.Kind | None = None
        self._given = (cpus, memory, gpus)  # the operator's figures, each over the nodes'
        self.pull_timeout_s = pull_timeout_s
        self._clock = clock
        self._views: dict[tuple[str, int], _View] = {}
        self._lock = threading.Lock()

    # -- what runs where -------------------------------------------------------------------
    def kind(self) -> objects.Kind:
        """TrainJob where the cluster serves it (asked once), else an indexed Job."""
        if self._kind is None:
            if self._kind_setting == "job":
                self._kind = "job"
            elif self._kind_setting == "trainjob" or self.api.served(*TRAINJOB):
                self._kind = "trainjob"
            else:
                self._kind = "job"
        return self._kind

    def _workload(self) -> tuple[str, str]:
        return TRAINJOB if self.kind() == "trainjob" else JOB

    def _kinds(self) -> list[tuple[str, str]]:
        """Where an attempt's workload may be: this launcher's kind first, then the other (an
        attempt launched before Trainer was installed, or removed)."""
        first = self._workload()
        return [first, JOB if first == TRAINJOB else TRAINJOB]

    def _find(self, name: str) -> tuple[tuple[str, str], dict[str, Any]] | None:
        for kind in self._kinds():
            try:
                found = self.api.get(*kind, name)
            except LaunchError:
                if kind == TRAINJOB and kind != self._workload():
                    continue  # no TrainJobs served: none to find
                raise
            if found is not None:
                return kind, found
        return None

    def capacity(self) -> Resources:
        """Each of the settings' figures where given, else the allocatable of the cluster's
        ready, schedulable nodes, else (nodes not readable) a bound so large that Kubernetes
        does the queueing."""
        cpus, memory, gpus = self._given
        if cpus is not None and memory is not None and gpus is not None:
            return Resources(cpus, memory, gpus)
        totals = [total for node, total in self._node_totals() if _usable(node)]
        found = sum(totals, Resources()) if totals else UNKNOWN_CAPACITY
        return Resources(
            cpus=found.cpus if cpus is None else cpus,
            memory=found.memory if memory is None else memory,
            gpus=found.gpus if gpus is None else gpus,
        )

    def nodes(self) -> list[dict[str, Any]]:
        """Each node, what it has for pods, and whether learners can go there."""
        return [
            {
                "node": node["metadata"]["name"],
                "id": str(node["metadata"].get("uid", ""))[:12],
                "alive": _usable(node),
                "cpus": total.cpus,
                "gpus": total.gpus,
                "memory": total.memory,
            }
            for node, total in self._node_totals()
        ]

    def _node_totals(self) -> list[tuple[dict[str, Any], Resources]]:
        found = self.api.nodes() or []
        return [(node, _allocatable(node, self.options.gpu_resource)) for node in found]

    # -- launching ---------------------------------------------------------------------------
    def launch(self, learners: list[LearnerLaunch]) -> None:
        """The Secret, Service and NetworkPolicy, then the workload, which then owns them."""
        if not learners:
            return
        shape = shape_of(learners)
        credentials = {"token": learners[0].token, "secrets": learners[0].secrets}
        made = objects.render(
            shape,
            self.options,
            self.kind(),
            specs=[learner.spec for learner in learners],
            credentials=credentials,
        )
        parts, workload = made[:-1], made[-1]
        for part in parts:
            self._create(part)
        owner = self._create(workload)
        reference = {"metadata": {"ownerReferences": [objects.owner_reference(owner)]}}
        for part in parts:
            self.api.patch(part["apiVersion"], part["kind"], part["metadata"]["name"], reference)
        self._forget(shape.job_id, shape.attempt)

    def _create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create it; one left by a launch the platform did not finish is replaced."""
        try:
            return self.api.create(obj)
        except LaunchError as exc:
            if "(409)" not in exc.message:
                raise
        name = obj["metadata"]["name"]
        there = self.api.get(obj["apiVersion"], obj["kind"], name) or {}
        mine = {objects.LABEL_JOB, objects.LABEL_ATTEMPT}
        theirs = (there.get("metadata") or {}).get("labels") or {}
        if any(theirs.get(key) != obj["metadata"]["labels"][key] for key in mine):
            raise LaunchError(
                f"a {obj['kind']} named {name} is in namespace {self.options.namespace} and is "
                "not this job's: Loom leaves it alone"
            )
        self.api.delete(obj["apiVersion"], obj["kind"], name, 0)
        for _ in range(50):  # deletion is asynchronous
            if self.api.get(obj["apiVersion"], obj["kind"], name) is None:
                break
            time.sleep(0.1)
        return self.api.create(obj)

    # -- following ---------------------------------------------------------------------------
    def status(self, handle: str) -> LearnerStatus:
        job, attempt, learner = _names(handle)
        try:
            view = self._view(job, attempt)
        except LaunchError as exc:  # the API is unreachable: nothing is known to have ended
            log.warning("following %s: %s", handle, exc.message)
            return LearnerStatus(Liveness.RUNNING)
        return learner_status(
            view.workload,
            view.pods.get(learner - 1),
            now=self._clock(),
            pull_timeout_s=self.pull_timeout_s,
            events=view.events,
        )

    def _view(self, job: str, attempt: int) -> _View:
        """The attempt's workload and pods, read at most once a second for all its learners."""
        key = (job, attempt)
        with self._lock:
            cached = self._views.get(key)
        now = time.monotonic()
        if cached is not None and now - cached.at < VIEW_TTL_S:
            return cached
        name = objects.object_name(job, attempt)
        found = self._find(name)
        workload = found[1] if found else None
        pods = self.api.listing(*POD, objects.selector(job, attempt)) if workload else []
        events = self._events(name, found[0]) if found and not pods else ()
        view = _View(now, workload, _by_index(pods), events)
        with self._lock:
            self._views[key] = view
        return view

    def _events(self, name: str, kind: tuple[str, str]) -> tuple[dict[str, Any], ...]:
        """Why a workload has no pod, where Kubernetes said it: its Job's events (a TrainJob's
        are on its JobSet's job, NAME-node-0). Not readable (no right): none."""
        names = [name, f"{name}-{objects.TRAINJOB_NODE}-0"] if kind == TRAINJOB else [name]
        try:
            return tuple(event for each in names for event in self.api.events(each))
        except LaunchError as exc:
            log.info("the events of %s cannot be read: %s", name, exc.message)
            return ()

    def _forget(self, job: str, attempt: int) -> None:
        with self._lock:
            self._views.pop((job, attempt), None)

    def terminate(self, handle: str, grace_s: float) -> None:
        """Suspend the workload (nothing is started again), and delete the learner's pod with
        that grace: its wrapper gets SIGTERM, halts the command and reports."""
        job, attempt, learner = _names(handle)
        name = objects.object_name(job, attempt)
        halt = {"metadata": {"annotations": {objects.HALTED: "true"}}, "spec": {"suspend": True}}
        try:
            found = self._find(name)
            if found is not None:
                self.api.patch(*found[0], name, halt)
        except LaunchError as exc:
            log.warning("suspending %s: %s", name, exc.message)
        try:
            for pod in self.api.listing(*POD, objects.selector(job, attempt)):
                if _index(pod) == learner - 1:
                    self.api.delete(*POD, pod["metadata"]["name"], grace_s)
        except LaunchError as exc:
            log.warning("terminating %s: %s", handle, exc.message)
        self._forget(job, attempt)

    def spooled_lines(self, handle: str) -> list[dict[str, Any]]:
        return []  # the spool was on the pod's scratch: its wrapper shipped it before ending

    def release(self, handles: list[str]) -> None:
        """Delete the workload, and with it (owner references) its pods and parts; the parts
        by name too, for a launch that ended before it could give them an owner."""
        if not handles:
            return
        job, attempt, _ = _names(handles[0])
        name = objects.object_name(job, attempt)
        for api_version, kind in [*self._kinds(), *PARTS]:
            try:
                self.api.delete(api_version, kind, name)
            except LaunchError as exc:
                if kind != "TrainJob" or self.kind() == "trainjob":  # none served: none there
                    log.warning("releasing %s: %s", name, exc.message)
        self._forget(job, attempt)

    def close(self) -> None:
        """Nothing to stop: the learners are the cluster's, and outlive this process."""


def _index(pod: dict[str, Any]) -> int | None:
    meta = pod.get("metadata") or {}
    found = (meta.get("labels") or {}).get(INDEX_KEY) or (meta.get("annotations") or {}).get(
        INDEX_KEY
    )
    return int(found) if found is not None else None


def _by_index(pods: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each learner's pod: the newest, unless an older one already told its outcome."""
    chosen: dict[int, dict[str, Any]] = {}
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp", "")):
        index = _index(pod)
        if index is None:
            continue
        if index in chosen and _told(chosen[index]):
            continue
        chosen[index] = pod
    return chosen


def _told(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _usable(node: dict[str, Any]) -> bool:
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    for found in (node.get("status") or {}).get("conditions") or []:
        if found.get("type") == "Ready":
            return bool(found.get("status") == "True")
    return False


def _allocatable(node: dict[str, Any], gpu_resource: str) -> Resources:
    have = (node.get("status") or {}).get("allocatable") or {}
    return Resources(
        cpus=_quantity(str(have.get("cpu", "0"))),
        memory=int(_quantity(str(have.get("memory", "0")))),
        gpus=int(_quantity(str(have.get(gpu_resource, "0")))),
    )


SUFFIXES = {
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


def _quantity(text: str) -> float:
    """A Kubernetes quantity ("3800m", "16Gi", "2") as a number."""
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * SUFFIXES[suffix]
    return float(text or 0)
