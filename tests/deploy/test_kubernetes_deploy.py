"""The Kubernetes deployment under `deploy/kubernetes/`, checked offline: every object against the
Kubernetes 1.37 schemas (strict), the kustomizations against the files, the launcher's Role
against the calls the launcher really makes, and the platform's pods against the `restricted`
Pod Security Standard and the settings the platform really reads."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from loom.api.openapi import OPEN_PATHS
from loom.domain.errors import LaunchError
from loom.kube.objects import KubeOptions
from loom.launchers.base import LearnerLaunch
from loom.launchers.kubernetes import INDEX_KEY, KubernetesLauncher
from loom.settings import Settings
from tests.conftest import ROOT
from tests.kube import crd

DEPLOY = ROOT / "deploy" / "kubernetes"
DOCS = ROOT / "docs" / "kubernetes.md"
VERSION = "1.37.0"
PART_OF = "app.kubernetes.io/part-of"
NAME = "app.kubernetes.io/name"
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "*"}
READ_VERBS = {"get", "list", "watch"}
PLURALS = {
    "Job": "jobs",
    "TrainJob": "trainjobs",
    "Secret": "secrets",
    "Service": "services",
    "NetworkPolicy": "networkpolicies",
    "Pod": "pods",
}
METADATA_ADDRESS = "169.254.169.254/32"


def manifests() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p.name != "kustomization.yaml")


def documents() -> list[tuple[str, dict[str, Any]]]:
    """Every object in the deployment's files, named `file#index` (examples included)."""
    found = []
    for path in manifests():
        for index, doc in enumerate(yaml.safe_load_all(path.read_text())):
            if doc is not None:
                found.append((f"{path.relative_to(DEPLOY)}#{index}", doc))
    return found


