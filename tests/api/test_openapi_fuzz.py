"""Schemathesis over the whole OpenAPI, against the real server: no request it can make gets a 5xx,
and every answer is one the document declares (status, content type, body schema, `Allow`).

`positive_data_acceptance` is left out: some rules join fields (`max_replicas` ≥ `min_replicas`) or
depend on the platform's settings (a token's lifetime) or on a YAML manifest's meaning, which a JSON
schema cannot state, so schema-valid requests are rightly refused with 400."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ON_POSTGRES, Server, manifest, register, wait_for_state

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Rate limits would answer most generated requests with 429 and hide what lies behind them.
UNLIMITED = {
    "LOOM_RATE_PER_S": "1000000",
    "LOOM_RATE_BURST": "1000000",
    "LOOM_AUTH_FAILURES_PER_MIN": "1000000",
    "LOOM_AUTH_FAILURES_BURST": "1000000",
    "LOOM_DOCS_PUBLIC": "true",  # the document itself is read without a token
}
# `filter_too_much` is Hypothesis' own complaint that it discards too many generated values for
# an operation (a token id's pattern, say): about the generator, not the server, and it came and
# went from run to run.
CHECKS = [
    "--checks",
    "all",
    "--exclude-checks",
    "positive_data_acceptance",
    "--suppress-health-check",
    "filter_too_much",
    # No example database: each run starts in a fresh folder, so it could only ever be written,
    # and keeping it made Hypothesis maintain a Pareto front of every generated case (a third of
    # `st`'s CPU, 112 → 84 s for the same 2,905 requests)
    "--generation-database",
    "none",
]
# On PostgreSQL the same operations, without the random phase: what differs there is how the
# database takes what the API lets through (types, lengths, constraints), which the coverage
# phase's boundary values reach (each field's shortest and longest, its wrong types, its missing
# and extra keys: ~2,400 requests, the same on both databases) and the stateful phase's chains of
# created objects; the random requests, which probe the API's own validation, ran on SQLite.
EXAMPLES = 40
# A request past the body limit (16 MiB) is refused with 413 before it is read, whatever it
# violates: a right refusal, missing from schemathesis' default list for a schema-violating
# request (it failed a clean-clone run once it made a 16 MiB body of too many log lines).
REJECTIONS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
BASE_CONFIG = (
    "[checks.negative_data_rejection]\n"
    f"expected-statuses = [{', '.join(repr(s) for s in REJECTIONS)}, '5xx']\n"
)
PHASES = ["--phases", "examples,coverage,stateful"] if ON_POSTGRES else []


def schemathesis(server: Server, tmp_path: Path, *args: str, config: str = "") -> str:
    """Run `st run` against the server with the admin's token; fails the test on any finding.

    One worker: with two, Hypothesis parses lambdas' source in two threads at once, and CPython
    3.11.7's `ast` keeps one recursion counter for all threads (gh-106905), so `st` itself
    failed now and then with "AST constructor recursion depth mismatch"."""
    config_file = tmp_path / "schemathesis.toml"
    config_file.write_text(config + BASE_CONFIG)
    st = Path(sys.executable).parent / "st"
    command = [str(st), "--config-file", str(config_file), "run", f"{server.url}/openapi.json"]
    command += ["-H", f"Authorization: Bearer {server.admin_token}", "--workers", "1", *CHECKS]
    command += PHASES
    done = subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=600, cwd=tmp_path, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-20_000:]
    assert "failures" not in output and " passed" in output, output[-5_000:]
    return output


def operations_tested(output: str) -> int:
    found = re.search(r"Tested: (\d+)", output)
    assert found, output[-5_000:]
    return int(found.group(1))


@pytest.fixture
def fuzzed(tmp_path: Path) -> Iterator[Server]:
    server = Server(tmp_path / "home", **UNLIMITED).start()
    yield server
    server.stop()


def test_every_operation_answers_as_documented(fuzzed: Server, tmp_path: Path) -> None:
    """Every operation but `/v1/events`, a stream that ends only when its client goes (its
    refusals are tested in test_events.py)."""
    output = schemathesis(
        fuzzed, tmp_path, "--max-examples", str(EXAMPLES), "--exclude-path", "/v1/events"
    )
    assert operations_tested(output) == 87  # every other one, the learners' own included


def test_a_real_job_and_model_answer_as_documented(
    fuzzed: Server, tmp_path: Path, model_zip: bytes
) -> None:
    """The same checks on paths that name objects that exist, where the deeper code runs."""
    with fuzzed.client() as client:
        register(client, model_zip)
        job_id = client.submit(manifest("echo hello; echo 'accuracy: 0.5'"), model_zip)
        wait_for_state(client, job_id, {"COMPLETED"})
    config = f'[parameters]\njob_id = "{job_id}"\nname = "digits"\nref = "1"\n'
    paths = r"^/v1/(jobs/\{job_id\}|models/\{name\})"
    output = schemathesis(
        fuzzed,
        tmp_path,
        "--include-path-regex",
        paths,
        "--exclude-method",
        "DELETE",
        "--max-examples",
        str(EXAMPLES * 5 // 8),
        config=config,
    )
    assert operations_tested(output) >= 12  # the job's and the model's operations, on live objects
    with fuzzed.client() as client:
        assert client.job(job_id)["id"] == job_id  # still there: DELETE was left out
