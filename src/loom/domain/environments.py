"""What a job runs with: its framework's runtime and its own packages, as one plan with a digest.

Pure. The platform says what its own Python already holds (`provided`, package → version); a
plan lists only what must be installed beside it. Jobs whose plans have the same digest share
one environment, built once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from loom.domain.framework_versions import (
    FrameworkVersion,
    VersionProblem,
    check_installable,
    check_release,
    read_version,
)

MAX_PACKAGES = 200
MAX_REQUIREMENT = 300
MAX_REQUIREMENTS_FILE = 64 * 1024


@dataclass(frozen=True)
class Runtime:
    """A framework as FfDL named it: the package that brings it (None: plain Python), the
    version installed when the manifest names none, and the names it also answers to."""

    name: str
    package: str | None
    default_version: str | None = None
    aliases: tuple[str, ...] = ()
    gpu_package: str | None = None  # where the GPU build is another distribution
    also: tuple[str, ...] = ()  # other distributions of the same framework: a job's pin wins

    @property
    def distributions(self) -> set[str]:
        named = [self.package, self.gpu_package, *self.also]
        return {canonicalize_name(n.split("[")[0]) for n in named if n}


RUNTIMES = (
    Runtime("python", None, aliases=("custom", "python3")),
    Runtime("pytorch", "torch", "2.13", aliases=("torch",)),
    Runtime(
        "tensorflow",
        "tensorflow-cpu",
        "2.21",
        aliases=("tf", "keras"),
        gpu_package="tensorflow[and-cuda]",
        also=("tensorflow", "tensorflow-gpu", "tf-nightly", "tf-nightly-cpu"),
    ),
    Runtime("jax", "jax", "0.10", aliases=("flax",), also=("jaxlib",)),
    Runtime("sklearn", "scikit-learn", aliases=("scikit-learn", "scikit_learn")),
    # Horovod's launch (ranks, sizes, a hostfile) over whatever the job installs; FfDL's
    # horovod images held PyTorch and TensorFlow, which the job names as it would here.
    Runtime("horovod", None, aliases=("mpi", "openmpi")),
)

# FfDL accepted these; nothing installs them on a CPU machine today.
UNAVAILABLE = {
    "caffe": "Caffe 1 has no maintained Python wheel",
    "caffe2": "Caffe2 was merged into PyTorch and removed from it; use pytorch",
    "h2o3": "H2O-3 needs a Java runtime and its own cluster",
    "pytorchmpi": (
        "PyTorch's wheels are built without the MPI backend; use pytorch, whose learners get "
        "MASTER_ADDR, WORLD_SIZE and RANK for the gloo or nccl backend"
    ),
}


class EnvironmentProblem(ValueError):
    """What is wrong with a job's environment, and which manifest field says it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Plan:
    """A job's environment: Python's version and what to install beside the platform's own
    packages (sorted, so that equal lists share a digest)."""

    runtime: str
    python: str
    packages: tuple[str, ...]
    no_deps: tuple[str, ...] = ()  # installed after `packages`, without their dependencies

    def digest(self, sources: Sequence[str] = ()) -> str:
        """The environment's name on disk: its content, and where its packages come from."""
        content: list[object] = [self.python, list(self.packages), list(sources)]
        if self.no_deps:  # so that the plans there were before keep their names
            content.append(list(self.no_deps))
        text = json.dumps(content)
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def describe(self) -> str:
        named = [*self.packages, *self.no_deps]
        count = len(named)
        listed = ", ".join(named[:3]) + (", …" if count > 3 else "")
        return f"{self.runtime}, python {self.python}: {count} packages ({listed})"


def runtime_named(name: str) -> Runtime:
    """The runtime for a manifest's `framework.name`, or why there is none."""
    wanted = name.strip().lower()
    for runtime in RUNTIMES:
        if wanted == runtime.name or wanted in runtime.aliases:
            return runtime
    available = ", ".join(sorted(r.name for r in RUNTIMES))
    why = UNAVAILABLE.get(wanted)
    if why is not None:
        raise EnvironmentProblem(
            f"{name}: no runtime installed on this platform ({why}); available: {available}",
            "framework.name",
        )
    raise EnvironmentProblem(
        f"{name}: unknown framework; available: {available} (use `python` for your own)",
        "framework.name",
    )


def requirement_problem(text: str) -> str | None:
    """Why one requirement cannot be installed as given, or None."""
    if len(text) > MAX_REQUIREMENT:
        return f"longer than {MAX_REQUIREMENT} characters"
    if text.lstrip().startswith("-"):
        return "installer options (-r, -e, --index-url, …) are not allowed; name a package"
    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        return f"not a requirement: {exc}"
    if requirement.url:
        return "a direct URL or path is not allowed; name a package on the platform's index"
    return None


