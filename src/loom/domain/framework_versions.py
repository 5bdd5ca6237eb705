"""`framework.version` as FfDL's users wrote it: a release, or the tag of the image FfDL ran.

Pure. FfDL picked a learner image by tag (`tensorflow/tensorflow:1.5.0-gpu-py3`,
`pytorch/pytorch:latest`), so its manifests name releases the way images are tagged: `latest`,
`1.5.0-py3`, `1.5.0-gpu-py3`, `2.1-gpu`, `latest-gpu-py3`, `gpu`. Loom installs wheels rather than
pulling images, so a tag is read for what it asks of the framework (its release, and a GPU or CPU
build) and of Python; `latest` or no version is the newest release this platform provides.

Which releases can be installed is a fact about the wheels published for each Python: a release
older than a framework's first wheel for this Python is refused at submission, naming the release,
why, and the supported range, as FfDL refused versions it had no image for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A release: 2, 2.21, 2.21.0, 2.21.0rc1 (pip's own spelling of a pre-release).
RELEASE = re.compile(r"\d+(\.\d+){0,3}((a|b|rc)\d+)?")
_LATEST = "latest"
# Words of an image tag that say nothing about the release or the build to install: the images'
# flavours (a development toolchain, a notebook server, a slimmer runtime).
_FLAVOURS = frozenset({"devel", "runtime", "jupyter", "full", "slim", "base"})
_CUDA = re.compile(r"(cuda|cudnn|cu)\d[\d.]*")
_PYTHON = re.compile(r"py(?P<major>\d)(\.?\d{1,2})?")
# Horovod's images named the frameworks they held: `0.13.10-tf1.9.0-torch0.4.0-py3.5`.
_COMPONENT = re.compile(r"(?P<name>tf|tensorflow|torch|pytorch|jax)(?P<release>\d[\d.]*)")
_COMPONENT_NAMES = {"tf": "tensorflow", "torch": "pytorch"}

# The oldest release of each framework with a wheel for each Python (from the frameworks' own
# release notes); the newest is the platform's own default release (environments.RUNTIMES).
FIRST_WHEEL = {
    "tensorflow": {"3.10": "2.8", "3.11": "2.12", "3.12": "2.16", "3.13": "2.20"},
    "pytorch": {"3.10": "1.11", "3.11": "1.13", "3.12": "2.2", "3.13": "2.5"},
    "jax": {"3.10": "0.3", "3.11": "0.4", "3.12": "0.4.17", "3.13": "0.4.34"},
}


class VersionProblem(ValueError):
    """A `framework.version` that asks for what this platform cannot run (message says why)."""


@dataclass(frozen=True)
class FrameworkVersion:
    """What a `framework.version` asks for. `release` None: the newest the platform provides;
    `gpu` None: the build that fits the job's `gpus`."""

    release: str | None = None
    gpu: bool | None = None
    python_major: int | None = None
    # Other frameworks the tag's image held, with their releases (Horovod's images).
    components: tuple[tuple[str, str], ...] = ()

    @property
    def latest(self) -> bool:
        return self.release is None


def read_version(text: str | None) -> FrameworkVersion:
    """Read a release or an FfDL image tag; `VersionProblem` for what is neither."""
    if text is None or not text.strip() or text.strip().lower() == _LATEST:
        return FrameworkVersion()
    words = text.strip().lower().split("-")
    release: str | None = None
    if RELEASE.fullmatch(words[0]):
        release, words = words[0], words[1:]
    elif words[0] == _LATEST:
        words = words[1:]
    gpu: bool | None = None
    python: int | None = None
    components: list[tuple[str, str]] = []
    for word in words:
        found = _PYTHON.fullmatch(word)
        component = _COMPONENT.fullmatch(word)
        if word in ("gpu", "cpu"):
            gpu = word == "gpu"
        elif _CUDA.fullmatch(word):
            gpu = True
        elif found is not None:
            python = int(found["major"])
        elif component is not None and RELEASE.fullmatch(component["release"]):
            name = component["name"]
            components.append((_COMPONENT_NAMES.get(name, name), component["release"]))
        elif word not in _FLAVOURS:
            raise VersionProblem(
                f"{text!r} is neither a release (2.21, 2.21.0) nor an image tag FfDL used "
                "(latest, 1.5.0-py3, 1.5.0-gpu-py3, 2.1-gpu, latest-gpu-py3)"
            )
    return FrameworkVersion(release, gpu, python, tuple(components))


def check_installable(
    framework: str, asked: FrameworkVersion, *, python: str, newest: str | None, original: str
) -> None:
    """Refuse a release this platform cannot install for its Python, naming the range (from the
    framework's first wheel for this Python to `newest`, the platform's own release)."""
    if asked.python_major is not None and asked.python_major != int(
        python.split(".", maxsplit=1)[0]
    ):
        raise VersionProblem(
            f"{framework} {original}: the tag asks for Python {asked.python_major}; this "
            f"platform runs Python {python}"
        )
    if asked.release is not None:
        check_release(framework, asked.release, python, newest)


def check_release(framework: str, release: str, python: str, newest: str | None) -> None:
    oldest = FIRST_WHEEL.get(framework, {}).get(python)
    if oldest is not None and release_key(release) < release_key(oldest):
        supported = f"{oldest}–{newest}" if newest else f"{oldest} and later"
        raise VersionProblem(
            f"{framework} {release} has no wheel for Python {python} here; supported: {supported}"
        )


def release_key(release: str) -> tuple[int, ...]:
    """A release as numbers for comparison (a pre-release sorts with its release)."""
    numbers = re.sub(r"(a|b|rc)\d+$", "", release).split(".")
    return tuple(int(n) for n in numbers)
