"""The Kubernetes launcher on a real cluster: runs only where KUBECONFIG is set.

What it needs: a cluster the kubeconfig reaches; the learner image pushed where the cluster
pulls from (`LOOM_KUBE_IMAGE`); the namespace (`LOOM_KUBE_NAMESPACE`, default loom-jobs) with the
`loom-learner` service account of `deploy/kubernetes/`; and an address of this machine the pods
can reach (`LOOM_TEST_PUBLIC_URL`, e.g. http://10.0.0.5:8470, with `LOOM_TEST_PORT` its port).
Kubeflow Trainer v2 on the cluster adds the TrainJob case. None of this exists on the machines
Loom is developed on: there, the suite is skipped, and says so.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Server, make_zip, wait_for_state

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"),
        reason="no Kubernetes cluster: set KUBECONFIG (and LOOM_KUBE_IMAGE, "
        "LOOM_TEST_PUBLIC_URL) to run the launcher on a real one",
    ),
]
FINAL = {"COMPLETED", "FAILED", "HALTED"}
DIGITS = ROOT / "examples" / "digits-pytorch"


def digits_zip() -> bytes:
    return make_zip({p.name: p.read_text() for p in DIGITS.glob("*.py")})


def cluster_api() -> Any:
    from loom.launchers.kubernetes import ClusterApi

    return ClusterApi(os.environ.get("LOOM_KUBE_NAMESPACE", "loom-jobs"))


def platform(home: Path, kind: str) -> Server:
    url = os.environ.get("LOOM_TEST_PUBLIC_URL")
    if not url:
        pytest.skip("LOOM_TEST_PUBLIC_URL: an address of this machine the pods can reach")
    server = Server(
        home,
        LOOM_LAUNCHER="kubernetes",
        LOOM_KUBE_KIND=kind,
        LOOM_HOST="0.0.0.0",
        LOOM_PUBLIC_URL=url,
    )
    server.port = int(os.environ.get("LOOM_TEST_PORT", url.rsplit(":", 1)[-1].strip("/")))
    server.url = f"http://127.0.0.1:{server.port}"
    return server.start()


@pytest.fixture(params=["job", "trainjob"])
def on_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    if request.param == "trainjob" and not cluster_api().served(
        "trainer.kubeflow.org/v1alpha1", "TrainJob"
    ):
        pytest.skip("the cluster has no Kubeflow Trainer v2 (trainjobs.trainer.kubeflow.org)")
    server = platform(tmp_path / "home", request.param)
    yield server
    server.stop()


def test_digits_ddp_with_two_learners_completes(on_cluster: Server) -> None:
    manifest = (DIGITS / "manifest.yml").read_text()
    with on_cluster.client() as loom:
        job = loom.submit(manifest, digits_zip())
        done = wait_for_state(loom, job, FINAL, timeout=900, interval=2)
        assert done["state"] == "COMPLETED", done
        metrics = loom.metrics(job)
    assert metrics, "the learners' metrics reached the platform through its API"


def test_halt_then_delete_leaves_nothing_on_the_cluster(on_cluster: Server) -> None:
    from loom.kube.objects import selector

    manifest = (DIGITS / "manifest.yml").read_text().replace("--epochs 15", "--epochs 100000")
    with on_cluster.client() as loom:
        job = loom.submit(manifest, digits_zip())
        wait_for_state(loom, job, {"PROCESSING"}, timeout=900, interval=2)
        loom.halt(job)
        assert wait_for_state(loom, job, FINAL, timeout=300, interval=2)["state"] == "HALTED"
        loom.delete(job)
    api = cluster_api()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        left = api.listing("v1", "Pod", selector(job)) + api.listing("v1", "Secret", selector(job))
        if not left:
            return
        time.sleep(2)
    raise AssertionError(f"left on the cluster: {[o['metadata']['name'] for o in left]}")
