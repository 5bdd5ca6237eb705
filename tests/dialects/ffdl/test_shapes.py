"""FfDL's swagger shapes made from Loom's records (pure): a job as a `Model`, FfDL's timestamps,
`rindex` numbering and error body."""

from __future__ import annotations

from loom.dialects.ffdl import shapes

JOB = {
    "id": "training-abc",
    "name": "digits",
    "state": "FAILED",
    "status_message": "learner 1 exited with 3",
    "error_code": "C201",
    "submitted_at": 1_700_000_000.5,
    "finished_at": None,
    "cpus": 0.5,
    "gpus": 1,
    "memory": 3 * 2**30,
    "learners": 2,
}
MANIFEST = {
    "name": "digits",
    "framework": {"name": "tensorflow", "version": "2.21.0-py3", "command": "python t.py"},
    "data_stores": [
        {"id": "in", "type": "s3_datastore", "training_data": {"container": "d"},
         "connection": {"auth_url": "http://s3", "password": "***"}},
        {"id": "out", "type": "mount_volume", "training_results": {"container": "r"}},
    ],
}  # fmt: skip


def test_a_job_is_an_ffdl_model() -> None:
    """Resources in FfDL's units, status with FfDL's timestamps, data stores as stored."""
    model = shapes.model(JOB, MANIFEST)
    assert model["model_id"] == "training-abc" and model["location"] == "/v1/models/training-abc"
    assert model["framework"] == {"name": "tensorflow", "version": "2.21.0-py3"}
    training = model["training"]
    assert (training["memory"], training["memory_unit"], training["gpus"]) == (3072.0, "MiB", 1.0)
    assert (training["input_data"], training["output_data"]) == (["in"], ["out"])
    status = training["training_status"]
    assert status["submitted"] == "2023-11-14T22:13:20.500Z" and status["completed"] == ""
    assert (status["status"], status["error_code"]) == ("FAILED", "C201")
    assert model["data_stores"][0] == {
        "data_store_id": "in",
        "type": "s3_datastore",
        "connection": {"auth_url": "http://s3", "password": "***"},
    }


def test_rindex_counts_from_the_start_or_back_from_the_end() -> None:
    """`pos` 1-based; -1 the last page; -N the page ending N-1 records before the end."""
    assert list(shapes.rindexes(0, 3, 0)) == [1, 2, 3]
    assert list(shapes.rindexes(5, 2, 0)) == [5, 6]
    assert list(shapes.rindexes(-1, 2, 10)) == [9, 10]
    assert list(shapes.rindexes(-3, 2, 10)) == [7, 8]


def test_errors_in_ffdls_body() -> None:
    """A bad manifest is told in `error`; other statuses name themselves, Loom's words after."""
    bad = shapes.error(400, "field `learners`: ...", "C101", "learners")
    assert bad == {
        "code": 400,
        "error": "field `learners`: ...",
        "description": "Incorrect manifest",
        "loom_code": "C101",
        "field": "learners",
    }
    assert shapes.error(404, "no job 'x'") == {
        "code": 404,
        "error": "Not found",
        "description": "no job 'x'",
    }