def objects(kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [
        doc
        for _, doc in documents()
        if doc["kind"] == kind and name in (None, doc["metadata"]["name"])
    ]


def one(kind: str, name: str) -> dict[str, Any]:
    found = objects(kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def kustomizations() -> list[Path]:
    return sorted(DEPLOY.rglob("kustomization.yaml"))


def platform_container() -> dict[str, Any]:
    pod = one("Deployment", "loom")["spec"]["template"]["spec"]
    return next(c for c in pod["containers"] if c["name"] == "loom")


def platform_env() -> dict[str, dict[str, Any]]:
    return {var["name"]: var for var in platform_container()["env"]}


def test_the_deployment_has_its_objects() -> None:
    """The files hold the objects the brief names (so that the checks below check something)."""
    kinds = {(doc["kind"], doc["metadata"]["name"]) for _, doc in documents()}
    for wanted in [
        ("Namespace", "loom"),
        ("Namespace", "loom-jobs"),
        ("ServiceAccount", "loom-platform"),
        ("ServiceAccount", "loom-learner"),
        ("Role", "loom-launcher"),
        ("RoleBinding", "loom-launcher"),
        ("ClusterRole", "loom-nodes-reader"),
        ("Deployment", "loom"),
        ("Service", "loom"),
        ("StatefulSet", "loom-postgres"),
    ]:
        assert wanted in kinds


@pytest.mark.parametrize(("where", "doc"), documents(), ids=[w for w, _ in documents()])
def test_every_object_is_valid_for_kubernetes_1_37(where: str, doc: dict[str, Any]) -> None:
    """Each object validates against Kubernetes 1.37's schema, strictly (no unknown field);
    Kubeflow Trainer's against its CRD's schema, as strictly."""
    if doc["apiVersion"].startswith("trainer.kubeflow.org/"):
        crd.validate(doc)
        return
    kubernetes_validate.validate(doc, VERSION, strict=True)


@pytest.mark.parametrize(("where", "doc"), documents(), ids=[w for w, _ in documents()])
def test_every_object_is_labelled_as_part_of_loom(where: str, doc: dict[str, Any]) -> None:
    """Every object, and every pod and volume claim template in it, says what it is and that it
    belongs to Loom."""
    metas = [doc["metadata"]]
    spec = doc.get("spec") or {}
    if "template" in spec:
        metas.append(spec["template"]["metadata"])
    metas += [claim["metadata"] for claim in spec.get("volumeClaimTemplates") or []]
    for meta in metas:
        labels = meta.get("labels") or {}
        assert labels.get(PART_OF) == "loom", (where, meta)
        assert labels.get(NAME), (where, meta)


@pytest.mark.parametrize(
    "kustomization", kustomizations(), ids=lambda p: str(p.relative_to(DEPLOY))
)
def test_each_kustomization_lists_resources_that_exist(kustomization: Path) -> None:
    """Every resource a kustomization names is a file or a folder with a kustomization."""
    spec = yaml.safe_load(kustomization.read_text())
    assert spec["kind"] == "Kustomization"
    assert spec["resources"]
    for resource in spec["resources"]:
        path = (kustomization.parent / resource).resolve()
        assert path.is_file() or (path / "kustomization.yaml").is_file(), resource


def test_every_manifest_is_in_a_kustomization_but_the_examples() -> None:
    """No object file is forgotten by kustomize, and no example Secret is applied by it."""
    listed = {
        (k.parent / resource).resolve()
        for k in kustomizations()
        for resource in yaml.safe_load(k.read_text())["resources"]
    }
    for path in manifests():
        if path.name.endswith(".example.yaml"):
            assert path.resolve() not in listed, path
        else:
            assert path.resolve() in listed, path


def test_both_overlays_build_on_the_base() -> None:
    """The two overlays exist and both take in the base."""
    for overlay in ("external-postgres", "in-cluster-postgres"):
        spec = yaml.safe_load((DEPLOY / "overlays" / overlay / "kustomization.yaml").read_text())
        assert "../../base" in spec["resources"], overlay


@pytest.mark.parametrize("overlay", ["external-postgres", "in-cluster-postgres"])
def test_kustomize_renders_each_overlay_into_valid_objects(overlay: str) -> None:
    """Where kubectl is installed, its kustomize renders the overlay, and what it renders is
    valid (nothing needs a cluster)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: its kustomize renders the overlays")
    done = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rendered = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    assert ("Deployment", "loom") in {(d["kind"], d["metadata"]["name"]) for d in rendered}
    for doc in rendered:
        kubernetes_validate.validate(doc, VERSION, strict=True)


# -- rights ---------------------------------------------------------------------------------


class RecordingApi:
    """A `KubeApi` in memory that notes each call as the (group, resource, verb) RBAC checks."""

    def __init__(self, trainjobs: bool) -> None:
        self.trainjobs = trainjobs
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.calls: set[tuple[str, str, str]] = set()
        self.pods = True

    def _note(self, api_version: str, kind: str, verb: str) -> None:
        group = api_version.rpartition("/")[0]
        self.calls.add((group, PLURALS[kind], verb))

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self._note(obj["apiVersion"], obj["kind"], "create")
        key = (obj["kind"], obj["metadata"]["name"])
        if key in self.objects:
            raise LaunchError(f"Kubernetes could not create {key} (409): AlreadyExists")
        made = copy.deepcopy(obj)
        made["metadata"]["uid"] = f"uid-{len(self.objects)}"
        self.objects[key] = made
        return copy.deepcopy(made)

    def get(self, api_version: str, kind: str, name: str) -> dict[str, Any] | None:
        self._note(api_version, kind, "get")
        found = self.objects.get((kind, name))
        return copy.deepcopy(found) if found else None

    def patch(self, api_version: str, kind: str, name: str, body: dict[str, Any]) -> None:
        self._note(api_version, kind, "patch")

    def delete(self, api_version: str, kind: str, name: str, grace_s: float | None = None) -> None:
        self._note(api_version, kind, "delete")
        self.objects.pop((kind, name), None)

    def listing(self, api_version: str, kind: str, selector: str) -> list[dict[str, Any]]:
        self._note(api_version, kind, "list")
        pod = {
            "metadata": {"name": "learner-pod", "labels": {INDEX_KEY: "0"}},
            "status": {"phase": "Running"},
        }
        return [pod] if kind == "Pod" and self.pods else []

    def served(self, api_version: str, kind: str) -> bool:
        return self.trainjobs  # API discovery: every authenticated account may ask

    def events(self, name: str) -> list[dict[str, Any]]:
        self.calls.add(("", "events", "list"))
        return []

    def nodes(self) -> list[dict[str, Any]] | None:
        self.calls.add(("", "nodes", "list"))
        ready = {"type": "Ready", "status": "True"}
        status = {"allocatable": {"cpu": "8", "memory": "32Gi"}, "conditions": [ready]}
        return [{"metadata": {"name": "node-1"}, "status": status}]


def launcher_calls() -> set[tuple[str, str, str]]:
    """Everything the launcher asks of the cluster over a job's life, as a Job and as a
    TrainJob: a launch, a launch again over its leftovers, following, halting, releasing and
    reading the capacity."""
    spec = {
        "job_id": "training-abc123def0",
        "attempt": 1,
        "cpus": 1,
        "gang": {"framework": "pytorch"},
        "env": {},
    }
    handle = "loom/training-abc123def0/learners/learner-1/attempt-1"
    learner = LearnerLaunch(handle=handle, spec=spec, token="t" * 40)
    calls: set[tuple[str, str, str]] = set()
    for trainjobs in (False, True):
        api = RecordingApi(trainjobs)
        launcher = KubernetesLauncher(api, KubeOptions())
        launcher.launch([learner])
        launcher.launch([learner])  # over what a launch the platform did not finish left
        launcher.status(handle)
        api.pods = False  # a workload that has made no pod yet: its events say why
        launcher._forget("training-abc123def0", 1)
        launcher.status(handle)
        api.pods = True
        launcher.terminate(handle, 5.0)
        launcher.release([handle])
        launcher.capacity()
        launcher.nodes()
        calls |= api.calls
    return calls


def granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
    }


def test_the_launchers_role_is_exactly_what_it_calls() -> None:
    """The Role in the jobs' namespace grants every call the launcher makes there, and nothing
    it does not make."""
    calls = {call for call in launcher_calls() if call[1] != "nodes"}
    role = one("Role", "loom-launcher")
    assert role["metadata"]["namespace"] == "loom-jobs"
    assert granted(role["rules"]) == calls


def test_the_nodes_reader_only_reads_nodes() -> None:
    """The optional ClusterRole grants the node listing the launcher makes, read-only."""
    assert ("", "nodes", "list") in launcher_calls()
    rules = granted(one("ClusterRole", "loom-nodes-reader")["rules"])
    assert ("", "nodes", "list") in rules
    assert {(group, resource) for group, resource, _ in rules} == {("", "nodes")}
    assert {verb for _, _, verb in rules} <= READ_VERBS


def test_no_rule_uses_a_wildcard_or_writes_cluster_wide() -> None:
    """No Role or ClusterRole names `*`, no ClusterRole may write, secrets are never listed."""
    for kind in ("Role", "ClusterRole"):
        for role in objects(kind):
            for group, resource, verb in granted(role["rules"]):
                assert "*" not in (group, resource, verb), (role["metadata"]["name"], verb)
                if kind == "ClusterRole":
                    assert verb not in WRITE_VERBS, (role["metadata"]["name"], resource, verb)
                if resource == "secrets":
                    assert verb not in {"list", "watch"}, "a Secret is read by its name only"


def test_bindings_give_the_platforms_account_its_roles() -> None:
    """The RoleBinding and ClusterRoleBinding name the platform's ServiceAccount in `loom`."""
    account = {"kind": "ServiceAccount", "name": "loom-platform", "namespace": "loom"}
    for kind, name in [
        ("RoleBinding", "loom-launcher"),
        ("ClusterRoleBinding", "loom-nodes-reader"),
    ]:
        binding = one(kind, name)
        assert binding["subjects"] == [account]
        assert binding["roleRef"]["name"] == name
    assert one("RoleBinding", "loom-launcher")["metadata"]["namespace"] == "loom-jobs"


def test_learners_account_has_no_token_and_the_platforms_has_one() -> None:
    """The learners' ServiceAccount (the one the platform names) mounts no token; the
    platform's does, in its own namespace."""
    learner = one("ServiceAccount", platform_env()["LOOM_KUBE_SERVICE_ACCOUNT"]["value"])
    assert learner["metadata"]["namespace"] == platform_env()["LOOM_KUBE_NAMESPACE"]["value"]
    assert learner["automountServiceAccountToken"] is False
    platform = one("ServiceAccount", "loom-platform")
    assert platform["automountServiceAccountToken"] is True
    assert one("Deployment", "loom")["spec"]["template"]["spec"]["serviceAccountName"] == (
        "loom-platform"
    )


# -- the platform's pod -------------------------------------------------------------------


def pod_templates() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{doc['kind']}/{doc['metadata']['name']}", doc["spec"]["template"]["spec"])
        for _, doc in documents()
        if doc["kind"] in ("Deployment", "StatefulSet")
    ]


@pytest.mark.parametrize(("where", "pod"), pod_templates(), ids=[w for w, _ in pod_templates()])
def test_every_pod_meets_the_restricted_standard(where: str, pod: dict[str, Any]) -> None:
    """Every pod is non-root with a numeric uid, RuntimeDefault seccomp, no privilege
    escalation, no capability, and a read-only root filesystem."""
    context = pod["securityContext"]
    assert context["runAsNonRoot"] is True
    assert isinstance(context["runAsUser"], int) and context["runAsUser"] > 0
    assert context["seccompProfile"]["type"] == "RuntimeDefault"
    for container in pod["containers"] + pod.get("initContainers", []):
        own = container["securityContext"]
        assert own["allowPrivilegeEscalation"] is False, container["name"]
        assert own["capabilities"]["drop"] == ["ALL"], container["name"]
        assert not own["capabilities"].get("add"), container["name"]
        assert own["readOnlyRootFilesystem"] is True, container["name"]
        assert own.get("privileged") is not True, container["name"]
        assert container["resources"]["limits"], container["name"]
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")


def test_platform_runs_as_the_images_user_with_writable_home_and_tmp() -> None:
    """The platform's uid is its image's (10001), and LOOM_HOME and /tmp are on volumes, the
    home on a claim: job checkpoints and results outlive the pod."""
    pod = one("Deployment", "loom")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 10001
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in platform_container()["volumeMounts"]}
    home = Path(platform_env()["LOOM_HOME"]["value"])
    at = next(Path(path) for path in mounts if home == Path(path) or Path(path) in home.parents)
    assert "persistentVolumeClaim" in mounts[str(at)]
    assert "/tmp" in mounts


