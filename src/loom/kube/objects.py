"""The objects one job attempt becomes: a Secret (the learners' specs and credentials), a headless
Service (each learner's DNS name), a NetworkPolicy (only the job's own learners reach them), and
either an indexed batch Job or a Kubeflow Trainer v2 TrainJob.

Every learner pod runs `python -m loom.learner.pod`: it takes its rank from the completion index,
its spec from the Secret's volume and its token from a variable read from the Secret (never in the
object in clear), and runs Loom's learner wrapper. Restarts are Loom's, per gang: each attempt is
its own Job, which Kubernetes never retries (`backoffLimit: 0`), and whose `podFailurePolicy` ends
it at a learner's first failure; Loom's restart policy (Never, OnFailure, ExitCode with its 1–127
rule) then decides on a new attempt, which resumes from the job's checkpoints.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from loom.domain.resources import Resources

Kind = Literal["job", "trainjob"]

GROUP = "trainer.kubeflow.org"
TRAINJOB_API = f"{GROUP}/v1alpha1"
COORDINATOR_PORT = 29500
LEARNER_PORT = 29501
# -I: the pod's working folder (its scratch, which user code writes) is never on the wrapper's
# import path, and no PYTHON* variable changes what the wrapper imports.
ENTRY = ["python", "-I", "-m", "loom.learner.pod"]
SPECS_DIR = "/etc/loom/learner"
SCRATCH = "/scratch"
CREDENTIALS_KEY = "credentials"
CREDENTIALS_ENV = "LOOM_POD_CREDENTIALS"
LEARNER_UID = 1000
# Trainer v2's runtimes name the trainer's replicated job and its container "node".
TRAINJOB_NODE = "node"
DEFAULT_RUNTIMES = {"pytorch": "torch-distributed", "torch": "torch-distributed"}
FALLBACK_RUNTIME = "torch-distributed"  # a generic indexed gang: Loom sets each framework's env
MANAGER = "loom.dev/launcher"
LABEL_JOB = "loom.job-id"
LABEL_ATTEMPT = "loom.attempt"
LABEL_OWNER = "loom.owner"
LABEL_ROLE = "loom.role"
LABEL_QUEUE = "kueue.x-k8s.io/queue-name"
HALTED = "loom.dev/halted"  # set with `suspend` when Loom halts: not a queue's suspension
_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]+")
_NAME_BAD = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class KubeOptions:
    """How the platform's jobs are rendered on its cluster (from `LOOM_KUBE_*`)."""

    namespace: str = "loom-jobs"
    image: str = "ghcr.io/loom-ml/loom-learner:latest"
    gpu_resource: str = "nvidia.com/gpu"
    runtimes: dict[str, str] = field(default_factory=dict)
    image_pull_secrets: tuple[str, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    halt_grace_s: float = 10.0
    # A service account without rights and without a mounted token (a TrainJob's pods can only
    # be given the account, so its `automountServiceAccountToken: false` is what keeps it out).
    service_account: str = "loom-learner"
    # A Kueue LocalQueue: the workload is then admitted whole (gang) when its quota allows.
    queue_name: str | None = None
    tmp_bytes: int = 2**30  # a learner's /tmp, as the local sandbox's

    def runtime(self, framework: str) -> str:
        """The ClusterTrainingRuntime a framework's TrainJob references."""
        name = framework.lower()
        chosen = {**DEFAULT_RUNTIMES, **{k.lower(): v for k, v in self.runtimes.items()}}
        return chosen.get(name) or chosen.get("*") or FALLBACK_RUNTIME


@dataclass(frozen=True)
class JobShape:
    """What Kubernetes needs of one attempt: who, which framework, how many learners, each
    learner's share."""

    job_id: str
    attempt: int
    owner: str
    framework: str
    learners: int
    per_learner: Resources
    restart_policy: str = "Never"
    max_restarts: int = 0
    storage: int | None = None  # the manifest's `storage`: the learner's scratch disk
    # The manifest's learner image (`framework.image`, FfDL's `custom`); it must hold Loom's
    # learner, as the platform's own learner image does (docs/kubernetes.md).
    image: str | None = None

    @property
    def name(self) -> str:
        return object_name(self.job_id, self.attempt)


def object_name(job_id: str, attempt: int) -> str:
    """The attempt's objects' name: a DNS label, short enough that a pod's hostname
    (`NAME-INDEX`, and a TrainJob's `NAME-node-0-INDEX`) stays a label too."""
    base = _NAME_BAD.sub("-", f"loom-{job_id}".lower()).strip("-")[:40].rstrip("-")
    return f"{base}-a{attempt}"


def label_value(text: str) -> str:
    """A label value (63 characters of [A-Za-z0-9_.-], alphanumeric at both ends)."""
    return _LABEL_BAD.sub("-", text)[:63].strip("-_.") or "none"


def labels(shape: JobShape) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "loom-learner",
        "app.kubernetes.io/part-of": "loom",
        "app.kubernetes.io/managed-by": "loom",
        LABEL_JOB: label_value(shape.job_id),
        LABEL_ATTEMPT: str(shape.attempt),
        LABEL_OWNER: label_value(shape.owner),
        LABEL_ROLE: "learner",
    }


