"""A schedule with a `new_data` trigger on a real platform: a new object under a host folder or
under an S3 prefix (moto's server, credentials enforced) starts one run of its pipeline; what was
there when the schedule was made, or lies outside the prefix, starts none."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from loom.client import LoomClient
from loom.pipelines.triggers import list_objects
from tests.conftest import Server, eventually

pytestmark = pytest.mark.integration

PIPELINE = {
    "name": "ingest",
    "steps": [{"name": "hello", "kind": "shell", "command": "echo new data"}],
}


def schedule_of(client: LoomClient, name: str) -> dict[str, Any]:
    [found] = [s for s in client.pipeline_schedules() if s["name"] == name]
    return found


def polled(client: LoomClient, name: str, after: str | None) -> dict[str, Any]:
    """The schedule once its trigger has listed the prefix again since `after`."""
    seen: dict[str, Any] = {}

    def listed_again() -> bool:
        seen.update(schedule_of(client, name))
        return bool(seen["trigger_checked_at"]) and seen["trigger_checked_at"] != after

    eventually(listed_again, timeout=60)
    return seen


def fires_once_on_new_data(
    client: LoomClient, url: str, add: Callable[[str], None], **more: Any
) -> dict[str, Any]:
    """Schedules the pipeline on new data under `url`; a listing with nothing new starts no
    run, `add("stray")` (outside the prefix, where the test puts it) none either; `add("new")`
    starts exactly one run, which says why. Returns the schedule."""
    add("before")  # there when the schedule is made: counted as seen
    trigger = {"new_data": {"url": url, "poll_s": 0, **more}}
    client.schedule_pipeline(PIPELINE, "on-data", "", trigger=trigger)
    made = schedule_of(client, "on-data")
    assert made["trigger"] == {"new_data": {"url": url, "poll_s": 0.0}}  # no credential shown
    add("stray")
    quiet = polled(client, "on-data", made["trigger_checked_at"])
    quiet = polled(client, "on-data", quiet["trigger_checked_at"])  # a whole listing after it
    assert quiet["runs"] == 0 and client.pipeline_runs("ingest") == []
    add("new")
    eventually(lambda: client.pipeline_runs("ingest"), timeout=60)
    fired = schedule_of(client, "on-data")
    assert fired["runs"] == 1, fired
    assert fired["triggered_by"].startswith(f"new data under {url}: ")
    assert fired["triggered_by"].endswith("new.csv"), fired["triggered_by"]
    again = polled(client, "on-data", fired["trigger_checked_at"])
    again = polled(client, "on-data", again["trigger_checked_at"])
    assert again["runs"] == 1 and len(client.pipeline_runs("ingest")) == 1  # seen: not again
    return fired


def test_a_new_file_in_a_host_folder_starts_a_run(
    shared_server: Server, tenant: LoomClient
) -> None:
    """A host folder under the platform's mount roots: a file written there starts a run; the
    files there before, and one written beside the folder, do not."""
    root = shared_server.home.parent / f"data-{uuid.uuid4().hex[:8]}"
    incoming = root / "incoming"
    incoming.mkdir(parents=True)

    def add(name: str) -> None:
        where = root if name == "stray" else incoming
        (where / f"{name}.csv").write_text("a,b\n1,2\n")

    fires_once_on_new_data(tenant, str(incoming), add)


@pytest.mark.s3
def test_a_new_object_under_an_s3_prefix_starts_a_run(tenant: LoomClient, s3: Any) -> None:
    """An S3 prefix read with the schedule's own credentials (sealed, never shown): an object
    put under it starts a run; one put under another prefix of the bucket does not."""
    bucket = f"trigger-{uuid.uuid4().hex[:8]}"
    store = s3.client()
    store.create_bucket(Bucket=bucket)

    def add(name: str) -> None:
        key = "other/stray.csv" if name == "stray" else f"incoming/{name}.csv"
        store.put_object(Bucket=bucket, Key=key, Body=b"a,b\n1,2\n")

    connection = {"endpoint_url": s3.endpoint, "access_key_id": s3.key,
                  "secret_access_key": s3.secret}  # fmt: skip
    fired = fires_once_on_new_data(tenant, f"s3://{bucket}/incoming/", add, connection=connection)
    assert s3.secret not in str(fired)


@pytest.mark.s3
def test_an_s3_trigger_never_lists_with_the_platforms_credentials(
    s3: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Credentials the platform's own environment holds are not used for a trigger given none:
    its listing is anonymous (refused by a store that asks for credentials), so a user cannot
    watch a bucket only the platform may read; with the trigger's own it lists the prefix."""
    bucket = f"private-{uuid.uuid4().hex[:8]}"
    s3.client().create_bucket(Bucket=bucket)
    s3.client().put_object(Bucket=bucket, Key="incoming/a.csv", Body=b"1\n")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3.key)  # as the platform's machine might have
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3.secret)
    url = f"s3://{bucket}/incoming/"
    with pytest.raises(OSError):
        list_objects(url, {"endpoint_url": s3.endpoint})
    own = {"endpoint_url": s3.endpoint, "access_key_id": s3.key, "secret_access_key": s3.secret}
    assert list_objects(url, own) == [f"{bucket}/incoming/a.csv"]