def test_several_platform_replicas_share_their_home() -> None:
    """More than one replica only on a ReadWriteMany claim: each server keeps the uploads it
    receives under its LOOM_HOME."""
    deployment = one("Deployment", "loom")
    if deployment["spec"].get("replicas", 1) > 1:
        claim = one("PersistentVolumeClaim", "loom-home")
        assert "ReadWriteMany" in claim["spec"]["accessModes"]
    else:
        assert deployment["spec"]["strategy"]["type"] == "Recreate"


def test_deployment_sets_only_real_settings() -> None:
    """Every LOOM_ variable the Deployment sets is a field of `Settings`."""
    fields = {f"LOOM_{name.upper()}" for name in Settings.model_fields}
    names = [name for name in platform_env() if name.startswith("LOOM_")]
    assert {"LOOM_LAUNCHER", "LOOM_DATABASE_URL", "LOOM_PUBLIC_URL"} <= set(names)
    assert set(names) <= fields, set(names) - fields


def test_deployment_settings_are_valid_values() -> None:
    """The plain values the Deployment gives parse as `Settings` (launcher, port, home)."""
    values = {
        name.removeprefix("LOOM_").lower(): var["value"]
        for name, var in platform_env().items()
        if "value" in var
    }
    settings = Settings(**values)
    assert settings.launcher == "kubernetes"
    assert settings.host == "0.0.0.0"


