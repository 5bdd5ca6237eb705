"""A Kubernetes pod template as a Loom learner runs it: its container's `command` and `args`
become a bash command run in the job's code folder, its `env` the learner's variables, its
resources the learner's share, and paths that only exist inside the image are mapped into the
job's own folders. Pure.

Paths. An image carries its code (`/opt/pytorch-mnist/mnist.py`); here the code comes with the
request (`loom apply -f FILE CODE`), so an absolute path whose tail is a file of the code runs
that file. Pod-local volumes (`emptyDir`, Katib's metrics folder, `/katib`, `/var/log/katib`)
become folders of the learner's own `LOG_DIR`, a claim (`persistentVolumeClaim`) a folder the
job's learners share; each path that starts with one is rewritten, in the command, its arguments,
the variables, and the metrics collector's path alike.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from loom.dialects.kinds import Note, Treatment
from loom.domain import spec_checks as check
from loom.domain.manifest import RESERVED_ENV

# The first folders of a path that belong to the system everywhere: never mapped, never code.
SYSTEM = frozenset(
    {"usr", "bin", "sbin", "lib", "lib64", "etc", "proc", "dev", "sys", "run", "boot"}
    | {"var", "tmp", "opt", "home", "root", "srv", "mnt", "media", "workspace"}
)
_NOT_CODE = frozenset({"usr", "bin", "sbin", "lib", "lib64", "etc", "proc", "dev", "sys", "run"})
_ABSOLUTE = re.compile(r"(?<![\w.$}/-])(/[A-Za-z0-9_.][\w.+@%-]*(?:/[\w.+@%-]+)*/?)")
_K8S_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?\d+)?)([A-Za-z]*)$")
_SUFFIX = {
    "": 1,
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
ENTRYPOINT = "loom.dev/entrypoint"
# Programs an image has on its PATH that a learner runs through its Python instead.
CONSOLE_SCRIPTS = {"torchrun": ["python", "-m", "torch.distributed.run"]}

CONTAINER_FIELDS = ("name", "image", "command", "args", "env", "workingDir", "resources")
# Container fields that mean nothing for a learner in Loom's sandbox, and why.
CONTAINER_IGNORED = {
    "imagePullPolicy": "no image is pulled: the learner runs in a job environment",
    "ports": "each learner gets its own ports; the replicas' variables name them",
    "securityContext": "every learner runs confined in Loom's sandbox, as an unprivileged user",
    "livenessProbe": "a learner is watched by its wrapper, not probed",
    "readinessProbe": "a learner is watched by its wrapper, not probed",
    "startupProbe": "a learner is watched by its wrapper, not probed",
    "lifecycle": "no hooks run around a learner",
    "terminationMessagePath": "a learner's end is told by its wrapper",
    "terminationMessagePolicy": "a learner's end is told by its wrapper",
    "stdin": "a learner has no standard input",
    "stdinOnce": "a learner has no standard input",
    "tty": "a learner has no terminal",
    "volumeMounts": "mapped: see the volumes",
}
POD_FIELDS = ("containers", "initContainers", "volumes", "restartPolicy")
POD_IGNORED = {
    "nodeSelector": "learners are placed by Loom's scheduler",
    "affinity": "learners are placed by Loom's scheduler",
    "tolerations": "learners are placed by Loom's scheduler",
    "schedulerName": "learners are placed by Loom's scheduler",
    "priorityClassName": "Loom queues by the job's priority",
    "serviceAccountName": "a learner holds no cluster credentials",
    "serviceAccount": "a learner holds no cluster credentials",
    "automountServiceAccountToken": "a learner holds no cluster credentials",
    "imagePullSecrets": "no image is pulled: the learner runs in a job environment",
    "securityContext": "every learner runs confined in Loom's sandbox",
    "hostNetwork": "a learner's network is its sandbox's",
    "dnsPolicy": "a learner's network is its sandbox's",
    "dnsConfig": "a learner's network is its sandbox's",
    "terminationGracePeriodSeconds": "a halt gives learners the platform's grace period",
    "enableServiceLinks": "no Kubernetes services are in a learner's variables",
    "hostname": "learners are named by their job and rank",
    "subdomain": "learners are named by their job and rank",
    "shareProcessNamespace": "a pod is one learner",
    "runtimeClassName": "a learner runs in Loom's sandbox",
    "topologySpreadConstraints": "learners are placed by Loom's scheduler",
}


class Notes:
    """The notes of one translation, each said once."""

    def __init__(self) -> None:
        self._found: dict[tuple[str, str], Note] = {}

    def add(self, where: str, treatment: Treatment, why: str) -> None:
        self._found.setdefault((treatment, why), Note(where, treatment, why))

    def all(self) -> tuple[Note, ...]:
        return tuple(self._found.values())


@dataclass
class Paths:
    """Where an image's paths are here: the code's files (zip names), and each mapped root
    (`/katib`) with the folder it becomes (`${LOG_DIR}/katib`)."""

    code: frozenset[str] = frozenset()
    mounts: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # brought with the code (ConfigMaps)
    entrypoint: list[str] | None = None  # the image's, for containers without a command

    def mount(self, path: str, folder: str) -> None:
        """`path` (an absolute folder) becomes `folder`, a `${VAR}/…` expression."""
        self.mounts[path.rstrip("/") or "/"] = folder

    def mapped(self, path: str) -> str | None:
        """A mapped path as a `${VAR}/…` expression; None if no root holds it."""
        for root in sorted(self.mounts, key=len, reverse=True):
            if path == root or path.startswith(root + "/"):
                return self.mounts[root] + path[len(root) :]
        return None

    def in_code(self, path: str) -> str | None:
        """The file of the code that an image's absolute path stands for, by its longest tail."""
        parts = PurePosixPath(path).parts[1:]
        if not parts or parts[0] in _NOT_CODE:
            return None
        for start in range(len(parts)):
            tail = "/".join(parts[start:])
            if tail in self.code or tail + "/" in self.code:
                return tail
        return None