def read_requirements(text: str, source: str = "requirements.txt") -> list[str]:
    """A requirements file's packages: one per line, `#` comments and blank lines skipped."""
    if len(text) > MAX_REQUIREMENTS_FILE:
        raise EnvironmentProblem(
            f"{source} is larger than {MAX_REQUIREMENTS_FILE // 1024} KiB",
            "environment.requirements",
        )
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        problem = requirement_problem(line)
        if problem is not None:
            raise EnvironmentProblem(
                f"{source}, line {number}: {line!r}: {problem}", "environment.requirements"
            )
        found.append(line)
    return found


def plan(
    *,
    framework: str,
    version: str | None,
    pip: Sequence[str],
    requirements: Sequence[str],
    python: str,
    provided: Mapping[str, str],
    gpus: int = 0,
    install_framework: bool = True,
    no_deps: Sequence[str] = (),
) -> Plan | None:
    """What the job needs installed beside the platform's packages; None when it runs in the
    platform's Python as it is (its framework is there, at the version asked for, and it asks
    for nothing more)."""
    runtime = runtime_named(framework)
    asked = asked_version(runtime, version, python)
    packages = list(pip) + list(requirements)
    wanted = [(runtime, asked)] + [
        (runtime_named(name), FrameworkVersion(release, asked.gpu))
        for name, release in asked.components
    ]
    for each, its_version in wanted:
        framework_package = _framework_package(each, its_version, provided, gpus)
        if framework_package is not None and install_framework:
            named = {_name(p) for p in packages}
            if not named & each.distributions:  # the job's own pin wins
                packages.insert(0, framework_package)
    if not packages and not no_deps:
        return None
    if len(packages) + len(no_deps) > MAX_PACKAGES:
        raise EnvironmentProblem(
            f"{len(packages) + len(no_deps)} packages; at most {MAX_PACKAGES}", "environment.pip"
        )
    unique = sorted({normalized(p) for p in packages})
    alone = sorted({normalized(p) for p in no_deps})
    return Plan(runtime.name, python, tuple(unique), tuple(alone))


def asked_version(runtime: Runtime, version: str | None, python: str) -> FrameworkVersion:
    """What `framework.version` asks of this runtime (FfDL's image tags read), refused where
    this platform cannot install it. A framework this platform brings nothing for (`python`,
    `horovod`) takes no release of its own: only the releases its tag names (Horovod's
    `-tf1.9.0-torch0.4.0`) are read."""
    try:
        asked = read_version(version)
        if runtime.package is None:
            asked = FrameworkVersion(None, asked.gpu, asked.python_major, asked.components)
        check_installable(
            runtime.name,
            asked,
            python=python,
            newest=runtime.default_version,
            original=version or "",
        )
        for name, release in asked.components:
            component = runtime_named(name)
            check_release(component.name, release, python, component.default_version)
    except VersionProblem as exc:
        raise EnvironmentProblem(str(exc), "framework.version") from exc
    return asked


def _framework_package(
    runtime: Runtime, asked: FrameworkVersion, provided: Mapping[str, str], gpus: int
) -> str | None:
    """The framework's package when the platform's Python lacks it at the release asked for
    (`latest`: the platform's own, else the runtime's default). A GPU build where the job has
    GPUs, unless its tag asked for the CPU build; a GPU tag on a job without GPUs runs the CPU
    build, as FfDL's GPU images ran on a CPU node."""
    if runtime.package is None:
        return None
    have = provided.get(canonicalize_name(runtime.package))
    if have is not None and (asked.latest or _same_release(have, asked.release or "")):
        return None
    use_gpu = gpus > 0 and asked.gpu is not False
    package = runtime.gpu_package if use_gpu and runtime.gpu_package else runtime.package
    wanted = asked.release or runtime.default_version
    return f"{package}=={wanted}.*" if wanted else package


def _same_release(installed: str, asked: str) -> bool:
    """`2.13` asks for any 2.13.x; `2.13.0` for that one (local tags such as +cpu ignored)."""
    have = installed.split("+", 1)[0].split(".")
    want = asked.strip().split(".")
    return have[: len(want)] == want


def normalized(text: str) -> str:
    """One spelling per requirement (`Tabulate == 0.8.10` is `tabulate==0.8.10`), so that
    jobs asking for the same thing share an environment."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return " ".join(text.split())
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    marker = f"; {requirement.marker}" if requirement.marker else ""
    return f"{canonicalize_name(requirement.name)}{extras}{requirement.specifier}{marker}"


def _name(requirement: str) -> str:
    try:
        return canonicalize_name(Requirement(requirement).name)
    except InvalidRequirement:
        return requirement