def test_public_url_is_the_service() -> None:
    """Learners reach the platform at the Service's cluster name and port."""
    service = one("Service", "loom")
    url = platform_env()["LOOM_PUBLIC_URL"]["value"]
    found = re.fullmatch(r"http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local:(\d+)", url)
    assert found, url
    assert found[1] == service["metadata"]["name"]
    assert found[2] == service["metadata"]["namespace"]
    assert int(found[3]) in {port["port"] for port in service["spec"]["ports"]}
    assert service["spec"]["selector"].items() <= (
        one("Deployment", "loom")["spec"]["template"]["metadata"]["labels"].items()
    )


def test_probes_ask_routes_that_need_no_token() -> None:
    """Readiness asks /ready and liveness /health, both open without a token."""
    container = platform_container()
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        if probe in container:
            assert container[probe]["httpGet"]["path"] in OPEN_PATHS


def secret_keys_used() -> dict[str, bool]:
    """Each key of `loom-platform` the Deployment reads, and whether it is required."""
    used = {}
    for var in platform_env().values():
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            assert ref["name"] == "loom-platform", var["name"]
            used[ref["key"]] = not ref.get("optional", False)
    return used


def test_credentials_come_from_the_secret() -> None:
    """The database URL, admin token, secret keys and artifact store come from the Secret, never
    as plain values."""
    env = platform_env()
    for name in [
        "LOOM_DATABASE_URL",
        "LOOM_ADMIN_TOKEN",
        "LOOM_SECRET_KEYS",
        "LOOM_ARTIFACT_URL",
        "LOOM_ARTIFACT_OPTIONS",
    ]:
        assert "value" not in env[name], name
        assert env[name]["valueFrom"]["secretKeyRef"]["name"] == "loom-platform"


