"""The wrapper's shipper: everything spooled first, resent until the API takes it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from loom.learner.shipper import Api, Shipper, read_spool


class FlakyApi(BaseHTTPRequestHandler):
    """Answers 503 to the first requests, then 200; records what it accepted."""

    failures = 3
    accepted: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        if cls.failures > 0:
            cls.failures -= 1
            self.send_response(503)
        else:
            cls.accepted.append(body)
            self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        return None


def test_lines_survive_an_outage_in_order(tmp_path: Path) -> None:
    """Lines sent while the API fails are spooled and delivered once it answers, in order."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FlakyApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    shipper = Shipper(Api(url, "t", None), "/x", tmp_path / "spool.jsonl", 1, 1)
    shipper.start()
    for i in range(1, 101):
        shipper.put("stdout", f"line {i}")
    assert shipper.close(deadline_s=30)
    server.shutdown()
    delivered = [line["text"] for body in FlakyApi.accepted for line in body["lines"]]
    assert delivered == [f"line {i}" for i in range(1, 101)]
    spooled = read_spool(tmp_path / "spool.jsonl")
    assert [line["seq"] for line in spooled] == list(range(1, 101))


def test_unreachable_api_is_retried_not_fatal(tmp_path: Path) -> None:
    """With nothing listening, a post is reported as not done, and the lines stay spooled."""
    api = Api("http://127.0.0.1:9", "t", None)
    assert api.post("/x", {"a": 1}) is False
    shipper = Shipper(api, "/x", tmp_path / "spool.jsonl", 1, 1)
    shipper.start()
    shipper.put("stderr", "kept")
    assert shipper.close(deadline_s=0.5) is False
    assert read_spool(tmp_path / "spool.jsonl")[0]["text"] == "kept"


def test_torn_spool_line_is_skipped(tmp_path: Path) -> None:
    """A spool whose last line was cut by a crash still reads."""
    spool = tmp_path / "spool.jsonl"
    spool.write_text('{"seq": 1, "text": "a"}\n{"seq": 2, "te')
    assert read_spool(spool) == [{"seq": 1, "text": "a"}]


class Refusing(BaseHTTPRequestHandler):
    """Answers 401, as the API does to a revoked token."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(401)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        return None


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_a_refused_token_is_noticed() -> None:
    server, url = serve(Refusing)
    api = Api(url, "t", None)
    assert api.post("/x", {"a": 1}) is True  # final: not worth sending again
    assert api.refused
    server.shutdown()


def test_the_next_server_is_tried_when_one_is_gone() -> None:
    """Several API servers: a post that fails on one goes to the next on the list."""
    FlakyApi.failures, FlakyApi.accepted = 0, []
    server, url = serve(FlakyApi)
    gone = "http://127.0.0.1:9"
    api = Api(gone, "t", None, urls=[gone, url])
    assert api.post("/x", {"a": 1}) is False  # the first is down
    assert api.post("/x", {"a": 2}) is True  # the second took it
    assert FlakyApi.accepted == [{"a": 2}] and not api.refused
    server.shutdown()
