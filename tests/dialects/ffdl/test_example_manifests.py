"""Every manifest shape of FfDL's examples (`etc/examples/*/manifest.yml`, its demos, its
community models and its converter's sample, rewritten here in the same shapes) parses, and each
meets at submission on this platform what the table in docs/ffdl.md says: accepted, or refused
naming the field, the release or framework, and why — never a format error."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom.domain.errors import ManifestError
from loom.domain.manifest import parse_manifest
from loom.lifecycle.environments import check_learner_image, plan_for

EXAMPLES = Path(__file__).parents[2] / "domain" / "ffdl_manifests" / "examples"
TF1 = "tensorflow 1.5.0 has no wheel for Python 3.11 here; supported: 2.12–2.21"
IMAGE = "only the Kubernetes launcher runs learners in images"
# example → None (accepted) or what the refusal says.
OUTCOMES: dict[str, str | None] = {
    "h2o-automl": "h2o3: no runtime installed on this platform",
    "fashion-cpu": None,
    "fashion-gpu": None,
    "converter-sample": None,
    "c10d-dist-onnx": IMAGE,
    "c10d-native": IMAGE,
    "pytorch-launch-dist": IMAGE,
    "c10d-mpi": "PyTorch's wheels are built without the MPI backend; use pytorch",
    "c10d-onnx-mpi": "PyTorch's wheels are built without the MPI backend; use pytorch",
    "pytorch-dist-onnx": None,
    "pytorch-model": None,
    "caffe-gpu": "caffe: no runtime installed on this platform",
    "caffe-cpu": "caffe: no runtime installed on this platform",
    "caffe2": "caffe2: no runtime installed on this platform",
    "horovod-pytorch": "tensorflow 1.9.0 has no wheel for Python 3.11 here; supported: 2.12–2.21",
    "horovod-tensorflow": "tensorflow 1.9.0 has no wheel for Python 3.11 here",
    "keras-py3": TF1,
    "tf-distributed": TF1,
    "tf-model": TF1,
    "tf-model-for-test": TF1,
    "tf-model-gpu": TF1,
    "tf-model-hostmount": TF1,
    "tf-summary": TF1,
    "tf-summary-gpu": TF1,
}


def test_every_example_has_an_outcome() -> None:
    """The table covers each example written here, and nothing else."""
    assert sorted(p.stem for p in EXAMPLES.glob("*.yml")) == sorted(OUTCOMES)


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_each_example_parses_and_meets_its_outcome(name: str) -> None:
    """The manifest parses; at submission (local launcher) it is accepted or refused as said."""
    manifest = parse_manifest((EXAMPLES / f"{name}.yml").read_text())
    expected = OUTCOMES[name]
    if expected is None:
        plan_for(manifest, b"")
        check_learner_image(manifest, "local")
        return
    with pytest.raises(ManifestError) as refused:
        plan_for(manifest, b"")
        check_learner_image(manifest, "local")
    assert expected in refused.value.message
    assert refused.value.field in ("framework.name", "framework.version")
    assert "not a release number" not in refused.value.message


def test_an_image_is_kept_for_the_kubernetes_launcher() -> None:
    """FfDL's `custom` examples are accepted where learners run in images."""
    manifest = parse_manifest((EXAMPLES / "c10d-native.yml").read_text())
    plan_for(manifest, b"")
    check_learner_image(manifest, "kubernetes")
