"""Job environments through the platform: real jobs, real `uv`, the real package index."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from loom.client import ClientError, LoomClient
from loom.domain.manifest import parse_manifest
from loom.lifecycle.environments import plan_for, spec_section
from loom.settings import Settings
from tests.conftest import (
    Seat,
    Server,
    database_free,
    eventually,
    make_zip,
    manifest,
    package_sources,
    wait_for_state,
)

pytestmark = [pytest.mark.integration, database_free]

FINAL = {"COMPLETED", "FAILED", "HALTED"}
SHOW = (
    "import json, sys, tabulate, loom.tracking\n"
    "print(json.dumps({'version': tabulate.__version__, 'file': tabulate.__file__,"
    " 'python': sys.executable}))\n"
)


def run(client: LoomClient, files: dict[str, str], environment: str, **kw: object) -> str:
    text = manifest("python show.py", environment=environment, **kw)
    return client.submit(text, make_zip({"show.py": SHOW, **files}))


def lines(client: LoomClient, job_id: str, stream: str | None = None) -> list[str]:
    found = client.logs(job_id, pagesize=10_000)
    return [line["line"] for line in found if stream is None or line.get("stream") == stream]


def shown(client: LoomClient, job_id: str) -> dict[str, str]:
    printed = [line for line in lines(client, job_id) if line.startswith("{")]
    assert printed, lines(client, job_id)
    return dict(json.loads(printed[-1]))


def test_pip_package_is_installed_once_and_reused(seat: Seat) -> None:
    """A package not in Loom's own Python is importable; a second job with the same
    declaration reuses the environment (its build log says so) and builds nothing."""
    with seat.client() as client:
        with pytest.raises(ImportError):
            __import__("tabulate")  # not in the platform's own environment
        first = run(client, {}, "{pip: [tabulate==0.8.10]}")
        job = wait_for_state(client, first, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        assert shown(client, first)["version"] == "0.8.10"
        built = lines(client, first, "env")
        assert any(" built in " in line for line in built), built
        assert any("+ tabulate==0.8.10" in line for line in built), built

        second = run(client, {}, "{pip: ['tabulate == 0.8.10']}")  # the same, spelt otherwise
        job = wait_for_state(client, second, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        reused = lines(client, second, "env")
        assert any(" reused: " in line for line in reused), reused
        assert not any("+ tabulate" in line or " built in " in line for line in reused), reused
        assert shown(client, second)["file"] == shown(client, first)["file"]


def test_conflicting_versions_run_side_by_side(seat: Seat) -> None:
    """Two jobs pinning different versions of one package both run, each with its own."""
    with seat.client() as client:
        old = run(client, {}, "{pip: [tabulate==0.8.10]}")
        new = run(client, {}, "{pip: [tabulate==0.10.0]}")
        for job_id, version in ((old, "0.8.10"), (new, "0.10.0")):
            job = wait_for_state(client, job_id, FINAL, timeout=120)
            assert job["state"] == "COMPLETED", job
            assert shown(client, job_id)["version"] == version


def test_requirements_file_in_the_code(seat: Seat) -> None:
    with seat.client() as client:
        files = {"requirements.txt": "# what this job needs\n\ntabulate==0.10.0  # tables\n"}
        job_id = run(client, files, "{requirements: requirements.txt}")
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        assert shown(client, job_id)["version"] == "0.10.0"


def test_wrong_package_fails_the_job_with_the_installers_message(seat: Seat) -> None:
    with seat.client() as client:
        job_id = run(client, {}, "{pip: [loom-no-such-package-anywhere==1.0]}")
        job = wait_for_state(client, job_id, FINAL, timeout=120)
    assert job["state"] == "FAILED", job
    assert job["error_code"] == "C103"
    message = job["status_message"]
    assert "could not be built" in message
    assert "loom-no-such-package-anywhere" in message  # the installer's own words
    assert "Traceback" not in message


def test_the_environment_is_read_only_to_the_job(seat: Seat) -> None:
    """A job cannot change what the next job with the same declaration will run."""
    plant = (
        "import tabulate, pathlib\n"
        "target = pathlib.Path(tabulate.__file__)\n"
        "try:\n"
        "    target.write_text('raise SystemExit(99)')\n"
        "    print('WROTE')\n"
        "except OSError as exc:\n"
        "    print('REFUSED', type(exc).__name__)\n"
    )
    with seat.client() as client:
        text = manifest("python plant.py", environment="{pip: [tabulate==0.8.10]}")
        job_id = client.submit(text, make_zip({"plant.py": plant}))
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        said = lines(client, job_id)
        if not client.capacity()["isolation"]["confined"]:
            pytest.skip("jobs are not sandboxed here: they run with the platform's rights")
        assert any(line.startswith("REFUSED") for line in said), said
        again = run(client, {}, "{pip: [tabulate==0.8.10]}")
        assert wait_for_state(client, again, FINAL, timeout=120)["state"] == "COMPLETED"


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One platform for the refusals: none of them stores anything."""
    srv = Server(tmp_path_factory.mktemp("refusing") / "home").start()
    yield srv
    srv.stop()