def mount_root(path: str) -> str:
    """What a pod-local mount at `path` maps: its first folder when that is no system folder
    (so `/logs/test` maps `/logs`, which the trial writes beside it), else the path itself."""
    parts = PurePosixPath(path).parts
    if len(parts) > 1 and parts[1] not in SYSTEM:
        return "/" + parts[1]
    return path.rstrip("/")


# -- words -------------------------------------------------------------------------------------
Segment = tuple[bool, str]  # (is a variable expression, text)


def _segments(text: str, paths: Paths, where: str, notes: Notes) -> list[Segment]:
    """`text` cut into literal text and `${VAR}` expressions: Kubernetes' `$(VAR)` references
    and mapped paths become the latter."""
    out: list[Segment] = []
    position = 0
    for match in _ABSOLUTE.finditer(text):
        out += _variables(text[position : match.start()])
        path = match.group(1)
        mapped = paths.mapped(path)
        code = None if mapped is not None else paths.in_code(path)
        if mapped is not None:
            out.append((True, mapped))
        elif code is not None:
            out.append((True, "${MODEL_DIR}/" + code))
            notes.add(
                where,
                "approximated",
                f"{path} is the image's file; the code's {code} runs in its place",
            )
        else:
            out += _variables(path)
        position = match.end()
    return out + _variables(text[position:])


def _variables(text: str) -> list[Segment]:
    """Kubernetes' `$(NAME)` as `${NAME}`, and `$$` as a plain `$`."""
    out: list[Segment] = []
    position = 0
    for match in _K8S_VAR.finditer(text):
        out.append((False, text[position : match.start()]))
        out.append((False, "$") if match.group(0) == "$$" else (True, "${" + match.group(1) + "}"))
        position = match.end()
    out.append((False, text[position:]))
    return [s for s in out if s[1]]


def bash_word(text: str, paths: Paths, where: str, notes: Notes) -> str:
    """One argument as bash reads it back unchanged, but for its variables and mapped paths."""
    segments = _segments(text, paths, where, notes)
    if not segments:
        return "''"
    return "".join(f'"{value}"' if variable else shlex.quote(value) for variable, value in segments)


def expand(text: str, paths: Paths) -> str:
    """A path as a `${VAR}` expression the learner's wrapper expands (a collector's file)."""
    mapped = paths.mapped(text)
    return mapped if mapped is not None else text


# -- quantities --------------------------------------------------------------------------------
def quantity(value: Any, where: str) -> float:
    """A Kubernetes quantity (`500m`, `2`, `4Gi`, `1e9`) as a number."""
    match = _QUANTITY.match(str(value).strip()) if isinstance(value, str | int | float) else None
    if match is None or match.group(2) not in _SUFFIX or isinstance(value, bool):
        raise check.fail(where, f"{value!r} is not a Kubernetes quantity (such as 500m, 2, 4Gi)")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


