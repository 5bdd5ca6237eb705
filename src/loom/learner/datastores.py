"""The learner's side of the data stores: S3-protocol buckets fetched into DATA_DIR before the
command runs, and RESULT_DIR uploaded after it, through s3fs (imported only for jobs that use
S3, so other learners start without it).

Credentials arrive with the token on the wrapper's standard input, never in an environment.
Errors name the store and the bucket, never the secret: a missing bucket or refused
credentials fail at once; an unreachable store is retried with backoff.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from loom.sandbox.files import UnsafePath, open_regular, regular_files

if TYPE_CHECKING:
    from typing import Any

BATCH = 200


class StoreError(Exception):
    """A store cannot be used; `transient` if trying again later may help."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


def _filesystem(store: dict[str, Any], secrets: dict[str, str]) -> Any:
    import s3fs

    return s3fs.S3FileSystem(
        key=secrets.get("user_name") or None,
        secret=secrets.get("password") or None,
        endpoint_url=store.get("endpoint") or None,
        client_kwargs={"region_name": store.get("region") or "us-east-1"},
        config_kwargs={"retries": {"max_attempts": 2}, "connect_timeout": 5},
        skip_instance_cache=True,
    )


# A 403 status, not "403" inside a port or an address (127.0.0.1:40312 is not a refusal: it made
# an unreachable store look like refused credentials, and the job failed instead of retrying).
_FORBIDDEN = re.compile(r"(?<![\d:.])403(?![\d.])")


def _translate(
    store: dict[str, Any], bucket: str, exc: BaseException, secrets: dict[str, str]
) -> StoreError:
    """An engine's error as a sentence about this store; the secret never appears."""
    where = f"data store {store['id']!r}, bucket {bucket!r} at {store.get('endpoint') or 'AWS'}"
    text = f"{type(exc).__name__}: {exc}"
    for secret in filter(None, secrets.values()):
        text = text.replace(secret, "***")
    if isinstance(exc, FileNotFoundError) or "NoSuchBucket" in text:
        return StoreError(f"{where}: the bucket does not exist", transient=False)
    refused = ("InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied")
    if (
        isinstance(exc, PermissionError)
        or any(code in text for code in refused)
        or _FORBIDDEN.search(text)
    ):
        return StoreError(f"{where}: the credentials were refused", transient=False)
    return StoreError(f"{where}: cannot reach the store ({text[:200]})", transient=True)


def _retrying(
    action: Callable[[], object],
    store: dict[str, Any],
    secrets: dict[str, str],
    bucket: str,
    deadline_s: float,
) -> None:
    """Run `action`, retrying transient failures with backoff until the deadline."""
    end, backoff = time.monotonic() + deadline_s, 0.5
    while True:
        try:
            action()
            return
        except StoreError:
            raise
        except Exception as exc:  # an engine's error: translated at this boundary
            error = _translate(store, bucket, exc, secrets)
            if not error.transient or time.monotonic() + backoff > end:
                raise error from exc
            time.sleep(backoff)
            backoff = min(backoff * 2, 10.0)


def download(
    store: dict[str, Any],
    secrets: dict[str, str],
    target: Path,
    progress: Callable[[str], None],
    deadline_s: float = 60.0,
) -> None:
    """Fetch the store's training data bucket into `target`, once per job: the first learner
    downloads under a lock, the others find it done."""
    bucket = store["bucket"]
    target.mkdir(parents=True, exist_ok=True)
    done = target / ".loom-complete"
    with (target.parent / f".{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return
        fs = _filesystem(store, secrets)
        listing: dict[str, dict[str, Any]] = {}

        def list_bucket() -> None:
            # find, not exists: exists answers False where the credentials are refused.
            listing.update(fs.find(bucket, detail=True, withdirs=False))

        _retrying(list_bucket, store, secrets, bucket, deadline_s)
        names = sorted(listing)
        total = sum(int(info.get("size") or 0) for info in listing.values())
        fetched = 0
        for start in range(0, len(names), BATCH):
            batch = names[start : start + BATCH]
            locals_ = [str(target / name[len(bucket) + 1 :]) for name in batch]
            for local in locals_:
                Path(local).parent.mkdir(parents=True, exist_ok=True)
            _retrying(partial(fs.get, batch, locals_), store, secrets, bucket, deadline_s)
            fetched += len(batch)
            progress(
                f"downloading {store['id']}: {fetched}/{len(names)} files "
                f"of {total / 2**20:.1f} MiB"
            )
        done.write_text(str(len(names)))


def _put_batch(fs: Any, source: Path, batch: list[str], prefix: str) -> None:
    for relative in batch:
        try:
            data = open_regular(source, relative)
        except UnsafePath:
            continue
        with data, fs.open(f"{prefix}/{relative}", "wb") as out:
            shutil.copyfileobj(data, out, 1 << 20)


def upload(
    store: dict[str, Any], secrets: dict[str, str], source: Path, job_id: str, deadline_s: float
) -> int:
    """Put every file of `source` under `<results bucket>/<job id>/`; returns the file count."""
    bucket = store["results_bucket"]
    fs = _filesystem(store, secrets)
    files = regular_files(source)  # written by untrusted code: no link is followed
    for start in range(0, len(files), BATCH):
        batch = files[start : start + BATCH]
        put = partial(_put_batch, fs, source, batch, f"{bucket}/{job_id}")
        _retrying(put, store, secrets, bucket, deadline_s)
    return len(files)