@pytest.mark.parametrize(
    ("framework", "environment", "field", "words"),
    [
        ("caffe", None, "framework.name", "no runtime installed on this platform"),
        ("mxnet", None, "framework.name", "unknown framework"),
        ("python", "{pip: ['foo @ https://example.com/foo.whl']}", "environment.pip", "URL"),
        ("python", "{pip: ['--index-url=https://evil.example']}", "environment.pip", "options"),
        ("python", "{requirements: requirements.txt}", "environment.requirements", "line 2"),
        ("python", "{requirements: missing.txt}", "environment.requirements", "no such file"),
        ("python", "{python: '3.9'}", "environment.python", "available"),
    ],
)
def test_bad_environment_refused_at_submission(
    refusing: Server, framework: str, environment: str | None, field: str, words: str
) -> None:
    text = manifest("true", **({"environment": environment} if environment else {}))
    text = text.replace("  name: python", f"  name: {framework}")
    code = make_zip({"requirements.txt": "tabulate\n-r /etc/shadow\n"})
    with refusing.client() as client, pytest.raises(ClientError) as raised:
        client.submit(text, code)
    assert raised.value.status == 400
    assert field in str(raised.value) and words in str(raised.value)
    with refusing.client() as client:
        assert client.jobs()["jobs"] == []  # nothing stored


def test_a_job_waits_for_a_build_under_way_and_says_so(seat: Seat) -> None:
    """While another builder holds the environment's lock, the job shows why it waits; then it
    runs in what that builder made."""
    text = manifest("python show.py", environment="{pip: [tabulate==0.10.0, toolz]}")
    code = make_zip({"show.py": SHOW})
    sources = {k.removeprefix("LOOM_").lower(): v for k, v in package_sources().items()}
    settings = Settings(home=seat.home, **sources)
    section = spec_section(plan_for(parse_manifest(text), code), settings)
    assert section is not None
    root = Path(section["root"])
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{section['digest']}.lock").open("a+b") as lock, seat.client() as client:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a builder on this machine would
        job_id = client.submit(text, code)
        waiting = eventually(
            lambda: "another learner is building it" in client.job(job_id)["status_message"],
            timeout=60,
        )
        job = client.job(job_id)
        assert job["state"] == "DOWNLOADING", job
        assert "preparing environment" in job["status_message"], job
        fcntl.flock(lock, fcntl.LOCK_UN)
        job = wait_for_state(client, job_id, FINAL, timeout=120)
        assert job["state"] == "COMPLETED", job
        said = lines(client, job_id, "env")
    assert waiting >= 0
    assert any("waiting for another learner building it" in line for line in said), said
    assert any(" built in " in line for line in said), said  # nobody had: this one did


def test_halting_a_job_that_waits_for_its_environment(seat: Seat) -> None:
    """A halt does not wait for a build: the job ends HALTED at once."""
    text = manifest("python show.py", environment="{pip: [tabulate==0.10.0, toolz==1.1.0]}")
    code = make_zip({"show.py": SHOW})
    sources = {k.removeprefix("LOOM_").lower(): v for k, v in package_sources().items()}
    section = spec_section(
        plan_for(parse_manifest(text), code), Settings(home=seat.home, **sources)
    )
    assert section is not None
    root = Path(section["root"])
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{section['digest']}.lock").open("a+b") as lock, seat.client() as client:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a build that never ends
        job_id = client.submit(text, code)
        eventually(
            lambda: "another learner is building it" in client.job(job_id)["status_message"],
            timeout=60,
        )
        client.halt(job_id)
        job = wait_for_state(client, job_id, FINAL, timeout=20)
    assert job["state"] == "HALTED", job
