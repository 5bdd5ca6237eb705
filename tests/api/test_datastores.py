"""Data stores against a real S3-protocol server (moto) through the real s3fs/boto3 clients."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

import pytest

from tests.conftest import Seat, Server, make_zip, manifest, wait_for_state
from tests.s3 import Proxy

pytestmark = [pytest.mark.integration, pytest.mark.s3]

FINAL = {"COMPLETED", "FAILED", "HALTED"}


def buckets(s3: Any, *names: str) -> list[str]:
    made = [f"{name}-{uuid.uuid4().hex[:8]}" for name in names]
    for bucket in made:
        s3.client().create_bucket(Bucket=bucket)
    return made


def store_yaml(endpoint: str, key: str, secret: str, data: str, results: str) -> str:
    return (
        "data_stores:\n"
        "  - id: cos\n"
        "    type: s3_datastore\n"
        f"    training_data: {{container: {data}}}\n"
        f"    training_results: {{container: {results}}}\n"
        f"    connection: {{auth_url: '{endpoint}', user_name: '{key}', password: '{secret}'}}\n"
    )


def test_job_reads_its_bucket_and_stores_results_under_its_id(seat: Seat, s3: Any) -> None:
    """DATA_DIR holds the bucket's files; RESULT_DIR lands in the results bucket under the id."""
    data, results = buckets(s3, "data", "results")
    client = s3.client()
    client.put_object(Bucket=data, Key="train/a.csv", Body=b"1,2,3\n")
    client.put_object(Bucket=data, Key="labels.txt", Body=b"cat\n")
    command = (
        'cat "$DATA_DIR/train/a.csv" "$DATA_DIR/labels.txt" && echo done > "$RESULT_DIR/out.txt"'
    )
    text = manifest(command) + store_yaml(s3.endpoint, s3.key, s3.secret, data, results)
    with seat.client() as loom:
        job_id = loom.submit(text, make_zip({"a": ""}))
        job = wait_for_state(loom, job_id, FINAL, timeout=90)
        assert job["state"] == "COMPLETED", job
        assert [x["line"] for x in loom.logs(job_id)] == ["1,2,3", "cat"]
        shown = json.dumps(job)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=results)["Contents"]}
    assert f"{job_id}/out.txt" in keys
    assert f"{job_id}/learner-1/training-log.txt" in keys
    assert s3.secret not in shown


def test_wrong_password_fails_with_s302_and_is_never_shown(seat: Seat, s3: Any) -> None:
    """Refused credentials fail the job at DOWNLOADING with S302 naming store and bucket; the
    password appears in no API response, log line, CLI output, seat log or learner env."""
    data, results = buckets(s3, "data", "results")
    password = "not-the-secret-" + uuid.uuid4().hex
    text = manifest("env") + store_yaml(s3.endpoint, s3.key, password, data, results)
    with seat.client() as loom:
        job_id = loom.submit(text, make_zip({"a": ""}))
        job = wait_for_state(loom, job_id, FINAL, timeout=90)
        assert (job["state"], job["error_code"]) == ("FAILED", "S302"), job
        assert "'cos'" in job["status_message"] and data in job["status_message"]
        assert "credentials" in job["status_message"]
        answers = [json.dumps(job), json.dumps(loom.jobs()), json.dumps(loom.logs(job_id))]
    cli = subprocess.run(
        [sys.executable, "-m", "loom", "show", job_id, "--json"],
        env={**os.environ, "LOOM_HOME": str(seat.home)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    answers.append(cli.stdout + cli.stderr)
    answers.append(seat.log.read_text())
    answers += [
        p.read_text(errors="replace") for p in (seat.home / "jobs").rglob("*") if p.is_file()
    ]
    for text_seen in answers:
        assert password not in text_seen


def test_credentials_never_reach_the_learner_environment(seat: Seat, s3: Any) -> None:
    """A learner of a job with a data store sees neither the access key's secret in its env."""
    data, results = buckets(s3, "data", "results")
    s3.client().put_object(Bucket=data, Key="x", Body=b"x")
    probe = f"import os\nprint(any({s3.secret!r} in v for v in os.environ.values()))\n"
    text = manifest("python probe.py") + store_yaml(s3.endpoint, s3.key, s3.secret, data, results)
    with seat.client() as loom:
        job_id = loom.submit(text, make_zip({"probe.py": probe}))
        wait_for_state(loom, job_id, FINAL, timeout=90)
        assert [x["line"] for x in loom.logs(job_id)] == ["False"]


def test_missing_bucket_fails_with_s302(seat: Seat, s3: Any) -> None:
    """A bucket that does not exist is named in the failure."""
    (results,) = buckets(s3, "results")
    text = manifest("true") + store_yaml(s3.endpoint, s3.key, s3.secret, "no-such-bucket", results)
    with seat.client() as loom:
        job = wait_for_state(loom, loom.submit(text, make_zip({"a": ""})), FINAL, timeout=60)
    assert (job["state"], job["error_code"]) == ("FAILED", "S302")
    assert "no-such-bucket" in job["status_message"] and "does not exist" in job["status_message"]


def test_store_down_during_storing_is_retried(seat: Seat, s3: Any) -> None:
    """The results store is unreachable when the learner finishes; the upload is retried and
    the results arrive once it is back."""
    data, results = buckets(s3, "data", "results")
    s3.client().put_object(Bucket=data, Key="x", Body=b"x")
    proxy = Proxy(int(s3.endpoint.rsplit(":", 1)[1]))
    endpoint = f"http://127.0.0.1:{proxy.port}"
    command = "sleep 4 && echo kept > $RESULT_DIR/out.txt"  # the store goes down before
    text = manifest(command) + store_yaml(endpoint, s3.key, s3.secret, data, results)
    with seat.client() as loom:
        job_id = loom.submit(text, make_zip({"a": ""}))
        wait_for_state(loom, job_id, {"PROCESSING"}, timeout=60)
        proxy.down()
        wait_for_state(loom, job_id, {"STORING"}, timeout=30)
        time.sleep(3)
        still = loom.job(job_id)
        assert still["state"] == "STORING", still  # still trying
        proxy.up()
        job = wait_for_state(loom, job_id, FINAL, timeout=60)
    assert job["state"] == "COMPLETED", job
    body = s3.client().get_object(Bucket=results, Key=f"{job_id}/out.txt")["Body"].read()
    assert body == b"kept\n"


def test_unreachable_store_fails_after_retrying(tmp_path: Any) -> None:
    """A store that cannot be reached is retried, then fails the job with S302 saying so."""
    from tests.conftest import free_port

    srv = Server(tmp_path / "home", LOOM_LEARNER_RETRY_S="3").start()
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    text = manifest("true") + store_yaml(endpoint, "key", "secret-value", "data", "results")
    try:
        with srv.client() as loom:
            job = wait_for_state(loom, loom.submit(text, make_zip({"a": ""})), FINAL, timeout=60)
    finally:
        srv.stop()
    assert (job["state"], job["error_code"]) == ("FAILED", "S302")
    assert "cannot reach" in job["status_message"]
    assert "secret-value" not in json.dumps(job)