def selector(job_id: str, attempt: int | None = None) -> str:
    """A label selector for a job's objects (one attempt's, when given)."""
    found = f"{LABEL_JOB}={label_value(job_id)}"
    return found if attempt is None else f"{found},{LABEL_ATTEMPT}={attempt}"


def host_pattern(shape: JobShape, kind: Kind) -> str:
    """Each learner's DNS name, `{index}` standing for its completion index."""
    if kind == "trainjob":  # JobSet: job NAME-node-0, pods NAME-node-0-INDEX, subdomain NAME
        return f"{shape.name}-{TRAINJOB_NODE}-0-{{index}}.{shape.name}"
    return f"{shape.name}-{{index}}.{shape.name}"


def render(
    shape: JobShape,
    options: KubeOptions,
    kind: Kind,
    *,
    specs: list[dict[str, Any]] | None = None,
    credentials: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The attempt's objects, in the order they are created. Without `specs` and
    `credentials` (a review, `loom kubernetes render`), the Secret says what it will hold."""
    from kubernetes import client as k

    workload = trainjob(shape, options) if kind == "trainjob" else batch_job(shape, options)
    made: list[Any] = [secret(shape, options, specs, credentials)]
    if kind == "job":  # a TrainJob's JobSet makes its own headless Service
        made.append(headless_service(shape, options))
    made.append(network_policy(shape, options))
    return [k.ApiClient().sanitize_for_serialization(obj) for obj in made] + [workload]


def secret(
    shape: JobShape,
    options: KubeOptions,
    specs: list[dict[str, Any]] | None,
    credentials: dict[str, Any] | None,
) -> Any:
    """The specs (one per learner, mounted) and the credentials (read once, from a variable,
    by the learner's wrapper)."""
    from kubernetes import client as k

    if specs is None or credentials is None:
        data = {CREDENTIALS_KEY: "<set at launch: the attempt's token and data-store secrets>"}
        data.update(
            {f"spec-{n}.json": f"<set at launch: learner {n}'s spec>" for n in _learners(shape)}
        )
    else:
        data = {CREDENTIALS_KEY: json.dumps(credentials)}
        data.update({f"spec-{n}.json": json.dumps(spec) for n, spec in enumerate(specs, 1)})
    return k.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=_meta(shape, options),
        type="Opaque",
        string_data=data,
    )


def headless_service(shape: JobShape, options: KubeOptions) -> Any:
    """DNS names for the learners: `NAME-INDEX.NAME`."""
    from kubernetes import client as k

    return k.V1Service(
        api_version="v1",
        kind="Service",
        metadata=_meta(shape, options),
        spec=k.V1ServiceSpec(
            cluster_ip="None",
            publish_not_ready_addresses=True,  # resolvable before the learners are "ready"
            selector={LABEL_JOB: label_value(shape.job_id), LABEL_ATTEMPT: str(shape.attempt)},
            ports=[
                k.V1ServicePort(name="coordinator", port=COORDINATOR_PORT, protocol="TCP"),
                k.V1ServicePort(name="learner", port=LEARNER_PORT, protocol="TCP"),
            ],
        ),
    )


def network_policy(shape: JobShape, options: KubeOptions) -> Any:
    """Only this job's own learners may connect to its learners (DDP, MPI, TF's gRPC)."""
    from kubernetes import client as k

    mine = {LABEL_JOB: label_value(shape.job_id)}
    return k.V1NetworkPolicy(
        api_version="networking.k8s.io/v1",
        kind="NetworkPolicy",
        metadata=_meta(shape, options),
        spec=k.V1NetworkPolicySpec(
            pod_selector=k.V1LabelSelector(match_labels=mine),
            policy_types=["Ingress"],
            ingress=[
                k.V1NetworkPolicyIngressRule(
                    var_from=[
                        k.V1NetworkPolicyPeer(pod_selector=k.V1LabelSelector(match_labels=mine))
                    ]
                )
            ],
        ),
    )


def batch_job(shape: JobShape, options: KubeOptions) -> dict[str, Any]:
    """An indexed Job: one pod per learner, all at once, never retried by Kubernetes."""
    from kubernetes import client as k

    template = k.V1PodTemplateSpec(
        metadata=k.V1ObjectMeta(labels=labels(shape)),
        spec=pod_spec(shape, options, "job"),
    )
    job = k.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=_meta(shape, options, annotations=_policy_note(shape), queued=True),
        spec=k.V1JobSpec(
            completion_mode="Indexed",
            completions=shape.learners,
            parallelism=shape.learners,
            backoff_limit=0,
            pod_failure_policy=k.V1PodFailurePolicy(
                rules=[
                    k.V1PodFailurePolicyRule(
                        action="FailJob",
                        on_exit_codes=k.V1PodFailurePolicyOnExitCodesRequirement(
                            container_name="learner", operator="NotIn", values=[0]
                        ),
                    ),
                    k.V1PodFailurePolicyRule(
                        action="FailJob",
                        on_pod_conditions=[
                            k.V1PodFailurePolicyOnPodConditionsPattern(
                                type="DisruptionTarget", status="True"
                            )
                        ],
                    ),
                ]
            ),
            template=template,
        ),
    )
    return dict(k.ApiClient().sanitize_for_serialization(job))


