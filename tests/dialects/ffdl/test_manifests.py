"""FfDL's manifests as its users wrote them, submitted to a real platform: the framework's
version forms (releases, image tags, `latest`) are read, and a release this platform cannot
install is refused naming the supported ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom.client import ClientError, LoomClient
from tests.conftest import database_free, make_zip, wait_for_state

pytestmark = [pytest.mark.integration, database_free]

SEED = Path(__file__).parents[2] / "domain" / "ffdl_manifests"
FINAL = {"COMPLETED", "FAILED", "HALTED"}

# FfDL's etc/examples/pytorch-model manifest, its data store pointed at nothing (the code below
# makes its own data), and its code replaced by a small one that trains for a step.
PYTORCH_LATEST = """\
name: mnist-pytorch-model
description: pytorch MNIST model
version: "1.0"
gpus: 0
cpus: 0.5
memory: 1000MiB
framework:
  name: pytorch
  version: "latest"
  command: >
    python mnist.py --epochs 1
"""
TRAIN = """\
import sys, torch
model = torch.nn.Linear(4, 2)
loss = model(torch.randn(8, 4)).pow(2).mean()
loss.backward()
print(f"torch {torch.__version__} epochs {sys.argv[-1]} loss {loss.item():.4f}")
"""


def test_the_seeds_tensorflow_manifest_is_refused_naming_the_supported_releases(
    tenant: LoomClient,
) -> None:
    """`version: 1.5.0-py3` is not a format error: TF 1.5 has no wheel for this Python, said so."""
    text = (SEED / "tf_convolutional_network_tutorial.yml").read_text()
    with pytest.raises(ClientError) as refused:
        tenant.submit(text, make_zip({"convolutional_network.py": "print(1)\n"}))
    assert refused.value.status == 400
    assert refused.value.error_code == "C101"
    assert "tensorflow 1.5.0 has no wheel for Python 3.11 here; supported: 2.12–2.21" in str(
        refused.value
    )
    assert "is not a release" not in str(refused.value)


def test_a_release_this_platform_installs_is_accepted_in_ffdls_tag_form(
    tenant: LoomClient,
) -> None:
    """The same manifest with `2.21.0-py3` is queued (and halted here before it installs)."""
    text = (SEED / "tf_convolutional_network_tutorial.yml").read_text()
    text = text.replace('"1.5.0-py3"', '"2.21.0-py3"')
    assert '"2.21.0-py3"' in text
    job_id = tenant.submit(text, make_zip({"convolutional_network.py": "print(1)\n"}))
    tenant.halt(job_id)
    assert wait_for_state(tenant, job_id, FINAL)["state"] == "HALTED"


def test_pytorch_latest_runs_on_the_platforms_own_torch(tenant: LoomClient) -> None:
    """FfDL's PyTorch examples say `latest`: the job runs, on the torch the platform has."""
    job_id = tenant.submit(PYTORCH_LATEST, make_zip({"mnist.py": TRAIN}))
    job = wait_for_state(tenant, job_id, FINAL, timeout=120)
    assert job["state"] == "COMPLETED", job
    lines = [line["line"] for line in tenant.logs(job_id)]
    assert any(line.startswith("torch 2.13") and "epochs 1" in line for line in lines), lines


def test_a_custom_image_is_refused_on_the_local_launcher(tenant: LoomClient) -> None:
    """FfDL's `custom` framework names an image: refused here, with the field, never ignored."""
    text = PYTORCH_LATEST.replace("name: pytorch", "name: custom").replace(
        '"latest"', '"tomcli/pytorch:latest"'
    )
    with pytest.raises(ClientError) as refused:
        tenant.submit(text, make_zip({"mnist.py": TRAIN}))
    assert refused.value.status == 400
    assert "framework.version" in str(refused.value)
    assert "only the Kubernetes launcher runs learners in images" in str(refused.value)


def test_ffdl_image_tags_are_named_in_the_answer(tenant: LoomClient) -> None:
    """A learner image tag FfDL chose builds with is accepted and reported as ignored."""
    text = PYTORCH_LATEST.replace('version: "latest"', 'version: "latest"\n  image_tag: v1.2')
    answer = tenant.submit_job(text, make_zip({"mnist.py": TRAIN}))
    tenant.halt(answer["id"])
    assert [w.split(" ", 1)[0] for w in answer["warnings"]] == ["framework.image_tag"]