def test_example_secret_and_docs_give_every_key_the_deployment_reads() -> None:
    """The example Secret and the documented `kubectl create secret` hold the same keys as the
    Deployment reads, and the example holds placeholders only."""
    used = set(secret_keys_used())
    example = one("Secret", "loom-platform")
    assert set(example["stringData"]) == used
    assert all(
        "CHANGE-ME" in value or "example" in value for value in example["stringData"].values()
    )
    command = DOCS.read_text().split("create secret generic loom-platform", 1)[1].split("\n\n")[0]
    assert set(re.findall(r"--from-literal=([a-z-]+)=", command)) == used


def test_in_cluster_database_url_names_the_postgres_service() -> None:
    """The URL the docs give for the in-cluster database reaches the StatefulSet's Service, as
    its user and database."""
    service = one("Service", "loom-postgres")
    [container] = one("StatefulSet", "loom-postgres")["spec"]["template"]["spec"]["containers"]
    env = {var["name"]: var for var in container["env"]}
    port = service["spec"]["ports"][0]["port"]
    user, database = env["POSTGRES_USER"]["value"], env["POSTGRES_DB"]["value"]
    url = f"postgresql+psycopg://{user}:$PGPASSWORD@{service['metadata']['name']}:{port}/{database}"
    assert url in DOCS.read_text()


# -- namespaces and the network -----------------------------------------------------------


def test_namespaces_enforce_the_restricted_standard() -> None:
    """Both namespaces refuse pods that do not meet the `restricted` Pod Security Standard."""
    for name in ("loom", "loom-jobs"):
        labels = one("Namespace", name)["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted", name


def test_learners_namespace_denies_ingress_by_default() -> None:
    """In the jobs' namespace a policy selects every pod for ingress and allows none."""
    namespace = platform_env()["LOOM_KUBE_NAMESPACE"]["value"]
    deny = [
        p
        for p in objects("NetworkPolicy")
        if p["metadata"]["namespace"] == namespace
        and p["spec"]["podSelector"] == {}
        and "Ingress" in p["spec"]["policyTypes"]
    ]
    assert deny and all(not p["spec"].get("ingress") for p in deny)


def test_learners_cannot_reach_the_instance_metadata_service() -> None:
    """Every address learners may reach excludes the cloud's metadata service (node
    credentials)."""
    egress = one("NetworkPolicy", "learners-egress")
    assert egress["spec"]["podSelector"] == {}
    blocks = [
        peer["ipBlock"]
        for rule in egress["spec"]["egress"]
        for peer in rule.get("to", [])
        if "ipBlock" in peer
    ]
    assert all(rule.get("to") for rule in egress["spec"]["egress"]), "a rule without `to`"
    v4 = [block for block in blocks if ":" not in block["cidr"]]
    assert v4 and all(METADATA_ADDRESS in block.get("except", []) for block in v4)


def test_platform_port_is_open_and_the_database_only_to_the_platform() -> None:
    """The platform's pods take connections on their port; PostgreSQL's from the platform only."""
    platform = one("NetworkPolicy", "loom-platform")
    pod_labels = one("Deployment", "loom")["spec"]["template"]["metadata"]["labels"]
    assert platform["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    ports = [p["port"] for rule in platform["spec"]["ingress"] for p in rule["ports"]]
    assert ports == [8470]
    database = one("NetworkPolicy", "loom-postgres")
    [rule] = database["spec"]["ingress"]
    [peer] = rule["from"]
    assert peer["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_looms_runtime_restarts_nothing_and_mounts_no_token() -> None:
    """Loom restarts per gang: the runtime it offers TrainJobs never restarts a learner itself,
    and gives its pods what a TrainJob's patch cannot."""
    runtime = one("ClusterTrainingRuntime", "loom-distributed")
    spec = runtime["spec"]["template"]["spec"]
    assert spec["failurePolicy"]["maxRestarts"] == 0
    (node,) = spec["replicatedJobs"]
    assert node["name"] == "node"  # what the launcher's runtime patch names
    labels = node["template"]["metadata"]["labels"]
    assert labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    assert node["template"]["spec"]["backoffLimit"] == 0
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert pod["containers"][0]["name"] == "node"


def test_a_field_trainers_schema_does_not_know_is_refused() -> None:
    import jsonschema

    runtime = copy.deepcopy(one("ClusterTrainingRuntime", "loom-distributed"))
    runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["replica"] = 2  # a typo
    with pytest.raises(jsonschema.ValidationError, match="replica"):
        crd.validate(runtime)