def _policy_note(shape: JobShape) -> dict[str, str]:
    """The job's restart policy, for whoever reads the Job: Loom applies it per gang."""
    return {
        "loom.dev/restart-policy": shape.restart_policy,
        "loom.dev/max-restarts": str(shape.max_restarts),
        "loom.dev/restarts": "each attempt is a new Job; Kubernetes never retries this one",
    }


def pod_spec(shape: JobShape, options: KubeOptions, kind: Kind) -> Any:
    """A learner's pod: non-root, no service account token, no service links, its own
    scratch, its share of the node, the learner's ports."""
    from kubernetes import client as k

    gpus = shape.per_learner.gpus
    return k.V1PodSpec(
        restart_policy="Never",
        subdomain=shape.name,
        service_account_name=options.service_account,
        automount_service_account_token=False,
        enable_service_links=False,
        termination_grace_period_seconds=int(options.halt_grace_s) + 30,
        security_context=_pod_security(),
        image_pull_secrets=[k.V1LocalObjectReference(name=n) for n in options.image_pull_secrets]
        or None,
        node_selector=dict(options.node_selector) or None,
        tolerations=(
            [k.V1Toleration(key=options.gpu_resource, operator="Exists", effect="NoSchedule")]
            if gpus
            else None
        ),
        containers=[
            k.V1Container(
                name="learner",
                image=shape.image or options.image,
                image_pull_policy="IfNotPresent",
                command=ENTRY,
                env=learner_env(shape, options, kind),
                ports=[
                    k.V1ContainerPort(name="coordinator", container_port=COORDINATOR_PORT),
                    k.V1ContainerPort(name="learner", container_port=LEARNER_PORT),
                ],
                resources=resources(shape, options),
                security_context=_container_security(),
                volume_mounts=_mounts(),
                termination_message_path="/dev/termination-log",
                termination_message_policy="File",
            )
        ],
        volumes=_volumes(shape, options),
    )


