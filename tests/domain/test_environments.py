"""Environment plans: runtimes, requirements, digests (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from loom.domain.environments import (
    EnvironmentProblem,
    Plan,
    plan,
    read_requirements,
    requirement_problem,
    runtime_named,
)

HAVE = {"torch": "2.13.0+cpu", "scikit-learn": "1.6.1"}


def make(framework: str = "python", version: str | None = None, **kw: Any) -> Plan:
    args: dict[str, Any] = {
        "framework": framework,
        "version": version,
        "pip": [],
        "requirements": [],
        "python": "3.11",
        "provided": HAVE,
    }
    args.update(kw)
    return plan(**args)  # type: ignore[return-value]  (None where a test says so)


def test_the_platforms_framework_needs_no_environment() -> None:
    assert make("pytorch", "2.13") is None
    assert make("torch") is None
    assert make("sklearn") is None
    assert make("custom") is None


def test_a_missing_framework_is_installed_at_the_version_asked_for() -> None:
    found = make("tensorflow", "2.21")
    assert found.packages == ("tensorflow-cpu==2.21.*",)
    gpu = make("tf", "2.21", gpus=1)
    assert gpu.packages == ("tensorflow[and-cuda]==2.21.*",)
    other_torch = make("pytorch", "2.12")
    assert other_torch.packages == ("torch==2.12.*",)
    assert make("jax", install_framework=False) is None


def test_the_jobs_own_pin_of_its_framework_wins() -> None:
    found = make("tensorflow", "2.21", pip=["tensorflow-cpu==2.20.0", "tf2onnx"])
    assert found.packages == ("tensorflow-cpu==2.20.0", "tf2onnx")


def test_equal_declarations_share_a_digest_and_different_ones_do_not() -> None:
    a = make(pip=["Tabulate == 0.8.10", "toolz"])
    b = make(pip=["toolz", "tabulate==0.8.10"])
    c = make(pip=["tabulate==0.10.0", "toolz"])
    assert a.digest() == b.digest() != c.digest()
    assert a.digest(["https://mirror/simple"]) != a.digest()


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("caffe", "caffe: no runtime installed on this platform"),
        ("h2o3", "available: horovod, jax, python, pytorch, sklearn, tensorflow"),
        ("mxnet", "unknown framework"),
    ],
)
def test_frameworks_without_a_runtime_say_what_is_available(name: str, words: str) -> None:
    with pytest.raises(EnvironmentProblem) as raised:
        runtime_named(name)
    assert words in raised.value.message
    assert raised.value.field == "framework.name"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("-r other.txt", "options"),
        ("--extra-index-url https://evil", "options"),
        ("foo @ file:///etc/passwd", "URL"),
        ("foo @ https://x/foo.whl", "URL"),
        ("not a package!", "not a requirement"),
        ("x" * 400, "longer than"),
    ],
)
def test_requirements_that_are_refused(text: str, words: str) -> None:
    problem = requirement_problem(text)
    assert problem is not None and words in problem


def test_requirements_file_lines() -> None:
    text = "# top\n\ntabulate==0.8.10  # pinned\ntoolz>=1 ; python_version >= '3.8'\n"
    assert read_requirements(text) == ["tabulate==0.8.10", "toolz>=1 ; python_version >= '3.8'"]
    with pytest.raises(EnvironmentProblem) as raised:
        read_requirements("tabulate\n-e .\n", "reqs.txt")
    assert "reqs.txt, line 2" in raised.value.message


def test_a_pin_of_any_distribution_of_the_framework_wins() -> None:
    found = make("tensorflow", "2.21", pip=["tensorflow==2.20.0"])
    assert found.packages == ("tensorflow==2.20.0",)  # not tensorflow-cpu beside it


@pytest.mark.parametrize("version", ["2.13 beta", "v2", "2..1", "1.5.0-", "2.21-nightly"])
def test_a_version_that_is_neither_a_release_nor_an_image_tag_is_refused(version: str) -> None:
    """What no FfDL manifest wrote is refused naming the forms that are read."""
    with pytest.raises(EnvironmentProblem) as raised:
        make("tensorflow", version)
    assert raised.value.field == "framework.version"
    assert "1.5.0-gpu-py3" in raised.value.message


@pytest.mark.parametrize("version", [None, "latest", "latest-py3", "py3", "devel"])
def test_latest_is_the_platforms_own_release(version: str | None) -> None:
    """`latest` (FfDL's PyTorch examples) runs on the platform's own torch, installing nothing."""
    assert make("pytorch", version) is None


def test_latest_of_a_framework_the_platform_lacks_is_its_newest_release() -> None:
    """TensorFlow `latest` installs the newest release this platform provides."""
    assert make("tensorflow", "latest").packages == ("tensorflow-cpu==2.21.*",)
    assert make("tensorflow", "latest-gpu-py3", gpus=1).packages == (
        "tensorflow[and-cuda]==2.21.*",
    )


@pytest.mark.parametrize(
    ("version", "gpus", "package"),
    [
        ("2.21.0-py3", 0, "tensorflow-cpu==2.21.0.*"),
        ("2.16-gpu", 1, "tensorflow[and-cuda]==2.16.*"),
        ("2.16-gpu-py3", 0, "tensorflow-cpu==2.16.*"),  # a GPU image on a CPU node: CPU build
        ("2.16.1-cpu", 1, "tensorflow-cpu==2.16.1.*"),  # the tag asked for the CPU build
        ("2.20.0-devel-gpu-py3", 1, "tensorflow[and-cuda]==2.20.0.*"),
    ],
)
def test_image_tags_give_the_release_and_the_build(version: str, gpus: int, package: str) -> None:
    """An FfDL image tag is read for its release and its GPU or CPU variant."""
    assert make("tensorflow", version, gpus=gpus).packages == (package,)


@pytest.mark.parametrize("version", ["1.5.0-py3", "1.5.0-gpu-py3", "2.1-gpu", "1.5.0", "2.11"])
def test_a_release_without_a_wheel_here_names_the_supported_range(version: str) -> None:
    """TensorFlow 1.x on Python 3.11 is refused as FfDL refused versions: release, why, range."""
    with pytest.raises(EnvironmentProblem) as raised:
        make("tensorflow", version)
    release = version.split("-", maxsplit=1)[0]
    assert raised.value.message == (
        f"tensorflow {release} has no wheel for Python 3.11 here; supported: 2.12–2.21"
    )
    assert raised.value.field == "framework.version"


def test_a_python_2_image_is_refused() -> None:
    """A `-py2` tag asks for a Python this platform does not run."""
    with pytest.raises(EnvironmentProblem) as raised:
        make("tensorflow", "2.16-py2")
    assert "Python 2" in raised.value.message and "3.11" in raised.value.message


def test_horovod_tags_name_the_frameworks_their_image_held() -> None:
    """Horovod's `-tf…-torch…` tag installs those releases, or names the one it cannot."""
    found = make("horovod", "0.28.1-tf2.16.1-torch2.3.0-py3")
    assert found.packages == ("tensorflow-cpu==2.16.1.*", "torch==2.3.0.*")
    with pytest.raises(EnvironmentProblem) as raised:
        make("horovod", "0.13.10-tf1.9.0-torch0.4.0-py3.5")
    assert "tensorflow 1.9.0 has no wheel for Python 3.11" in raised.value.message


def test_pytorchmpi_says_what_to_use_instead() -> None:
    """FfDL's pytorchmpi image has no wheel here; the refusal names pytorch's launch instead."""
    with pytest.raises(EnvironmentProblem) as raised:
        make("pytorchmpi", "0925mpi")
    assert "use pytorch" in raised.value.message
