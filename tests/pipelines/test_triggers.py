"""A data trigger's listing of an S3 prefix (moto's server, credentials enforced): with the
schedule's own credentials, never the platform's. The trigger firing on a real platform is
tested beside the other schedules, in test_runs.py."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from loom.pipelines.triggers import list_objects

pytestmark = [pytest.mark.integration, pytest.mark.s3]


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