@dataclass(frozen=True)
class Share:
    """A container's resources: limits where given, else requests."""

    cpus: float | None = None
    memory: int | None = None
    gpus: int = 0

    def manifest(self) -> dict[str, Any]:
        """The manifest's fields for this share: those given (Loom's defaults for the rest)."""
        found: dict[str, Any] = {"gpus": self.gpus}
        if self.cpus is not None:
            found["cpus"] = self.cpus
        if self.memory is not None:
            found["memory"] = f"{max(1, -(-self.memory // 2**20))}MiB"  # whole MiB, rounded up
        return found

    def most(self, other: Share) -> Share:
        def bigger(a: Any, b: Any) -> Any:
            return b if a is None else a if b is None else max(a, b)

        return Share(
            bigger(self.cpus, other.cpus),
            bigger(self.memory, other.memory),
            max(self.gpus, other.gpus),
        )


def share(resources: Any, where: str, notes: Notes) -> Share:
    found = check.mapping(resources or {}, where)
    check.known(found, ("limits", "requests", "claims"), where)
    if "claims" in found:
        notes.add(f"{where}.claims", "ignored", "dynamic resource claims are not offered")
    limits = check.mapping(found.get("limits") or {}, f"{where}.limits")
    requests = check.mapping(found.get("requests") or {}, f"{where}.requests")
    merged = {**requests, **limits}
    at = {key: f"{where}.{'limits' if key in limits else 'requests'}.{key}" for key in merged}
    cpus = memory = None
    gpus = 0
    for key, value in merged.items():
        if key == "cpu":
            cpus = quantity(value, at[key])
        elif key == "memory":
            memory = int(quantity(value, at[key]))
        elif key in GPU_RESOURCES:
            count = quantity(value, at[key])
            if not count.is_integer():
                raise check.fail(at[key], f"GPUs are whole, got {value!r}")
            gpus = int(count)
        else:
            notes.add(at[key], "ignored", f"{key} is not a resource Loom schedules")
    if limits and requests and any(limits.get(k) != requests.get(k) for k in requests):
        notes.add(f"{where}.requests", "approximated", "a learner is given its limits")
    return Share(cpus if cpus is None or cpus > 0 else None, memory, gpus)


# -- containers and pods -----------------------------------------------------------------------
@dataclass
class Container:
    """One container as a learner runs it."""

    name: str
    image: str | None
    command: str  # bash
    env: dict[str, str]  # name → a bash word
    share: Share

    def script(self) -> str:
        """The command with the container's variables exported before it."""
        exports = "".join(f"export {name}={word}; " for name, word in self.env.items())
        return exports + self.command


def env_of(value: Any, where: str) -> dict[str, str]:
    """`env`: plain values, and the few references a learner can answer."""
    found: dict[str, str] = {}
    for at, entry in check.entries(value, where, ("name", "value", "valueFrom")):
        name = check.name(entry.get("name"), f"{at}.name")
        if "valueFrom" in entry:
            found[name] = _reference(entry["valueFrom"], f"{at}.valueFrom")
        else:
            raw = entry.get("value", "")
            found[name] = "" if raw is None else check.text(raw, f"{at}.value")
    return found


def _reference(value: Any, where: str) -> str:
    source = check.mapping(value, where)
    field_ref = source.get("fieldRef")
    if isinstance(field_ref, dict):
        path = field_ref.get("fieldPath")
        known = {
            "metadata.name": "${TRAINING_ID}-${LEARNER_ID}",
            "metadata.namespace": "default",
            "status.podIP": "127.0.0.1",
            "spec.nodeName": "localhost",
        }
        if path in known:
            return known[path]
    raise check.fail(
        where,
        "only fieldRef metadata.name, metadata.namespace, status.podIP and spec.nodeName are "
        "answered here; a Secret's or ConfigMap's value would be stored in the job's manifest "
        "in clear: give the value, or read the file the code brings",
    )


def container(
    spec: dict[str, Any], where: str, paths: Paths, notes: Notes, *, entry: list[str] | None = None
) -> Container:
    """A container's command (or `entry`, the words that replace it), env and share."""
    check.known(spec, (*CONTAINER_FIELDS, *CONTAINER_IGNORED, "envFrom"), where)
    for key, why in CONTAINER_IGNORED.items():
        if key in spec and key != "volumeMounts":
            notes.add(f"{where}.{key}", "ignored", why)
    if "envFrom" in spec:
        raise check.fail(
            f"{where}.envFrom",
            "a ConfigMap's or Secret's values would be stored in the job's manifest in clear; "
            "list the variables under env",
        )
    name = check.text(spec.get("name") or "", f"{where}.name")
    image = spec.get("image")
    if image is not None:
        image = check.text(image, f"{where}.image")
        if "${" in image:
            raise check.fail(f"{where}.image", "a trial parameter cannot choose the image here")
    words = entry if entry is not None else _words(spec, where, paths.entrypoint)
    if words and words[0] in CONSOLE_SCRIPTS:
        notes.add(
            f"{where}.command",
            "approximated",
            f"{words[0]} runs as {' '.join(CONSOLE_SCRIPTS[words[0]])}",
        )
        words = [*CONSOLE_SCRIPTS[words[0]], *words[1:]]
    command = " ".join(bash_word(w, paths, f"{where}.command", notes) for w in words)
    working = spec.get("workingDir")
    if working:
        folder = check.text(working, f"{where}.workingDir")
        command = _in_folder(folder, command, paths, where, notes)
    env = {}
    for key, value in env_of(spec.get("env"), f"{where}.env").items():
        if key in RESERVED_ENV or key.startswith("LOOM_"):
            notes.add(f"{where}.env", "ignored", f"{key} is set by Loom for every learner")
        else:
            env[key] = bash_word(value, paths, f"{where}.env", notes)
    resources = share(spec.get("resources"), f"{where}.resources", notes)
    return Container(name, image, command, env, resources)


