"""Ships a learner's log lines and status to the platform: spool first, send in batches, resend.

Every line goes to the spool file before it is sent. Lines stay pending until the API has accepted
them; the API de-duplicates on (job, attempt, learner, seq): a resend after an outage is harmless.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import socket
import threading
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import urlsplit

from loom.learner.collectors import CollectorStopped

if TYPE_CHECKING:
    import ssl
    from http.client import HTTPConnection
    from typing import Any, BinaryIO, TypeAlias

    from loom.learner.collectors import LineCollector, Point

    Item: TypeAlias = tuple[str, str, float] | dict[str, Any] | list[Point] | threading.Event | None

BATCH = 2000
BATCH_BYTES = 1 << 20  # a batch is one transaction on the platform's side: kept short
TAIL = 20
HEARTBEAT_S = 10.0


class Cutoff:
    """When the learner stops retrying what it sends the platform: never, until it is told to
    stop (SIGTERM) while it waits on an unreachable or refusing platform. What is not sent by
    then stays in the spool and the status file, which the platform reads back."""

    def __init__(self) -> None:
        self.at = math.inf

    def cut(self, seconds: float) -> None:
        self.at = min(self.at, time.monotonic() + seconds)

    def end(self, deadline_s: float) -> float:
        """The monotonic time a wait of `deadline_s` from now must end by."""
        return min(time.monotonic() + deadline_s, self.at)


class Api:
    """A keep-alive HTTP/1.1 connection to the platform, re-resolved when it goes away.

    Plain sockets rather than `http.client`: that module's imports alone cost the wrapper ~40 ms
    of start-up, which is most of the platform's overhead on a short job.
    """

    def __init__(
        self,
        url: str,
        token: str,
        server_file: Path | None,
        ca: str | None = None,
        urls: list[str] | None = None,
        cutoff: Cutoff | None = None,
    ) -> None:
        self.url = url
        self.cutoff = cutoff or Cutoff()
        # Several API servers on one database: when one goes away, the next one is tried.
        self._urls = [u for u in urls or [] if u]
        self.refused = False
        self._token = token
        self._ca = ca
        self._server_file = server_file
        self._sock: socket.socket | None = None
        self._reader: BinaryIO | None = None
        self._lock = threading.Lock()

    def _address(self) -> tuple[str, int, str]:
        """Host, port and path prefix of the URL."""
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"the learner reaches the platform over http(s)://, not {self.url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return parts.hostname or "127.0.0.1", port, parts.path.rstrip("/")

    def _connect(self) -> tuple[socket.socket, BinaryIO]:
        if self._sock is None or self._reader is None:
            host, port, _ = self._address()
            sock = socket.create_connection((host, port), timeout=30)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.url.startswith("https:"):
                sock = self._tls().wrap_socket(sock, server_hostname=host)
            self._sock, self._reader = sock, sock.makefile("rb")
        return self._sock, self._reader

    def _tls(self) -> ssl.SSLContext:
        """Trusts the platform's own certificates when given (the chain it serves), else the
        system's; `ssl` is imported only for an HTTPS platform (it slows every start)."""
        import ssl

        context = ssl.create_default_context(cadata=self._ca or None)
        if self._ca:
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # a leaf or intermediate
        return context

    def _rediscover(self) -> None:
        """After a failure: the platform may have come back on another address."""
        self.close()
        if len(self._urls) > 1:
            at = self._urls.index(self.url) if self.url in self._urls else -1
            self.url = self._urls[(at + 1) % len(self._urls)]
            return
        if self._server_file is None:
            return
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.url = json.loads(self._server_file.read_text())["url"]

    def post(self, path: str, body: dict[str, Any]) -> bool:
        """True when the API took the request; False when it is worth sending again later."""
        with self._lock:
            return self._post(path, body)

    def _post(self, path: str, body: dict[str, Any]) -> bool:
        data = json.dumps(body).encode()
        try:
            prefix = self._address()[2]
        except ValueError:
            return False
        head = (
            f"POST {prefix}{path} HTTP/1.1\r\nHost: loom\r\nAuthorization: Bearer {self._token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        try:
            sock, reader = self._connect()
            sock.sendall(head.encode() + data)
            status, closing = _read_response(reader)
        except (OSError, ValueError):
            self._rediscover()
            return False
        if closing:
            self.close()
        if status == 401:  # this attempt's token was revoked: the job was started again, or gone
            self.refused = True
        # A server error or throttling is worth another try; any other answer is final.
        return status < 500 and status != 429

    def connection(self, timeout: float) -> tuple[HTTPConnection, str, str]:
        """A new connection to the platform for requests of another kind (MLflow's client's,
        forwarded): with the URL's path prefix and this learner's authorization."""
        import http.client

        host, port, prefix = self._address()
        if self.url.startswith("https:"):
            found: HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=timeout, context=self._tls()
            )
        else:
            found = http.client.HTTPConnection(host, port, timeout=timeout)
        return found, prefix, f"Bearer {self._token}"

    def twin(self) -> Api:
        """Another connection to the same platform: a long transfer holds it, not this one."""
        return Api(self.url, self._token, self._server_file, self._ca, self._urls, self.cutoff)

    def get_file(self, path: str, sink: BinaryIO) -> tuple[int, str]:
        """GET `path`, its body into `sink` (emptied first) when the answer is 200: the status
        (0 when the platform could not be reached) and, for any other, the platform's reason."""
        sink.seek(0)
        sink.truncate()
        with self._lock:
            return self._exchange(f"GET {path}", None, sink)

    def put_file(self, path: str, source: BinaryIO, size: int) -> tuple[int, str]:
        """PUT the `size` bytes of `source` (a zip) to `path`: as for `get_file`. The body
        waits for the platform's `100 Continue`, so a refusal costs no upload."""
        with self._lock:
            return self._exchange(f"PUT {path}", (source, size), None)

    def _exchange(
        self, request: str, body: tuple[BinaryIO, int] | None, sink: BinaryIO | None
    ) -> tuple[int, str]:
        method, _, path = request.partition(" ")
        try:
            prefix = self._address()[2]
        except ValueError as exc:
            return 0, str(exc)
        head = f"{method} {prefix}{path} HTTP/1.1\r\nHost: loom\r\n"
        head += f"Authorization: Bearer {self._token}\r\n"
        if body is not None:
            head += f"Content-Type: application/zip\r\nContent-Length: {body[1]}\r\n"
            head += "Expect: 100-continue\r\n"
        try:
            sock, reader = self._connect()
            sock.sendall(f"{head}\r\n".encode())
            answer = _read_head(reader)
            if body is not None and answer.status == 100:
                sock.settimeout(30 + body[1] / 2**23)  # the platform unpacks it, then answers
                sock.sendfile(body[0], 0, body[1])
                answer = _read_head(reader)
            reason = _read_body(reader, answer, sink if answer.status == 200 else None)
        except (OSError, ValueError) as exc:
            self._rediscover()
            return 0, f"the platform could not be reached ({exc})"
        if answer.closing or body is not None:  # a refused body was never sent: start afresh
            self.close()
        return answer.status, reason

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._sock is not None:
            self._sock.close()
        self._sock = self._reader = None


