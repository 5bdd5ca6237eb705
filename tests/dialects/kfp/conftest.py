"""The KFP dialect's tests compile their pipelines once per session, with the real SDK."""

from __future__ import annotations

import pytest

from tests.dialects.kfp.pipelines import CONTAINER, FEATURES, SHAPES, compile_all


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Our pipelines as kfp.compiler wrote them (YAML text, by name)."""
    sources = {"features": FEATURES, "container": CONTAINER, "shapes": SHAPES}
    return compile_all(sources, tmp_path_factory.mktemp("kfp"))
