"""The serving tests' replica environments: built once, kept between runs under
`.venvs/serving-environments`, with the sources the tests' platforms use, so that a test and the
platform it starts compute the same digest and share one build."""

from __future__ import annotations

from pathlib import Path

from loom.environments import builder
from loom.environments.sections import Sources
from loom.serving import replica_env
from loom.serving.formats import Chosen
from tests.conftest import ROOT, package_sources

ENVIRONMENTS = ROOT / ".venvs" / "serving-environments"


def sources() -> Sources:
    """What the tests' platforms build with (`conftest.package_sources`), here."""
    found = package_sources()
    return Sources(
        root=ENVIRONMENTS,
        extra_index_urls=tuple(
            u for u in found.get("LOOM_ENVIRONMENTS_EXTRA_INDEX_URLS", "").split(",") if u
        ),
        find_links=tuple(u for u in found.get("LOOM_ENVIRONMENTS_FIND_LINKS", "").split(",") if u),
        index_strategy=found.get("LOOM_ENVIRONMENTS_INDEX_STRATEGY", "first-index"),
    )


def python_for(
    kind: str, requirements: list[str] | None = None, explainer: str | None = None
) -> Path:
    """The python of the environment a replica of this kind (with these requirements) runs
    in, built here if no run built it before."""
    plan = replica_env.plan(Chosen("", kind), requirements or [], explainer=explainer)  # type: ignore[arg-type]
    section = sources().section(plan)
    assert section is not None, f"a {kind} model needs no environment"
    ready = builder.ensure(builder.Request.from_spec(section), lambda _: None, lambda _: None)
    ready.release()
    return ready.python
