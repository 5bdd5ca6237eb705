"""A job's environment as the platform decides it: checked at submission (a bad requirement or a
framework this platform cannot run is refused there, with the field), and described in each
learner's spec, where the wrapper builds or reuses it on its own machine."""

from __future__ import annotations

import io
import sys
import zipfile
from pathlib import Path
from typing import Any

from loom.domain import environments
from loom.domain.errors import ManifestError
from loom.domain.learner_images import ImageProblem, check_image, version_is_image
from loom.domain.manifest import Manifest
from loom.environments.sections import Sources, provided
from loom.settings import Settings

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def plan_for(manifest: Manifest, code: bytes | Path) -> environments.Plan | None:
    """The job's environment plan; None when it runs in the platform's Python as it is."""
    wanted = manifest.environment
    python = (wanted.python if wanted else None) or PYTHON
    try:
        if python != PYTHON:
            raise environments.EnvironmentProblem(
                f"python {python}: not on this platform; available: {PYTHON}",
                "environment.python",
            )
        requirements: list[str] = []
        if wanted is not None and wanted.requirements:
            text = _read_from_code(code, wanted.requirements)
            requirements = environments.read_requirements(text, wanted.requirements)
        return environments.plan(
            framework=manifest.framework.name,
            # FfDL's `custom` framework names its image there, not a release.
            version=None if version_is_image(manifest.framework) else manifest.framework.version,
            pip=wanted.pip if wanted else [],
            requirements=requirements,
            python=python,
            provided=provided(),
            gpus=manifest.gpus,
            install_framework=wanted.install_framework if wanted else True,
        )
    except environments.EnvironmentProblem as exc:
        raise ManifestError(f"field `{exc.field}`: {exc.message}", field=exc.field) from exc


def check_learner_image(manifest: Manifest, launcher: str) -> None:
    """Refuse a learner image where the launcher cannot run one (a C101 naming the field)."""
    try:
        check_image(manifest, launcher)
    except ImageProblem as exc:
        raise ManifestError(f"field `{exc.field}`: {exc.message}", field=exc.field) from exc


def _read_from_code(code: bytes | Path, name: str) -> str:
    source = io.BytesIO(code) if isinstance(code, bytes) else code
    try:
        with zipfile.ZipFile(source) as archive:
            if archive.getinfo(name).file_size > environments.MAX_REQUIREMENTS_FILE:
                raise environments.EnvironmentProblem(
                    f"{name} is larger than {environments.MAX_REQUIREMENTS_FILE // 1024} KiB",
                    "environment.requirements",
                )
            with archive.open(name) as member:  # the size as stored may lie: read no more
                data = member.read(environments.MAX_REQUIREMENTS_FILE + 1)
    except KeyError:
        raise environments.EnvironmentProblem(
            f"{name}: no such file in the model code", "environment.requirements"
        ) from None
    except (OSError, zipfile.BadZipFile) as exc:
        raise environments.EnvironmentProblem(
            f"{name}: cannot be read from the model code ({exc})", "environment.requirements"
        ) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise environments.EnvironmentProblem(
            f"{name}: not UTF-8 text", "environment.requirements"
        ) from None


def sources_of(settings: Settings) -> Sources:
    """Where this platform's environments are built and their packages come from."""
    return Sources(
        root=settings.envs_dir,
        index_url=settings.environments_index_url,
        extra_index_urls=tuple(settings.environments_extra_index_urls),
        find_links=tuple(settings.environments_find_links),
        index_strategy=settings.environments_index_strategy,
        source_builds=settings.environments_source_builds,
        max_bytes=int(settings.environments_max_gb * 2**30),
        max_age_s=settings.environments_max_age_days * 86400.0,
        timeout_s=settings.environments_build_timeout_s,
    )


def spec_section(plan: environments.Plan | None, settings: Settings) -> dict[str, Any] | None:
    """What a learner's wrapper needs to build or reuse the environment."""
    return sources_of(settings).section(plan)
