"""Training Operator v1 jobs (`kubeflow.org/v1`: TFJob, PyTorchJob, MPIJob, XGBoostJob, JAXJob,
PaddleJob) as one Loom job: each replica a learner, in the operator's order (Chief/Master first),
with the variables its operator sets (`loom.domain.replicas`), each replica type's command, and
`runPolicy` as Loom's restart policy, timeout and halt. Pure."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from loom.dialects.kinds import Document, Note
from loom.dialects.kubeflow import pods
from loom.dialects.kubeflow.images import runtime_of
from loom.dialects.kubeflow.pods import ConfigMaps, Notes, Paths, Pod, Share
from loom.domain import spec_checks as check
from loom.domain.replicas import Layout

GROUP = "kubeflow.org"
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
DEFAULT_RESTARTS = 3  # OnFailure without backoffLimit: a bound where Kubernetes has none
MAX_RESTARTS = 100  # the manifest's own bound


@dataclass(frozen=True)
class Family:
    """One kind of the Training Operator: where its replicas are, their types in learner order
    (the operator's rank order), the container it runs, Loom's framework for its variables."""

    kind: str
    field: str
    types: tuple[str, ...]
    container: str | None
    framework: str
    extra: tuple[str, ...] = ()


FAMILIES = {
    f.kind: f
    for f in (
        Family(
            "TFJob",
            "tfReplicaSpecs",
            ("Chief", "Master", "PS", "Worker", "Evaluator"),
            "tensorflow",
            "tensorflow",
            ("successPolicy", "enableDynamicWorker"),
        ),
        Family(
            "PyTorchJob",
            "pytorchReplicaSpecs",
            ("Master", "Worker"),
            "pytorch",
            "pytorch",
            ("elasticPolicy", "nprocPerNode"),
        ),
        Family(
            "MPIJob",
            "mpiReplicaSpecs",
            ("Launcher", "Worker"),
            None,
            "horovod",
            ("slotsPerWorker", "cleanPodPolicy", "mainContainer", "sshAuthMountPath"),
        ),
        Family("XGBoostJob", "xgbReplicaSpecs", ("Master", "Worker"), "xgboost", "python"),
        Family("JAXJob", "jaxReplicaSpecs", ("Worker",), "jax", "jax"),
        Family(
            "PaddleJob",
            "paddleReplicaSpecs",
            ("Master", "Worker"),
            "paddle",
            "python",
            ("elasticPolicy",),
        ),
    )
}
RUN_POLICY = (
    *("cleanPodPolicy", "ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"),
    *("schedulingPolicy", "suspend", "managedBy"),
)


@dataclass
class JobPlan:
    """The Loom job a Kubeflow object becomes."""

    manifest: dict[str, Any]
    notes: tuple[Note, ...]
    files: dict[str, str] = field(default_factory=dict)  # brought with the code
    suspend: bool = False
    ttl_s: int | None = None


@dataclass
class _Replica:
    kind: str
    count: int
    pod: Pod
    policy: str


def training_job(
    document: Document,
    name: str,
    code: frozenset[str],
    *,
    config_maps: ConfigMaps = lambda _name: None,
    paths: Paths | None = None,
    where: str = "",
) -> JobPlan:
    """A v1 training job as a Loom job named `name`; refused naming the field."""
    family = FAMILIES[str(document["kind"])]
    notes = Notes()
    paths = paths or Paths(code)
    paths.entrypoint = pods.entrypoint_of(document) or paths.entrypoint
    at = check.join(where, "spec")
    spec = check.section(document, "spec", where, f"the {family.kind}'s replicas")
    check.known(spec, (family.field, "runPolicy", *family.extra), at)
    replicas = _replicas(spec, family, check.join(at, family.field), paths, notes, config_maps)
    runs, shares = _learners(family, spec, replicas, at, notes)
    _policies(family, spec, at, notes)
    manifest = {
        "name": name,
        "learners": sum(count for _, count, _ in runs),
        "framework": _framework(family, replicas, runs, at, notes),
        **_resources(shares, at, notes),
        "framework_options": {
            "replicas": Layout(
                family.kind,
                tuple((kind, count) for kind, count, _ in runs),
                name,
                nproc_per_node=_nproc(spec),
            ).as_options()
        },
    }
    if not manifest["framework"].pop("_install", True):
        manifest["environment"] = {"install_framework": False}
    image = next((r.pod.main.image for r in replicas if r.pod.main.image), None)
    if image is not None:
        manifest["framework_options"]["image"] = image
    policy = run_policy(
        spec.get("runPolicy"), check.join(at, "runPolicy"), [r.policy for r in replicas], notes
    )
    manifest.update(policy.manifest)
    return JobPlan(manifest, notes.all(), dict(paths.files), policy.suspend, policy.ttl_s)


def _nproc(spec: dict[str, Any]) -> str | None:
    value = spec.get("nprocPerNode")
    return None if value is None else str(value)


def _replicas(
    spec: dict[str, Any],
    family: Family,
    where: str,
    paths: Paths,
    notes: Notes,
    config_maps: ConfigMaps,
) -> list[_Replica]:
    found = check.section(spec, family.field, "", "the replicas: type → spec")
    for kind in found:
        if kind not in family.types:
            raise check.fail(
                f"{where}.{kind}",
                f"{family.kind} has no replica type {kind!r}; its types are "
                + ", ".join(family.types),
            )
    replicas = []
    for kind in family.types:  # the operator's order: ranks follow it
        if kind not in found:
            continue
        at = f"{where}.{kind}"
        item = check.mapping(found[kind], at)
        check.known(item, ("replicas", "template", "restartPolicy"), at)
        count = check.count(item.get("replicas", 1), f"{at}.replicas", 0)
        if count == 0:
            notes.add(f"{at}.replicas", "ignored", f"no {kind} replica asked for")
            continue
        policy = check.choice(
            item.get("restartPolicy") or "Never", f"{at}.restartPolicy", RESTART_POLICIES
        )
        pod = pods.pod(
            item.get("template"),
            f"{at}.template",
            paths,
            notes,
            primary=family.container or spec.get("mainContainer"),
            config_maps=config_maps,
            entry=_mpi_entry(family, spec, found, kind, at, notes),
        )
        replicas.append(_Replica(kind, int(count or 1), pod, policy))
    if not replicas:
        raise check.fail(where, "no replica to run")
    if any(r.pod.restart_policy for r in replicas):
        notes.add(
            f"{where}.*.template.spec.restartPolicy",
            "ignored",
            "the replica's restartPolicy decides, as the operator does",
        )
    return replicas


def _learners(
    family: Family, spec: dict[str, Any], replicas: list[_Replica], where: str, notes: Notes
) -> tuple[list[tuple[str, int, str]], list[Share]]:
    """(type, count, script) per learner group, and each group's share."""
    if family.kind == "MPIJob":
        return _mpi(spec, replicas, where, notes)
    runs = [(r.kind, r.count, r.pod.script()) for r in replicas]
    return runs, [r.pod.main.share for r in replicas]


def _mpi(
    spec: dict[str, Any], replicas: list[_Replica], where: str, notes: Notes
) -> tuple[list[tuple[str, int, str]], list[Share]]:
    """The launcher's `mpirun` is not run: its program runs on each worker slot, as the rank
    mpirun would have started there."""
    at = f"{where}.mpiReplicaSpecs"
    by_kind = {r.kind: r for r in replicas}
    if "Launcher" not in by_kind or "Worker" not in by_kind:
        raise check.fail(at, "an MPIJob needs a Launcher (its mpirun) and Workers")
    slots = check.count(spec.get("slotsPerWorker", 1), f"{where}.slotsPerWorker", 1) or 1
    workers = by_kind["Worker"]
    size = workers.count * slots
    program = by_kind["Launcher"].pod.script()
    notes.add(
        f"{at}.Launcher",
        "approximated",
        f"mpirun is not run: its program runs once on each of the {size} worker slots, with "
        "Open MPI's and Horovod's rank variables and a hostfile",
    )
    return [("Worker", size, program)], [workers.pod.main.share]


def _mpi_entry(
    family: Family,
    spec: dict[str, Any],
    found: dict[str, Any],
    kind: str,
    where: str,
    notes: Notes,
) -> list[str] | None:
    """An MPIJob's words: the launcher's program without mpirun; a worker's own command
    (sshd, or nothing) is not run."""
    if family.kind != "MPIJob":
        return None
    container = _main_container(found[kind], where, spec.get("mainContainer"))
    if kind == "Worker":
        if container.get("command") or container.get("args"):
            notes.add(f"{where}.template", "ignored", "a worker's own command (sshd) is not run")
        return ["true"]
    worker = check.mapping(found.get("Worker") or {}, where)
    workers = int(worker.get("replicas", 1) or 1) * int(spec.get("slotsPerWorker", 1) or 1)
    words = words_of(container, f"{where}.template.spec.containers[0]")
    return strip_mpirun(words, f"{where}.template.spec.containers[0].command", workers)


def _main_container(item: Any, where: str, name: Any) -> dict[str, Any]:
    template = item.get("template") if isinstance(item, dict) else None
    spec = template.get("spec") if isinstance(template, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        raise check.fail(f"{where}.template.spec.containers", "a pod needs a container")
    named = [c for c in containers if isinstance(c, dict) and c.get("name") == name]
    found = named[0] if named else containers[0]
    return check.mapping(found, f"{where}.template.spec.containers[0]")


def strip_mpirun(words: list[str], where: str, workers: int) -> list[str]:
    """The program of an `mpirun`/`mpiexec`/`horovodrun` command line; `-np` must match the
    workers' slots."""
    if not words or words[0].rsplit("/", 1)[-1] not in ("mpirun", "mpiexec", "horovodrun"):
        return words
    index = 1
    while index < len(words) and words[index].startswith("-"):
        option = words[index]
        takes = _MPI_OPTIONS.get(option.lstrip("-").split("=")[0], 0) if "=" not in option else 0
        if option in ("-np", "-n", "--np", "-c") and index + 1 < len(words):
            asked = words[index + 1]
            if asked.isdecimal() and int(asked) != workers:
                raise check.fail(
                    where,
                    f"mpirun {option} {asked}, but the Workers have {workers} slots "
                    "(replicas × slotsPerWorker): make them agree",
                )
        index += 1 + takes
    if index >= len(words):
        raise check.fail(where, "mpirun is given no program to run")
    return words[index:]


# mpirun's options that take values (Open MPI, MPICH, horovodrun), by name without dashes.
_MPI_OPTIONS = {
    **dict.fromkeys(("np", "n", "c", "H", "host", "hostfile", "machinefile", "npernode"), 1),
    **dict.fromkeys(("x", "bind-to", "map-by", "rank-by", "output-filename", "wdir"), 1),
    **dict.fromkeys(("mca", "gmca"), 2),
    **dict.fromkeys(("p", "start-timeout", "network-interface", "gloo-timeout-seconds"), 1),
}


def _framework(
    family: Family,
    replicas: list[_Replica],
    runs: list[tuple[str, int, str]],
    where: str,
    notes: Notes,
) -> dict[str, Any]:
    """The framework the job's variables come from, its environment from the image, and the
    command: one per replica type, chosen by the learner's rank."""
    images = {r.pod.main.image for r in replicas if r.pod.main.image}
    if len(images) > 1:
        notes.add(
            f"{where}.{family.field}",
            "approximated",
            "the replicas' images differ; every learner runs in the first one's environment",
        )
    image = next((r.pod.main.image for r in replicas if r.pod.main.image), None)
    found: dict[str, Any] = {"name": family.framework, "command": dispatch(runs)}
    runtime = runtime_of(image) if image else None
    if runtime is not None and runtime.known and runtime.framework == family.framework:
        if runtime.version:
            found["version"] = runtime.version
    elif image is not None:
        notes.add(
            f"{where}.{family.field}.*.template.spec.containers[*].image",
            "approximated",
            f"{image} is not a known {family.framework} image: the learners run in the "
            "platform's Python environment, with the framework's launch variables",
        )
        found["_install"] = False
    return found


def dispatch(runs: list[tuple[str, int, str]]) -> str:
    """One bash command for the job: the script of the learner's replica type, by its rank."""
    scripts = {script for _, _, script in runs}
    if len(scripts) == 1:
        return runs[0][2]
    cases = []
    first = 1
    for _kind, count, script in runs:
        ids = "|".join(str(n) for n in range(first, first + count))
        cases.append(f"{ids}) {script} ;;")
        first += count
    return 'case "$LEARNER_ID" in ' + " ".join(cases) + " esac"


def _resources(shares: list[Share], where: str, notes: Notes) -> dict[str, Any]:
    """Every learner gets the largest share any replica type asks for."""
    most = Share()
    for one in shares:
        most = most.most(one)
    if len(set(shares)) > 1:
        notes.add(
            f"{where}.*.resources",
            "approximated",
            "the replica types ask for different resources; every learner gets the largest",
        )
    if most.cpus is None or most.memory is None:
        notes.add(
            f"{where}.*.resources.limits",
            "approximated",
            "no cpu or memory limit given: a learner gets Loom's default (1 CPU, 1 GiB)",
        )
    return most.manifest()


def _policies(family: Family, spec: dict[str, Any], where: str, notes: Notes) -> None:
    if family.kind == "TFJob":
        if spec.get("successPolicy") != "AllWorkers":
            notes.add(
                f"{where}.successPolicy",
                "approximated",
                "a Loom job succeeds when all its learners do (the operator's AllWorkers); by "
                "default the operator ends the job when the chief (or worker 0) succeeds",
            )
        if spec.get("enableDynamicWorker"):
            notes.add(f"{where}.enableDynamicWorker", "ignored", "the gang is fixed")
    if "elasticPolicy" in spec:
        raise check.fail(
            f"{where}.elasticPolicy",
            "elastic training (a gang that grows and shrinks) is not offered; give fixed replicas",
        )
    if family.kind == "MPIJob":
        for key in ("cleanPodPolicy", "mainContainer", "sshAuthMountPath"):
            if key in spec:
                notes.add(f"{where}.{key}", "ignored", "mpirun and its ssh are not run")


@dataclass
class RunPolicy:
    manifest: dict[str, Any]
    suspend: bool
    ttl_s: int | None


def run_policy(value: Any, where: str, policies: list[str], notes: Notes) -> RunPolicy:
    """`runPolicy` and the replicas' restart policies as Loom's restart policy, timeout and
    halt; `ttlSecondsAfterFinished` as the object's own retention."""
    found = check.mapping(value or {}, where)
    check.known(found, RUN_POLICY, where)
    manifest: dict[str, Any] = {}
    restart = _restart(policies, where, notes)
    limit = check.count(found.get("backoffLimit"), f"{where}.backoffLimit", 0)
    if restart != "Never":
        manifest["restart_policy"] = restart
        restarts = DEFAULT_RESTARTS if limit is None else limit
        if restarts > MAX_RESTARTS:
            notes.add(f"{where}.backoffLimit", "approximated", f"at most {MAX_RESTARTS} restarts")
        manifest["max_restarts"] = min(restarts, MAX_RESTARTS)
        if limit is None:
            notes.add(
                f"{where}.backoffLimit",
                "approximated",
                f"not given: a failed gang restarts at most {DEFAULT_RESTARTS} times",
            )
    deadline = check.count(found.get("activeDeadlineSeconds"), f"{where}.activeDeadlineSeconds", 1)
    if deadline is not None:
        manifest["timeout_s"] = deadline
    clean = found.get("cleanPodPolicy")
    if clean not in (None, "Running", "All"):
        notes.add(
            f"{where}.cleanPodPolicy",
            "ignored",
            "a Loom job's learners end with it; nothing is left running",
        )
    scheduling = check.mapping(found.get("schedulingPolicy") or {}, f"{where}.schedulingPolicy")
    for key in scheduling:
        if key == "minAvailable":
            why = "the whole gang is always started at once"
            notes.add(f"{where}.schedulingPolicy.{key}", "approximated", why)
        else:
            notes.add(f"{where}.schedulingPolicy.{key}", "ignored", "Loom queues by priority")
    if "managedBy" in found:
        notes.add(f"{where}.managedBy", "ignored", "Loom runs it")
    suspend = found.get("suspend", False)
    if not isinstance(suspend, bool):
        raise check.fail(f"{where}.suspend", f"must be true or false, got {suspend!r}")
    ttl = check.count(found.get("ttlSecondsAfterFinished"), f"{where}.ttlSecondsAfterFinished", 0)
    return RunPolicy(manifest, suspend, ttl)


def _restart(policies: list[str], where: str, notes: Notes) -> str:
    """The replicas' restart policies as the job's: a Loom gang restarts as one."""
    chosen = "Never"
    if "ExitCode" in policies:
        chosen = "ExitCode"
    if "OnFailure" in policies or "Always" in policies:
        chosen = "OnFailure"
    if len(set(policies)) > 1 or "Always" in policies:
        notes.add(
            "spec.*.restartPolicy",
            "approximated",
            f"the whole gang restarts on a failure ({chosen}); a completed job is not restarted",
        )
    return chosen


def words_of(container: dict[str, Any], where: str) -> list[str]:
    """A container's command and args, as given."""
    return pods.texts(container.get("command"), f"{where}.command") + pods.texts(
        container.get("args"), f"{where}.args"
    )


def shell(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)