class _Head(NamedTuple):
    status: int
    length: int
    chunked: bool
    closing: bool


def _read_head(reader: BinaryIO) -> _Head:
    """A response's status line and headers; after a `100 Continue`, nothing more."""
    status_line = reader.readline()
    if not status_line:
        raise ValueError("connection closed")
    status = int(status_line.split()[1])
    length, chunked, closing = 0, False, False
    while (line := reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            chunked = "chunked" in value
        elif name == "connection":
            closing = value == "close"
    return _Head(status, length, chunked, closing)


def _read_body(reader: BinaryIO, head: _Head, sink: BinaryIO | None = None) -> str:
    """Read a response's body into `sink`, or else its `error` message (a short body only)."""
    kept = bytearray()

    def take(size: int) -> None:
        while size > 0:
            chunk = reader.read(min(size, 1 << 20))
            if not chunk:
                raise ValueError("connection closed in a response's body")
            size -= len(chunk)
            if sink is not None:
                sink.write(chunk)
            elif len(kept) < 1 << 16:
                kept.extend(chunk)

    if head.chunked:
        while (size := int(reader.readline().split(b";")[0], 16)) > 0:
            take(size)
            reader.readline()
        reader.readline()
    else:
        take(head.length)
    try:
        return str(json.loads(kept)["error"]) if kept else ""
    except (ValueError, TypeError, KeyError):
        return kept[:500].decode("utf-8", "replace")


def _read_response(reader: BinaryIO) -> tuple[int, bool]:
    """Read one response, discarding its body: its status, and whether the server closes."""
    head = _read_head(reader)
    _read_body(reader, head)
    return head.status, head.closing


class Shipper:
    """Numbers lines and metric points, spools them, and sends them from a background thread.

    Line collectors run here, on the sending thread, so that the learner's own output is never
    held up by metric extraction.
    """

    def __init__(
        self,
        api: Api,
        base_path: str,
        spool: Path,
        attempt: int,
        learner: int,
        collectors: list[LineCollector] | None = None,
        budgets: dict[str, int | None] | None = None,
    ) -> None:
        """`budgets`: the most lines, line bytes, points and point bytes kept (the job's own
        budgets, `tds.budgets`); past them nothing more is spooled or sent, and one line
        says so."""
        self.api = api
        self.base_path = base_path
        self.attempt = attempt
        self.learner = learner
        self.collectors = collectors or []
        self.tail: deque[str] = deque(maxlen=TAIL)
        self.seq = 0
        self.mseq = 0
        self._metrics: deque[dict[str, Any]] = deque()
        self._queue: queue.Queue[Item] = queue.Queue()
        self._pending: deque[dict[str, Any]] = deque()
        self._statuses: deque[dict[str, Any]] = deque()
        self._spool = spool.open("a", encoding="utf-8")
        self._last_time = 0.0
        self._budgets = budgets or {}
        self._kept = {"lines": 0, "line_bytes": 0, "points": 0, "point_bytes": 0}
        self._cut: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="shipper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def put(self, stream: str, text: str) -> None:
        """Called from reader threads for every line the learner prints."""
        self.tail.append(text)  # here, not in the sender: the outcome message reads it at once
        self._queue.put((stream, text, time.time()))

    def status(self, status: dict[str, Any]) -> None:
        """A progress report, sent after the lines queued before it, off the learner's path."""
        self._queue.put(status)

    def put_points(self, points: list[Point]) -> None:
        """Metric points found by a file collector."""
        if points:
            self._queue.put(points)

    def sync(self, timeout: float = 10.0) -> None:
        """Wait until every line put so far is in the spool file (not necessarily sent)."""
        barrier = threading.Event()
        self._queue.put(barrier)
        barrier.wait(timeout)

    def _take(self, block: bool) -> bool:
        """Move queued lines into the spool and the pending list; False once closed."""
        try:
            item = self._queue.get(timeout=1.0) if block else self._queue.get_nowait()
        except queue.Empty:
            return True
        open_, barriers = True, []
        while True:
            if item is None:
                open_ = False
                self._flush_collectors()
            elif isinstance(item, threading.Event):
                barriers.append(item)
            elif isinstance(item, dict):
                self._statuses.append(item)
            elif isinstance(item, list):
                for point in item:
                    self._record_point(point, time.time())
            else:
                self._record(*item)
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        self._spool.flush()
        for barrier in barriers:
            barrier.set()
        return open_

    def _within(self, kind: str, size: int) -> bool:
        """Whether one more line (`kind` "line") or point fits the budgets; the first that
        does not is said once in the log."""
        rows, sizes = f"{kind}s", f"{kind}_bytes"
        limit_rows, limit_bytes = self._budgets.get(rows), self._budgets.get(sizes)
        over = (limit_rows is not None and self._kept[rows] >= limit_rows) or (
            limit_bytes is not None and self._kept[sizes] + size > limit_bytes
        )
        if not over:
            self._kept[rows] += 1
            self._kept[sizes] += size
            return True
        if kind not in self._cut:
            self._cut.add(kind)
            what = "printed more lines" if kind == "line" else "logged more metric points"
            limit = f"{limit_rows:,} or {(limit_bytes or 0) / 2**20:,.0f} MiB"
            self._write(
                "loom",
                f"loom: learner {self.learner} {what} than its job may keep ({limit}, "
                f"LOOM_MAX_{'LOG' if kind == 'line' else 'METRIC'}_*): later ones are not kept",
                self._last_time,
            )
        return False

    def _record(self, stream: str, text: str, at: float) -> None:
        self._last_time = max(self._last_time, at)  # monotonic per learner
        if self._within("line", len(text)):
            self._write(stream, text, self._last_time)
        for collector in list(self.collectors):
            try:
                points = collector.on_line(text)
            except CollectorStopped as stopped:  # over its time budget: off, and said so
                self.collectors.remove(collector)
                self._write("loom", str(stopped), self._last_time)
                continue
            except Exception:  # a collector's trouble never costs the learner a line
                continue
            for point in points:
                self._record_point(point, self._last_time)

    def _write(self, stream: str, text: str, at: float) -> None:
        self.seq += 1
        line = {"seq": self.seq, "time": at, "stream": stream, "text": text}
        self._spool.write(json.dumps(line) + "\n")
        self._pending.append(line)

    def _flush_collectors(self) -> None:
        for collector in self.collectors:
            try:
                points = collector.flush()
            except Exception:
                continue
            for point in points:
                self._record_point(point, self._last_time)

    def _record_point(self, point: Point, at: float) -> None:
        entry = {"k": "m", "seq": self.mseq + 1, "time": at, **point}
        text = json.dumps(entry)
        if not self._within("point", len(text)):
            return
        self.mseq += 1
        self._spool.write(text + "\n")
        self._metrics.append(entry)

    def _send(self) -> bool:
        while self._pending or self._metrics:
            lines = _batch(self._pending, "text")
            points = _batch(self._metrics, "values")
            body = {
                "attempt": self.attempt,
                "learner": self.learner,
                "lines": lines,
                "metrics": points,
            }
            if not self.api.post(self.base_path + "/logs", body):
                return False
            for _ in lines:
                self._pending.popleft()
            for _ in points:
                self._metrics.popleft()
        while self._statuses:
            body = {"attempt": self.attempt, "learner": self.learner, **self._statuses[0]}
            if not self.api.post(self.base_path + "/status", body):
                return False
            self._statuses.popleft()
        return True

    def _run(self) -> None:
        backoff, open_, last_contact = 0.0, True, time.monotonic()
        while open_ or self._busy:
            if open_:
                open_ = self._take(block=not self._busy)
            if self._busy:
                if self._send():
                    backoff, last_contact = 0.0, time.monotonic()
                else:
                    backoff = min(max(backoff * 2, 0.1), 2.0)
                    time.sleep(backoff)
            elif time.monotonic() - last_contact > HEARTBEAT_S and self._heartbeat():
                last_contact = time.monotonic()

    @property
    def _busy(self) -> bool:
        return bool(self._pending or self._metrics or self._statuses)

    def _heartbeat(self) -> bool:
        body = {"attempt": self.attempt, "learner": self.learner, "lines": []}
        return self.api.post(self.base_path + "/logs", body)

    def close(self, deadline_s: float) -> bool:
        """Stop taking lines and wait until all are sent; False if the deadline (or the
        cutoff) passed first."""
        self._queue.put(None)
        end = self.api.cutoff.end(deadline_s)
        while self._thread.is_alive():
            left = min(end, self.api.cutoff.at) - time.monotonic()
            if left <= 0:
                break
            self._thread.join(timeout=min(left, 0.2))
        self._spool.close()
        return not self._thread.is_alive()

    def report(self, status: dict[str, Any], deadline_s: float) -> bool:
        """Send a status change, retrying until the deadline."""
        body = {"attempt": self.attempt, "learner": self.learner, **status}
        end, backoff = self.api.cutoff.end(deadline_s), 0.1
        while True:
            if self.api.post(self.base_path + "/status", body):
                return True
            if time.monotonic() + backoff > min(end, self.api.cutoff.at):
                return False
            time.sleep(backoff)
            backoff = min(backoff * 2, 2.0)


def _batch(queued: deque[dict[str, Any]], field: str) -> list[dict[str, Any]]:
    """The next entries to send: up to BATCH of them and about BATCH_BYTES (at least one)."""
    out: list[dict[str, Any]] = []
    size = 0
    for entry in queued:
        if len(out) >= BATCH or (out and size > BATCH_BYTES):
            break
        size += len(str(entry.get(field, ""))) + len(str(entry.get("info", ""))) + 64
        out.append(entry)
    return out


SPOOL_TAIL = 64 << 20  # what is read back of a spool: what was not delivered is at its end


def read_spool(path: Path, tail: int = SPOOL_TAIL) -> list[dict[str, Any]]:
    """The lines of a spool file, from its last `tail` bytes only (a learner's whole output
    is never held in the platform's memory); a torn line (a crash mid-write) is skipped."""
    lines: list[dict[str, Any]] = []
    if not path.exists():
        return lines
    with path.open("rb") as spool:
        size = spool.seek(0, os.SEEK_END)
        spool.seek(max(0, size - tail))
        if size > tail:
            spool.readline()  # the first, partial line
        for raw in spool:
            try:
                lines.append(json.loads(raw))
            except ValueError:
                continue
    return lines


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
