"""The detectors' environment for tests, as the platform builds it: the platform's environment
builder (its `uv`, this machine's package sources and index strategy) makes the monitoring
packages' environment over Loom's own, in a folder kept between test runs (`.venvs/`,
git-ignored), so that it is built once, not once per test platform."""

from __future__ import annotations

from pathlib import Path

from loom.api.platform import detector_environment
from loom.environments import builder
from loom.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENTS = ROOT / ".venvs" / "environments"


def platform_settings() -> dict[str, str]:
    """What a test platform is given so that its gateways reuse the environments built here."""
    return {"LOOM_ENVIRONMENTS_DIR": str(ENVIRONMENTS)}


def detector_python() -> str:
    """The interpreter of the environment a test platform's gateways run detectors in: the
    same section (hence the same digest) the platform writes in their specs, built the first
    time (minutes), then reused."""
    from tests.conftest import package_sources

    given = {**package_sources(), **platform_settings()}
    settings = Settings(**{k.removeprefix("LOOM_").lower(): v for k, v in given.items()})  # type: ignore[arg-type]
    section = detector_environment(settings).environment
    assert section is not None
    ready = builder.ensure(builder.Request.from_spec(section), _quiet, _quiet)
    ready.release()
    return str(ready.python)


def _quiet(line: str) -> None:
    del line
