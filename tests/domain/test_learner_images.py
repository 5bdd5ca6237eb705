"""Learner images a manifest names (FfDL's three ways), refused where no launcher runs them, and
FfDL's image fields that change nothing here, said aloud."""

from __future__ import annotations

import pytest

from loom.domain.learner_images import ImageProblem, check_image, ignored_fields, learner_image
from loom.domain.manifest import parse_manifest

BASE = "name: x\nframework:\n  command: python train.py\n"


def framework(lines: str) -> str:
    return BASE + "".join(f"  {line}\n" for line in lines.splitlines())


@pytest.mark.parametrize(
    ("lines", "image", "field"),
    [
        (
            'name: custom\nversion: "tomcli/pytorch:0925mpi"',
            "tomcli/pytorch:0925mpi",
            "framework.version",
        ),
        (
            "name: pytorch\nimage: reg.example/ml/torch:2",
            "reg.example/ml/torch:2",
            "framework.image",
        ),
        (
            "name: tensorflow\nversion: 2.21\nimage_location: {registry: reg.io, namespace: ml}",
            "reg.io/ml/tensorflow:2.21",
            "framework.image_location",
        ),
    ],
)
def test_the_three_ways_ffdl_named_an_image(lines: str, image: str, field: str) -> None:
    """`custom`'s version, Loom's `image` and FfDL's `image_location` each name the image."""
    m = parse_manifest(framework(lines))
    assert learner_image(m.framework) == (image, field)


@pytest.mark.parametrize(
    "lines", ["name: pytorch\nversion: latest", "name: custom\nversion: latest"]
)
def test_a_release_is_not_an_image(lines: str) -> None:
    """`latest` or a release names no image, even for `custom`."""
    assert learner_image(parse_manifest(framework(lines)).framework) is None


def test_an_image_is_refused_where_learners_are_processes_and_kept_on_kubernetes() -> None:
    """On the local launcher the refusal names the field and what to write instead."""
    m = parse_manifest(framework('name: custom\nversion: "tomcli/pytorch:latest"'))
    check_image(m, "kubernetes")
    with pytest.raises(ImageProblem) as refused:
        check_image(m, "local")
    assert refused.value.field == "framework.version"
    assert "only the Kubernetes launcher" in refused.value.message
    assert "version: latest" in refused.value.message


def test_an_image_with_spaces_is_a_manifest_error() -> None:
    """`framework.image` is one reference."""
    from loom.domain.errors import ManifestError

    with pytest.raises(ManifestError) as bad:
        parse_manifest(framework("name: python\nimage: 'a b'"))
    assert bad.value.field == "framework.image"


def test_ffdls_image_tags_are_reported_as_ignored() -> None:
    """FfDL's learner and log-collector image tags are named in the answer, with why."""
    text = framework("name: pytorch\nimage_tag: v1.2") + (
        "evaluation_metrics: {type: tensorboard, in: x, image_tag: v3}\n"
    )
    notes = ignored_fields(parse_manifest(text))
    assert [n.split(" ", 1)[0] for n in notes] == [
        "framework.image_tag",
        "evaluation_metrics.image_tag",
    ]
    assert ignored_fields(parse_manifest(framework("name: pytorch"))) == []
