"""Which job environment an image implies: a known framework image (`pytorch/pytorch:2.x`,
`tensorflow/tensorflow:2.x`, JAX's, Python's) runs in that framework's environment at the
image's version; any other image in the platform's own. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_RELEASE = re.compile(r"^v?(\d+\.\d+)")
# An image's repository (without registry and tag) → the framework runtime it carries.
KNOWN = {
    "pytorch/pytorch": "pytorch",
    "pytorch/manylinux-cpu": "pytorch",
    "kubeflow/pytorch-dist-mnist": "pytorch",
    "tensorflow/tensorflow": "tensorflow",
    "nvidia/jax": "jax",
    "jax-ml/jax": "jax",
    "nvidia/pytorch": "pytorch",
    "nvidia/tensorflow": "tensorflow",
    "horovod/horovod": "horovod",
    "library/python": "python",
    "python": "python",
}


@dataclass(frozen=True)
class ImageRuntime:
    """A framework runtime and its version (None: whatever the platform has), or, for an image
    that is not known, none: the platform's environment."""

    framework: str | None
    version: str | None
    known: bool


def repository(image: str) -> tuple[str, str]:
    """`ghcr.io/kubeflow/katib/mnist:latest` → (`kubeflow/katib/mnist`, `latest`)."""
    name, _, digest = image.partition("@")
    tag = ""
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1 :]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        name = rest  # a registry's host
    return name, tag or ("" if digest else "latest")


def runtime_of(image: str) -> ImageRuntime:
    name, tag = repository(image)
    framework = KNOWN.get(name) or KNOWN.get("/".join(name.split("/")[-2:]))
    if framework is None:
        return ImageRuntime(None, None, False)
    release = _RELEASE.match(tag)
    if framework in ("python", "horovod") or release is None:
        return ImageRuntime(framework, None, True)
    version = release.group(1)
    if framework == "jax" and version.startswith("2"):  # NVIDIA's year.month tags
        version = None
    return ImageRuntime(framework, version, True)


IMAGE_KEY = "image"  # where a translation keeps the pod's image, in `framework_options`


def place(manifest: dict[str, Any], runs_images: bool) -> None:
    """The pod's image, kept aside by the translation: the learners' image where the launcher
    runs images (`framework.image`, Kubernetes), and nothing elsewhere, where the environment
    it implies stands for it."""
    options = manifest.get("framework_options") or {}
    image = options.pop(IMAGE_KEY, None)
    if not options:
        manifest.pop("framework_options", None)
    if runs_images and image:
        manifest["framework"]["image"] = image
