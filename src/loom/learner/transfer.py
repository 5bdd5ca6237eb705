"""A learner on a machine that shares no disk with the platform (`"transfer": "api"` in its spec,
design 3.8): its code, its checkpoints and its results move through the API.

    GET /v1/learner/jobs/{job}/code                                  the code zip (DOWNLOADING)
    GET /v1/learner/jobs/{job}/checkpoints                           the job's CHECKPOINT_DIR
    PUT /v1/learner/jobs/{job}/learners/{n}/checkpoints?attempt=N    what changed (PROCESSING)
    PUT /v1/learner/jobs/{job}/learners/{n}/results?attempt=N        RESULT_DIR (STORING)

A checkpoint file is sent once nothing has written to it for a moment (`SETTLE_S`) or it stayed
the same between two scans (one still being written is not sent half-written), and again
whenever it changes; a file that changed while it was read is left for the next scan. The
files deleted since they were sent are listed in the archive's `.loom-deleted.json`, so that a
rotation here frees the platform's disk too. After the command, everything changed is sent
once more.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loom.learner.relocate import TRANSFER_API
from loom.sandbox.files import regular_file_stats
from loom.sandbox.zips import DELETIONS, ArchiveRefused, unpack_over, zip_files, zip_tree

if TYPE_CHECKING:
    from collections.abc import Callable

    from loom.learner.shipper import Api

Signature = tuple[int, int, int]  # size, modification time (ns), inode
SETTLE_S = 0.2  # a file no one wrote to for this long is not being written


class TransferFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def signature(info: os.stat_result) -> Signature:
    return info.st_size, info.st_mtime_ns, info.st_ino


def scan(folder: Path) -> dict[str, Signature]:
    """The plain files under `folder` (no link followed), each with its signature."""
    found = regular_file_stats(folder)
    return {name: signature(info) for name, info in found.items() if name != DELETIONS}


@dataclass(frozen=True)
class Changes:
    upload: list[str]
    deleted: list[str]
    unsettled: int = 0  # changed files still being written: looked at again soon

    def __bool__(self) -> bool:
        return bool(self.upload or self.deleted)


class ChangeTracker:
    """Which checkpoint files the platform lacks: those changed since they were sent that are
    settled (unchanged between the last two scans, or not written to for `SETTLE_S`; any
    changed one, on the final scan), and those deleted since they were sent. A checkpoint
    rewritten every second is sent as it is between two writes, not only after the last."""

    def __init__(self, sent: dict[str, Signature] | None = None) -> None:
        self.sent = dict(sent or {})
        self._previous: dict[str, Signature] = {}

    def changes(
        self, now: dict[str, Signature], *, final: bool = False, clock_ns: int | None = None
    ) -> Changes:
        previous, self._previous = self._previous, now
        settled_before = (time.time_ns() if clock_ns is None else clock_ns) - int(SETTLE_S * 1e9)
        changed = [name for name, sig in sorted(now.items()) if self.sent.get(name) != sig]
        upload = [
            name
            for name in changed
            if final or previous.get(name) == now[name] or now[name][1] <= settled_before
        ]
        deleted = sorted(name for name in self.sent if name not in now)
        return Changes(upload, deleted, len(changed) - len(upload))

    def delivered(self, written: dict[str, Signature], deleted: list[str]) -> None:
        """The platform took an upload: these files as they were read, and these deletions."""
        self.sent.update(written)
        for name in deleted:
            self.sent.pop(name, None)


def transient(status: int) -> bool:
    """Worth another try: no answer (0), a server error, or throttling."""
    return status == 0 or status >= 500 or status == 429


def for_spec(spec: dict[str, Any], api: Api, say: Callable[[str], None]) -> Transfer | None:
    """The transfers of a learner whose spec asks for them, on a connection of their own."""
    return Transfer(spec, api.twin(), say) if spec.get("transfer") == TRANSFER_API else None


class Transfer:
    """One learner attempt's code, checkpoints and results, through the API."""

    def __init__(self, spec: dict[str, Any], api: Api, say: Callable[[str], None]) -> None:
        self.api = api
        self.say = say  # a line in the job's log, for what the user should know
        self._job = f"/v1/learner/jobs/{spec['job_id']}"
        self._learner = f"{self._job}/learners/{spec['learner_id']}/%s?attempt={spec['attempt']}"
        self.private = Path(spec["status_file"]).parent  # the wrapper's own folder
        self.checkpoints = Path(spec["dirs"]["CHECKPOINT_DIR"])
        self.retry_s = float(spec.get("retry_s", 600))
        self.interval = float(spec.get("checkpoint_sync_s", 5))
        self.tracker = ChangeTracker()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._said = ""

    # -- DOWNLOADING ------------------------------------------------------------------------
    def fetch(self, model_dir: Path) -> None:
        """The code into `model_dir`, the job's checkpoints into CHECKPOINT_DIR."""
        deadline = min(self.retry_s, 60.0)
        self._download("code", "the model definition", model_dir, deadline)
        fetched = self._download("checkpoints", "the job's checkpoints", self.checkpoints, deadline)
        self.tracker = ChangeTracker(
            {k: v for k, v in scan(self.checkpoints).items() if k in fetched}
        )

    def _download(self, route: str, what: str, target: Path, deadline_s: float) -> set[str]:
        """Fetch a zip and unpack it over `target`; the names it held."""
        archive = self.private / f"{route}-download.zip"
        try:
            with archive.open("w+b") as sink:
                status, reason = self._retry(
                    lambda: self.api.get_file(f"{self._job}/{route}", sink), deadline_s
                )
            if status != 200:
                raise TransferFailed(
                    f"could not fetch {what} from the platform: {_why(status, reason)}"
                )
            with zipfile.ZipFile(archive) as listing:
                names = set(listing.namelist())
            unpack_over(archive, target, max_bytes=sys.maxsize)
        except (ArchiveRefused, zipfile.BadZipFile, OSError) as exc:
            raise TransferFailed(
                f"could not unpack {what} fetched from the platform: {exc}"
            ) from exc
        finally:
            archive.unlink(missing_ok=True)
        return names

    # -- PROCESSING -------------------------------------------------------------------------
    def start_sync(self) -> None:
        """Send the checkpoints that changed every `checkpoint_sync_s` seconds."""
        self._ticker = threading.Thread(target=self._tick, name="checkpoints", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            unsettled = self._sync(final=False, deadline_s=0.0)  # unreachable: at the next tick
            # A checkpoint caught being written is looked at again in a moment, not a tick; at
            # a random moment, or a learner writing at that same pace is always caught writing.
            soon = random.uniform(SETTLE_S / 4, 2 * SETTLE_S)
            wait = min(self.interval, soon) if unsettled else self.interval

    def finish_sync(self) -> None:
        """After the command: everything changed, retried for as long as the learner resends
        anything; what cannot be sent is said in the job's log, the job goes on."""
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        self._sync(final=True, deadline_s=self.retry_s)

    def _sync(self, *, final: bool, deadline_s: float) -> int:
        """Send what changed; when nothing could be sent yet, how many changed files were
        caught being written."""
        changes = self.tracker.changes(scan(self.checkpoints), final=final)
        if not changes:
            return changes.unsettled
        extra = {DELETIONS: json.dumps(changes.deleted).encode()} if changes.deleted else None
        upload = self.private / "checkpoints-upload.zip"
        try:
            written = self._pack(changes.upload, upload, extra)
            status, reason = self._upload("checkpoints", upload, deadline_s)
        except OSError as exc:
            status, reason = 0, str(exc)
        finally:
            upload.unlink(missing_ok=True)
        if status == 200:
            self.tracker.delivered({k: signature(v) for k, v in written.items()}, changes.deleted)
            return 0  # the next look is a whole interval away: sending is paced by it
        message = f"the checkpoints could not be sent to the platform: {_why(status, reason)}"
        if message != self._said or final:
            self._said = message
            self.say(f"loom: {message}" + ("" if final else "; trying again"))
        return 0

    def _pack(
        self, names: list[str], upload: Path, extra: dict[str, bytes] | None
    ) -> dict[str, os.stat_result]:
        """The zip of these checkpoint files, leaving out any written to while it was read
        (it would be torn); they are sent at a later scan."""
        for _ in range(3):
            written = zip_files(
                self.checkpoints, names, upload, extra=extra, compression=zipfile.ZIP_STORED
            )
            torn = {
                name for name, seen in written.items() if _changed(self.checkpoints / name, seen)
            }
            if not torn:
                return written
            names = [name for name in names if name not in torn]
        return zip_files(self.checkpoints, [], upload, extra=extra)

    # -- STORING ----------------------------------------------------------------------------
    def store(self, results: Path) -> None:
        """RESULT_DIR to the platform, retried for as long as the learner resends anything."""
        upload = self.private / "results-upload.zip"
        try:
            zip_tree(results, upload)
            status, reason = self._upload("results", upload, self.retry_s)
        except OSError as exc:
            raise TransferFailed(f"could not pack the results: {exc}") from exc
        finally:
            upload.unlink(missing_ok=True)
        if status != 200:
            raise TransferFailed(
                f"could not send the results to the platform: {_why(status, reason)}"
            )

    # -- both -------------------------------------------------------------------------------
    def _upload(self, route: str, archive: Path, deadline_s: float) -> tuple[int, str]:
        with archive.open("rb") as body:
            size = os.fstat(body.fileno()).st_size
            return self._retry(
                lambda: self.api.put_file(self._learner % route, body, size), deadline_s
            )

    def _retry(self, call: Callable[[], tuple[int, str]], deadline_s: float) -> tuple[int, str]:
        """The first answer that is not transient, or the last one at the deadline (or at the
        learner's cutoff, once it is told to stop)."""
        end, backoff = self.api.cutoff.end(deadline_s), 0.2
        while True:
            status, reason = call()
            if not transient(status) or time.monotonic() + backoff > min(end, self.api.cutoff.at):
                return status, reason
            time.sleep(backoff)
            backoff = min(backoff * 2, 5.0)


def _changed(path: Path, seen: os.stat_result) -> bool:
    """The file at `path` is no longer as it was when it was opened."""
    try:
        return signature(os.lstat(path)) != signature(seen)
    except OSError:
        return True


def _why(status: int, reason: str) -> str:
    return f"HTTP {status}, {reason}" if status else reason
