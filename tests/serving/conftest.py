"""A platform shared by the serving-code tests of a whole run (environments kept between runs,
`tests/serving/environments.py`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from loom.client import LoomClient
from tests.conftest import Server, stop_deployments
from tests.serving.environments import ENVIRONMENTS


@pytest.fixture(scope="session")
def code_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One platform for the tests of custom predictors, formats, transformers and graphs."""
    home = tmp_path_factory.mktemp("serving-code") / "home"
    server = Server(home, LOOM_ENVIRONMENTS_DIR=str(ENVIRONMENTS)).start()
    yield server
    server.stop()
    stop_deployments(server.home)


@pytest.fixture(scope="session")
def code_owner(code_platform: Server) -> Iterator[LoomClient]:
    with code_platform.client() as client:
        yield client
