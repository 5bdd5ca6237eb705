"""One platform for the whole FfDL conformance suite (manifests, REST API, CLI verbs): each test
signs in as a user of its own, so they cannot see each other's jobs, and the suite pays for one
platform's start rather than one per module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import Server, stop_deployments, stop_learners


@pytest.fixture(scope="package")
def shared_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("ffdl") / "home").start()
    yield srv
    srv.stop()
    stop_deployments(srv.home)
    stop_learners(srv.home)