def learner_env(shape: JobShape, options: KubeOptions, kind: Kind) -> list[Any]:
    """What the pod's entry reads: where the specs are, how the gang's hosts are named, and
    the credentials, from the Secret (the object holds only a reference)."""
    from kubernetes import client as k

    plain = {
        "LOOM_POD_SPECS": SPECS_DIR,
        "LOOM_POD_SCRATCH": SCRATCH,
        "LOOM_POD_HOSTS": host_pattern(shape, kind),
        "LOOM_POD_LEARNERS": str(shape.learners),
        "HOME": f"{SCRATCH}/home",
        "PYTHONUNBUFFERED": "1",
    }
    env = [k.V1EnvVar(name=key, value=value) for key, value in plain.items()]
    env.append(
        k.V1EnvVar(
            name=CREDENTIALS_ENV,
            value_from=k.V1EnvVarSource(
                secret_key_ref=k.V1SecretKeySelector(name=shape.name, key=CREDENTIALS_KEY)
            ),
        )
    )
    return env


def resources(shape: JobShape, options: KubeOptions) -> Any:
    """Requests = limits (guaranteed): the manifest's CPUs, memory and GPUs per learner."""
    from kubernetes import client as k

    share = shape.per_learner
    amounts = {"cpu": _cpu(share.cpus), "memory": str(share.memory)}
    if shape.storage:  # the scratch disk and /tmp, which the kubelet then holds it to
        amounts["ephemeral-storage"] = str(shape.storage + options.tmp_bytes)
    if share.gpus:
        amounts[options.gpu_resource] = str(share.gpus)
    return k.V1ResourceRequirements(requests=dict(amounts), limits=dict(amounts))


def _cpu(cpus: float) -> str:
    millis = max(round(cpus * 1000), 1)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _pod_security() -> Any:
    from kubernetes import client as k

    return k.V1PodSecurityContext(
        run_as_non_root=True,
        run_as_user=LEARNER_UID,
        run_as_group=LEARNER_UID,
        fs_group=LEARNER_UID,
        seccomp_profile=k.V1SeccompProfile(type="RuntimeDefault"),
    )


def _container_security() -> Any:
    from kubernetes import client as k

    return k.V1SecurityContext(
        allow_privilege_escalation=False,
        read_only_root_filesystem=True,
        run_as_non_root=True,
        capabilities=k.V1Capabilities(drop=["ALL"]),
    )


def _mounts() -> list[Any]:
    from kubernetes import client as k

    return [
        k.V1VolumeMount(name="specs", mount_path=SPECS_DIR, read_only=True),
        k.V1VolumeMount(name="scratch", mount_path=SCRATCH),
        k.V1VolumeMount(name="tmp", mount_path="/tmp"),
        k.V1VolumeMount(name="shm", mount_path="/dev/shm"),  # NCCL and DataLoader workers
    ]


