"""The wrapper's side of moving checkpoints through the API: which files it sends, and when."""

from __future__ import annotations

import io
import os
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

from loom.learner.shipper import Api
from loom.learner.transfer import ChangeTracker, Signature, scan, transient


def sig(size: int, mtime: int = 1, inode: int = 1) -> Signature:
    return size, mtime, inode


def test_a_file_is_sent_once_it_stayed_the_same_between_two_scans() -> None:
    """A file seen once is not sent; seen unchanged a second time, it is; then not again."""
    tracker = ChangeTracker()
    assert tracker.changes(clock_ns=0, now={"a": sig(1)}).upload == []
    changes = tracker.changes(clock_ns=0, now={"a": sig(1)})
    assert changes.upload == ["a"]
    tracker.delivered({"a": sig(1)}, changes.deleted)
    assert not tracker.changes(clock_ns=0, now={"a": sig(1)})


def test_a_file_still_being_written_waits() -> None:
    """A file that grows between scans is sent only when two scans agree, and sent again when
    it changes after it was sent."""
    tracker = ChangeTracker()
    for size in (1, 2, 3):
        assert tracker.changes(clock_ns=0, now={"a": sig(size)}).upload == []
    assert tracker.changes(clock_ns=0, now={"a": sig(3)}).upload == ["a"]
    tracker.delivered({"a": sig(3)}, [])
    assert tracker.changes(clock_ns=0, now={"a": sig(4, mtime=2)}).upload == []
    assert tracker.changes(clock_ns=0, now={"a": sig(4, mtime=2)}).upload == ["a"]


def test_a_file_no_one_writes_to_any_more_is_sent_at_once() -> None:
    """A checkpoint rewritten between every two scans is still sent, as it is between two
    writes: one not written to for a moment is complete."""
    tracker = ChangeTracker()
    written_at = 10**18
    assert tracker.changes({"a": sig(1, mtime=written_at)}, clock_ns=written_at).upload == []
    settled = written_at + 10**9
    assert tracker.changes({"a": sig(2, mtime=written_at)}, clock_ns=settled).upload == ["a"]


def test_the_final_scan_sends_every_change_at_once() -> None:
    """After the command, nothing is written any more: every changed file goes."""
    tracker = ChangeTracker({"kept": sig(1)})
    changes = tracker.changes(clock_ns=0, now={"kept": sig(1), "new": sig(5)}, final=True)
    assert changes.upload == ["new"]


def test_deletions_are_of_files_sent_before() -> None:
    """A file deleted after it was sent is named once; one that never was is not."""
    tracker = ChangeTracker({"old": sig(1)})
    tracker.changes(clock_ns=0, now={"old": sig(1), "brief": sig(1)})
    changes = tracker.changes(clock_ns=0, now={})
    assert (changes.upload, changes.deleted) == ([], ["old"])
    tracker.delivered({}, changes.deleted)
    assert not tracker.changes(clock_ns=0, now={})


def test_a_failed_upload_is_tried_again() -> None:
    """What was not delivered is still a change at the next scan."""
    tracker = ChangeTracker({"gone": sig(1)})
    tracker.changes(clock_ns=0, now={"a": sig(1)})
    first = tracker.changes(clock_ns=0, now={"a": sig(1)})
    assert (first.upload, first.deleted) == (["a"], ["gone"])
    again = tracker.changes(clock_ns=0, now={"a": sig(1)})
    assert (again.upload, again.deleted) == (["a"], ["gone"])


def test_a_scan_follows_no_link(tmp_path: Path) -> None:
    """Links the learner left, and the deletions list's name, are not checkpoint files."""
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to("/etc/passwd")
    (tmp_path / ".loom-deleted.json").write_text("[]")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_text("yy")
    found = scan(tmp_path)
    assert sorted(found) == ["real", "sub/b"]
    assert found["sub/b"][0] == 2


def test_which_answers_are_worth_another_try() -> None:
    """No answer, a server error and throttling are; a refusal is not."""
    assert [transient(s) for s in (0, 503, 429, 200, 400, 401, 409)] == [True] * 3 + [False] * 4


class Files(BaseHTTPRequestHandler):
    """GET answers a zip; PUT refuses `/refused` before its body (as the platform does to a
    learner it will not hear), and takes any other."""

    protocol_version = "HTTP/1.1"
    received: ClassVar[list[bytes]] = []
    served = b"PK\x05\x06" + b"\0" * 18  # an empty zip

    def do_GET(self) -> None:
        self._answer(200, self.served, "application/zip")

    def handle_expect_100(self) -> bool:
        if self.path == "/refused":
            self._answer(409, b'{"error": "attempt 1 of job j is over"}', "application/json")
            return False
        return super().handle_expect_100()

    def do_PUT(self) -> None:
        type(self).received.append(self.rfile.read(int(self.headers["Content-Length"])))
        self._answer(200, b'{"files": 1}', "application/json")

    def _answer(self, status: int, body: bytes, kind: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


def test_files_go_up_after_100_continue_and_a_refusal_costs_no_upload(tmp_path: Path) -> None:
    """A PUT's body follows the server's `100 Continue`; a refusal instead is read with its
    reason, and the next request still works; a GET's body lands in the file given."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = Api(f"http://127.0.0.1:{server.server_address[1]}", "t", None).twin()
    body = tmp_path / "body.zip"
    body.write_bytes(b"x" * 100_000)
    try:
        with body.open("rb") as source:
            assert api.put_file("/refused", source, 100_000) == (409, "attempt 1 of job j is over")
            assert api.put_file("/taken", source, 100_000)[0] == 200
        sink = io.BytesIO(b"left from a broken try")
        assert api.get_file("/code", sink) == (200, "")
    finally:
        server.shutdown()
    assert Files.received == [b"x" * 100_000]
    assert zipfile.ZipFile(sink).namelist() == []
    assert Api("http://127.0.0.1:9", "t", None).get_file("/x", io.BytesIO())[0] == 0
    assert os.path.exists(body)
