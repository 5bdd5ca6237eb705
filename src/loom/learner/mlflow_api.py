"""MLflow's API for the training code of a job, on the learner's loopback: it forwards what
MLflow's client sends to the platform's own MLflow API, so that training code written for
MLflow runs unchanged and what it logs is in the platform's store, like anything logged from a
notebook.

The learner gets `MLFLOW_TRACKING_URI` (this server) and `MLFLOW_TRACKING_TOKEN` (a secret of
this learner's alone): the job's platform token never reaches the training code, and no other
process on the machine can write into this job. The platform sees the job's token, so a run
the code starts is a run of the job, a child of the job's own run, in the job's project unless
the code names another; the code cannot change another job's runs.
"""

from __future__ import annotations

import contextlib
import hmac
import secrets
import selectors
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, BinaryIO

if TYPE_CHECKING:
    from http.client import HTTPConnection

# What is forwarded: MLflow's tracking, registry and logged-model API, and its artifact proxy.
FORWARDED = ("/api/2.0/mlflow/", "/api/2.0/mlflow-artifacts/", "/api/3.0/mlflow/")
CHUNK = 1 << 16
TIMEOUT_S = 120.0
MAX_CONNECTIONS = 16  # requests forwarded at once (a thread each); more wait in the listen queue
Connect = Callable[[float], tuple["HTTPConnection", str, str]]  # → connection, prefix, auth


class Endpoint:
    """The HTTP server on 127.0.0.1 (a free port), in a daemon thread. `connect` opens a
    connection to the platform: with the path prefix of its URL and the job's authorization."""

    def __init__(self, connect: Connect) -> None:
        self.token = secrets.token_urlsafe(32)
        handler = _handler(connect, self.token)
        self.server = _BoundedServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.server.timeout = 0  # `handle_request` is called once a connection waits
        # Woken, not polled: the learner's end waits for `close`, which returns at once.
        self._stopping = threading.Event()
        self._wake, self._woken = socket.socketpair()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """What the learner gets: where MLflow's client logs, and with which secret."""
        return {"MLFLOW_TRACKING_URI": self.url, "MLFLOW_TRACKING_TOKEN": self.token}

    def start(self) -> Endpoint:
        self.thread.start()
        return self

    def _serve(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.server, selectors.EVENT_READ)
            selector.register(self._woken, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _events in selector.select():
                    if key.fileobj is self.server and not self._stopping.is_set():
                        self.server.handle_request()

    def close(self) -> None:
        """Stop taking connections, now (those being forwarded end with the process)."""
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._wake.send(b"x")
        if self.thread.ident is not None:
            self.thread.join()
        self.server.server_close()
        self._wake.close()
        self._woken.close()


class _BoundedServer(ThreadingHTTPServer):
    """At most MAX_CONNECTIONS connections served at once (each with its thread; bodies are
    streamed, never held); one more that finds no slot within a second is closed unanswered, so
    the job cannot make this process (outside the job's cgroup) hold more than that."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._holding: set[int] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(timeout=1.0):
            request.close()  # not `shutdown_request`: it holds no slot to give back
            return
        self._holding.add(id(request))
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            if id(request) in self._holding:
                self._holding.discard(id(request))
                self._slots.release()


class _Limited:
    """A request's body as a file of exactly its declared length, read in chunks."""

    def __init__(self, source: BinaryIO, length: int) -> None:
        self.source, self.left = source, length

    def read(self, size: int = -1) -> bytes:
        wanted = self.left if size < 0 else min(size, self.left)
        data = self.source.read(wanted) if wanted else b""
        self.left -= len(data)
        return data


def _handler(connect: Connect, token: str) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 60  # a connection that says nothing is closed

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def do_PATCH(self) -> None:
            self._serve()

        def do_PUT(self) -> None:
            self._serve()

        def do_DELETE(self) -> None:
            self._serve()

        def _serve(self) -> None:
            given = (self.headers.get("Authorization") or "").encode()
            if not hmac.compare_digest(given, expected):
                self._refuse(401, "UNAUTHENTICATED", "not this learner's MLFLOW_TRACKING_TOKEN")
                return
            if not self.path.startswith(FORWARDED):
                self._refuse(404, "ENDPOINT_NOT_FOUND", f"{self.path[:200]} is not MLflow's API")
                return
            length = self.headers.get("Content-Length") or "0"
            if not length.isdigit() or self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                self._refuse(400, "INVALID_PARAMETER_VALUE", "send a body with a Content-Length")
                return
            self._forward(int(length))

        def _forward(self, length: int) -> None:
            try:
                upstream, prefix, authorization = connect(TIMEOUT_S)
            except (OSError, ValueError) as exc:
                self._drain(length)
                self._refuse(503, "TEMPORARILY_UNAVAILABLE", f"the platform: {exc}")
                return
            headers = {"Authorization": authorization, "Content-Length": str(length)}
            if self.headers.get("Content-Type"):
                headers["Content-Type"] = self.headers["Content-Type"]
            started = False
            try:
                body = _Limited(self.rfile, length) if length else None  # type: ignore[arg-type]
                upstream.request(self.command, prefix + self.path, body=body, headers=headers)
                answer = upstream.getresponse()
                started = True
                self.send_response(answer.status)
                for name in ("Content-Type", "Content-Length", "Content-Disposition"):
                    if answer.getheader(name):
                        self.send_header(name, answer.getheader(name) or "")
                if answer.getheader("Content-Length") is None:
                    self.close_connection = True
                self.end_headers()
                while chunk := answer.read(CHUNK):
                    self.wfile.write(chunk)
            except OSError as exc:  # the platform went away mid-way: the client retries
                self.close_connection = True
                if not started:
                    self._refuse(503, "TEMPORARILY_UNAVAILABLE", f"the platform: {exc}")
            finally:
                upstream.close()

        def _drain(self, length: int) -> None:
            reader = _Limited(self.rfile, length)  # type: ignore[arg-type]
            while reader.read(CHUNK):
                pass

        def _refuse(self, status: int, code: str, message: str) -> None:
            import json

            data = json.dumps({"error_code": code, "message": message}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the learner's log is the user's output, not this server's

    return Handler