def _volumes(shape: JobShape, options: KubeOptions) -> list[Any]:
    """The specs only (not the credentials) from the Secret, and private scratch, each with a
    size limit (the kubelet evicts a pod that passes one)."""
    from kubernetes import client as k

    items = [k.V1KeyToPath(key=f"spec-{n}.json", path=f"spec-{n}.json") for n in _learners(shape)]
    return [
        k.V1Volume(
            name="specs",
            secret=k.V1SecretVolumeSource(secret_name=shape.name, items=items, default_mode=0o440),
        ),
        k.V1Volume(
            name="scratch",
            empty_dir=k.V1EmptyDirVolumeSource(
                size_limit=str(shape.storage) if shape.storage else None
            ),
        ),
        k.V1Volume(
            name="tmp", empty_dir=k.V1EmptyDirVolumeSource(size_limit=str(options.tmp_bytes))
        ),
        k.V1Volume(  # counted in the pod's memory
            name="shm",
            empty_dir=k.V1EmptyDirVolumeSource(
                medium="Memory", size_limit=str(max(shape.per_learner.memory // 2, 2**26))
            ),
        ),
    ]


def _learners(shape: JobShape) -> range:
    return range(1, shape.learners + 1)


def _meta(
    shape: JobShape,
    options: KubeOptions,
    *,
    name: str | None = None,
    annotations: dict[str, str] | None = None,
    queued: bool = False,
) -> Any:
    from kubernetes import client as k

    found = labels(shape)
    if queued and options.queue_name:
        found[LABEL_QUEUE] = options.queue_name
    return k.V1ObjectMeta(
        name=name or shape.name,
        namespace=options.namespace,
        labels=found,
        annotations={"loom.dev/owner": shape.owner, **(annotations or {})},
    )


def trainjob(shape: JobShape, options: KubeOptions) -> dict[str, Any]:
    """A Kubeflow Trainer v2 TrainJob on the framework's ClusterTrainingRuntime, with Loom's
    entry as the trainer and the learner pod's confinement patched into the runtime's `node`
    job (Trainer's typed models, `kubeflow-trainer-api`)."""
    from kubeflow_trainer_api import models as t
    from kubernetes import client as k

    api = k.ApiClient()

    def typed(model: type[Any], value: Any) -> Any:
        """A `kubernetes` model as the same model of Trainer's package."""
        return model.from_dict(api.sanitize_for_serialization(value))

    pod = pod_spec(shape, options, "trainjob")
    container = t.TrainerV1alpha1ContainerPatch(
        name=TRAINJOB_NODE,
        security_context=typed(t.IoK8sApiCoreV1SecurityContext, _container_security()),
        volume_mounts=[typed(t.IoK8sApiCoreV1VolumeMount, m) for m in _mounts()],
    )
    pod_patch = t.TrainerV1alpha1PodSpecPatch(
        containers=[container],
        volumes=[typed(t.IoK8sApiCoreV1Volume, v) for v in pod.volumes],
        security_context=typed(t.IoK8sApiCoreV1PodSecurityContext, pod.security_context),
        node_selector=pod.node_selector,
        image_pull_secrets=[
            typed(t.IoK8sApiCoreV1LocalObjectReference, s) for s in pod.image_pull_secrets or []
        ]
        or None,
        tolerations=[typed(t.IoK8sApiCoreV1Toleration, x) for x in pod.tolerations or []] or None,
        termination_grace_period_seconds=pod.termination_grace_period_seconds,
        service_account_name=pod.service_account_name,
    )
    meta = t.IoK8sApimachineryPkgApisMetaV1ObjectMeta(labels=labels(shape))
    replicated = t.TrainerV1alpha1ReplicatedJobPatch(
        name=TRAINJOB_NODE,
        template=t.TrainerV1alpha1JobTemplatePatch(
            metadata=meta,
            spec=t.TrainerV1alpha1JobSpecPatch(
                template=t.TrainerV1alpha1PodTemplatePatch(metadata=meta, spec=pod_patch)
            ),
        ),
    )
    job = t.TrainerV1alpha1TrainJob(
        api_version=TRAINJOB_API,
        kind="TrainJob",
        metadata=typed(
            t.IoK8sApimachineryPkgApisMetaV1ObjectMeta,
            _meta(shape, options, annotations=_policy_note(shape), queued=True),
        ),
        spec=t.TrainerV1alpha1TrainJobSpec(
            runtime_ref=t.TrainerV1alpha1RuntimeRef(
                name=options.runtime(shape.framework),
                kind="ClusterTrainingRuntime",
                api_group=GROUP,
            ),
            trainer=t.TrainerV1alpha1Trainer(
                image=options.image,
                command=ENTRY,
                num_nodes=shape.learners,
                env=[
                    typed(t.IoK8sApiCoreV1EnvVar, e)
                    for e in learner_env(shape, options, "trainjob")
                ],
                resources_per_node=typed(
                    t.IoK8sApiCoreV1ResourceRequirements, resources(shape, options)
                ),
            ),
            runtime_patches=[
                t.TrainerV1alpha1RuntimePatch(
                    manager=MANAGER,
                    training_runtime_spec=t.TrainerV1alpha1TrainingRuntimeSpecPatch(
                        template=t.TrainerV1alpha1JobSetTemplatePatch(
                            metadata=meta,
                            spec=t.TrainerV1alpha1JobSetSpecPatch(replicated_jobs=[replicated]),
                        )
                    ),
                )
            ],
        ),
    )
    return dict(job.to_dict())


def owner_reference(owner: dict[str, Any]) -> dict[str, Any]:
    """A reference to the attempt's Job or TrainJob, so that deleting it deletes the rest."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": False,
        "blockOwnerDeletion": False,
    }