def texts(value: Any, where: str) -> list[str]:
    return [check.text(w, f"{where}[{i}]") for i, w in enumerate(check.sequence(value, where))]


def _words(spec: dict[str, Any], where: str, entrypoint: list[str] | None) -> list[str]:
    command = texts(spec.get("command"), f"{where}.command") or list(entrypoint or [])
    args = texts(spec.get("args"), f"{where}.args")
    if not command:
        raise check.fail(
            f"{where}.command",
            "is required here: the image's own entrypoint is not known outside the image; "
            f"give the program to run (e.g. [python3, train.py]), or name it in the object's "
            f"annotation {ENTRYPOINT} (e.g. 'python3 /opt/mnist/mnist.py')",
        )
    return command + args


def entrypoint_of(document: dict[str, Any]) -> list[str] | None:
    """The image's entrypoint, as the object's `loom.dev/entrypoint` annotation says it (the
    image is not pulled here, so its own is not known)."""
    metadata = document.get("metadata") if isinstance(document.get("metadata"), dict) else {}
    text = ((metadata or {}).get("annotations") or {}).get(ENTRYPOINT)
    if text is None:
        return None
    try:
        return shlex.split(str(text))
    except ValueError as exc:
        raise check.fail(
            f"metadata.annotations.{ENTRYPOINT}", f"not a command line: {exc}"
        ) from None


def _in_folder(folder: str, command: str, paths: Paths, where: str, notes: Notes) -> str:
    mapped = paths.mapped(folder)
    if mapped is not None:
        return f'mkdir -p "{mapped}" && cd "{mapped}" && {command}'
    code = paths.in_code(folder) if folder.startswith("/") else folder
    if code is not None and code != folder:
        why = f"{folder} is the image's; the code's {code} is the working folder"
        notes.add(f"{where}.workingDir", "approximated", why)
    if code is not None:
        return f"cd {shlex.quote(code)} && {command}"
    why = f"{folder} is the image's; the command runs in the code's folder (MODEL_DIR)"
    notes.add(f"{where}.workingDir", "approximated", why)
    return command


@dataclass
class Pod:
    main: Container
    init: list[Container]
    restart_policy: str | None

    def script(self) -> str:
        """The init containers' commands, in order, then the main one's (each in a subshell,
        so that one's variables and folder are its own)."""
        steps = [f"( {c.script()} )" for c in self.init]
        return " && ".join([*steps, self.main.script()]) if steps else self.main.script()


ConfigMaps = Callable[[str], dict[str, str] | None]


def pod(
    template: Any,
    where: str,
    paths: Paths,
    notes: Notes,
    *,
    primary: str | None = None,
    config_maps: ConfigMaps = lambda _name: None,
    entry: list[str] | None = None,
) -> Pod:
    """A pod template's learner: its main container (`primary` by name, else the only one),
    its init containers run before it, its volumes mapped."""
    found = check.mapping(template or {}, where)
    check.known(found, ("metadata", "spec"), where)
    if found.get("metadata"):
        notes.add(f"{where}.metadata", "ignored", "a learner has no pod labels or annotations")
    at = f"{where}.spec"
    spec = check.section(found, "spec", where, "the pod's containers")
    check.known(spec, (*POD_FIELDS, *POD_IGNORED), at)
    for key, why in POD_IGNORED.items():
        if key in spec:
            notes.add(f"{at}.{key}", "ignored", why)
    volumes = _volumes(spec.get("volumes"), f"{at}.volumes", paths, config_maps)
    containers = list(check.entries(spec.get("containers"), f"{at}.containers", _ALL))
    if not containers:
        raise check.fail(f"{at}.containers", "a pod needs a container")
    index = _primary(containers, primary, f"{at}.containers")
    for other, (other_at, _) in enumerate(containers):
        if other != index:
            raise check.fail(
                other_at,
                "a learner runs one container; sidecars are not run (put what it does in the "
                f"main container{', ' + repr(primary) if primary else ''})",
            )
    main_at, main = containers[index]
    _mounts(main.get("volumeMounts"), f"{main_at}.volumeMounts", volumes, paths)
    inits = []
    for init_at, init in check.entries(spec.get("initContainers"), f"{at}.initContainers", _ALL):
        _mounts(init.get("volumeMounts"), f"{init_at}.volumeMounts", volumes, paths)
        inits.append(container(init, init_at, paths, notes))
    if inits:
        notes.add(
            f"{at}.initContainers",
            "approximated",
            "run one after the other before the main container, on each learner",
        )
    policy = spec.get("restartPolicy")
    return Pod(
        container(main, main_at, paths, notes, entry=entry),
        inits,
        None if policy is None else check.text(policy, f"{at}.restartPolicy"),
    )


