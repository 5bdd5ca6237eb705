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


@pytest.mark.parametrize("version", ["latest", "2.13 beta", "v2", "2..1"])
def test_a_version_that_is_not_a_release_is_refused(version: str) -> None:
    with pytest.raises(EnvironmentProblem) as raised:
        make("tensorflow", version)
    assert raised.value.field == "framework.version"
