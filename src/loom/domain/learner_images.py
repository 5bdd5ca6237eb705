"""A learner image a manifest names, and the FfDL image fields that mean nothing here.

Pure. FfDL ran every learner in an image: its own per framework, or the user's, named three ways
— `framework: {name: custom, version: "tomcli/pytorch:latest"}` (the version is the image),
`framework.image_location: {registry, namespace}` (the image is `registry/namespace/name:version`),
and Loom's own `framework.image`. Loom's learners are processes in a sandbox, Ray actors or
Kubernetes pods: only the last can run an image, so elsewhere a job naming one is refused with
why, never run without it in silence.
"""

from __future__ import annotations

import re

from loom.domain.manifest import Framework, Manifest

# An image reference: a path with a slash, or a name with a tag or a digest.
_IMAGE = re.compile(r"[a-z0-9][a-z0-9._/-]*(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?")
CUSTOM = "custom"
RUNS_IMAGES = frozenset({"kubernetes"})


class ImageProblem(ValueError):
    """A manifest's image this platform cannot run, and the field that names it."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def version_is_image(framework: Framework) -> bool:
    """FfDL's `custom` framework: its `version` names the image (`tomcli/pytorch:0925mpi`)."""
    version = (framework.version or "").strip()
    return (
        framework.name.strip().lower() == CUSTOM
        and ("/" in version or ":" in version)
        and _IMAGE.fullmatch(version) is not None
    )


def learner_image(framework: Framework) -> tuple[str, str] | None:
    """The image the manifest asks its learners to run in, and the field that names it."""
    if framework.image:
        return framework.image, "framework.image"
    if version_is_image(framework):
        return (framework.version or "").strip(), "framework.version"
    location = framework.image_location
    if location is not None and location.registry and location.namespace:
        tag = (framework.version or "latest").strip()
        named = f"{location.registry}/{location.namespace}/{framework.name}:{tag}"
        return named, "framework.image_location"
    return None


def check_image(manifest: Manifest, launcher: str) -> None:
    """Refuse an image on a launcher that runs learners as processes (`ImageProblem`)."""
    found = learner_image(manifest.framework)
    if found is None or launcher in RUNS_IMAGES:
        return
    image, field = found
    raise ImageProblem(
        f"{image!r} is a learner image; only the Kubernetes launcher runs learners in images, "
        f"and this platform's launcher is `{launcher}`, which runs them as processes in its "
        "own Python. Name the framework the image holds instead (for example `name: pytorch, "
        "version: latest`), with `environment.pip` for what else it installed",
        field,
    )


def ignored_fields(manifest: Manifest) -> list[str]:
    """FfDL fields a manifest may carry that change nothing here, each with why: said in the
    submission's answer rather than dropped in silence."""
    notes = []
    framework = manifest.framework
    if framework.image_tag:
        notes.append(
            "framework.image_tag is ignored: it chose a build of FfDL's own learner images; "
            "Loom's learner is its own (on Kubernetes, LOOM_KUBE_IMAGE or `framework.image`)"
        )
    location = framework.image_location
    if location is not None and location.access_token:
        notes.append(
            "framework.image_location.access_token is not used to pull: the cluster's image "
            "pull secrets (LOOM_KUBE_IMAGE_PULL_SECRETS) are; it is stored sealed, never shown"
        )
    if location is not None and not (location.registry and location.namespace):
        notes.append(
            "framework.image_location is ignored: FfDL used it only with both `registry` and "
            "`namespace`"
        )
    metrics = manifest.evaluation_metrics
    if metrics is not None and metrics.image_tag:
        notes.append(
            "evaluation_metrics.image_tag is ignored: it chose FfDL's log-collector image; "
            "Loom's collectors are part of its learner"
        )
    return notes