_ALL = (*CONTAINER_FIELDS, *CONTAINER_IGNORED, "envFrom")


def _primary(containers: list[tuple[str, dict[str, Any]]], name: str | None, where: str) -> int:
    if len(containers) == 1:
        return 0
    for index, (_, spec) in enumerate(containers):
        if spec.get("name") == name:
            return index
    raise check.fail(
        where, f"several containers and none named {name!r}: which one is the learner?"
    )


def _volumes(value: Any, where: str, paths: Paths, config_maps: ConfigMaps) -> dict[str, str]:
    """Each volume's folder here, by name."""
    found = {}
    for at, volume in check.entries(value, where, _VOLUME_KINDS):
        name = check.name(volume.get("name"), f"{at}.name")
        if "emptyDir" in volume:
            found[name] = "${LOG_DIR}/volumes/" + name
        elif "persistentVolumeClaim" in volume:
            claim = check.mapping(volume["persistentVolumeClaim"], f"{at}.persistentVolumeClaim")
            claim_name = check.name(claim.get("claimName"), f"{at}.persistentVolumeClaim.claimName")
            found[name] = "${JOB_STATE_DIR}/volumes/" + claim_name
        elif "configMap" in volume:
            found[name] = _config_map(volume["configMap"], f"{at}.configMap", paths, config_maps)
        else:
            kind = next((k for k in volume if k != "name"), "?")
            raise check.fail(
                f"{at}.{kind}",
                "only emptyDir, persistentVolumeClaim and configMap volumes are offered (a "
                "learner sees its job's folders and nothing of the machine's)",
            )
    return found


_VOLUME_KINDS = (
    *("name", "emptyDir", "persistentVolumeClaim", "configMap", "secret", "hostPath", "nfs"),
    *("projected", "downwardAPI", "csi", "ephemeral", "image"),
)


def _config_map(value: Any, where: str, paths: Paths, config_maps: ConfigMaps) -> str:
    """A ConfigMap's files, brought with the code (`.configmaps/NAME/KEY`)."""
    spec = check.mapping(value, where)
    name = check.name(spec.get("name"), f"{where}.name")
    data = config_maps(name)
    if data is None:
        raise check.fail(
            f"{where}.name", f"no ConfigMap {name!r}: apply it first, or in the same file"
        )
    items = spec.get("items")
    chosen = {
        str(i["key"]): str(i.get("path") or i["key"])
        for i in check.sequence(items, f"{where}.items")
        if isinstance(i, dict) and "key" in i
    } or {k: k for k in data}
    for key, path in chosen.items():
        if key not in data:
            raise check.fail(f"{where}.items", f"ConfigMap {name} has no key {key!r}")
        paths.files[f".configmaps/{name}/{path}"] = data[key]
    return "${MODEL_DIR}/.configmaps/" + name


def _mounts(value: Any, where: str, volumes: dict[str, str], paths: Paths) -> None:
    keys = ("name", "mountPath", "subPath", "readOnly", "mountPropagation", "subPathExpr")
    for at, mount in check.entries(value, where, keys):
        name = check.name(mount.get("name"), f"{at}.name")
        if name not in volumes:
            raise check.fail(f"{at}.name", f"no volume {name!r} in the pod's volumes")
        target = check.text(mount.get("mountPath") or "", f"{at}.mountPath")
        if not target.startswith("/"):
            raise check.fail(f"{at}.mountPath", f"{target!r} is not an absolute path")
        sub = mount.get("subPath")
        paths.mount(target, volumes[name] + (f"/{check.text(sub, f'{at}.subPath')}" if sub else ""))
