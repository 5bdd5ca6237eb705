"""Just enough HTTP/1.1 for the deployment gateway: read a request or a response (parsed by
llhttp, through httptools), and write one back. Keep-alive by default, as in 1.1.

The gateway passes messages through; it never needs more of HTTP than this, and the general
clients and servers cost several times as much per request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import httptools

HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"transfer-encoding",
        b"content-length",
        b"expect",
        b"te",
        b"trailer",
        b"upgrade",
        b"proxy-connection",
    }
)
# the caller's credentials: checked by the gateway, never passed on to a replica (user code)
PRIVATE = frozenset({b"authorization", b"proxy-authorization", b"cookie"})
NOT_FORWARDED = HOP_BY_HOP | PRIVATE
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class BadMessage(Exception):
    """A message this side cannot read; `status` is what to answer a client with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Message:
    """A request (`method`, `target`) or a response (`status`), with lower-cased header names."""

    start: list[bytes]
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    keep_alive: bool = True
    _index: dict[bytes, bytes] = field(default_factory=dict, repr=False)

    def header(self, name: bytes) -> bytes | None:
        if not self._index:
            self._index = dict(self.headers)
        return self._index.get(name)

    @property
    def method(self) -> str:
        return self.start[0].decode("latin-1")

    @property
    def target(self) -> str:
        return self.start[1].decode("latin-1")

    @property
    def status(self) -> int:
        return int(self.start[1])


MAX_HEAD = 64 * 1024  # bytes of request line and headers
READ_SIZE = 64 * 1024


class MessageReader:
    """The messages on one connection, parsed by llhttp (`httptools`, the parser uvicorn and
    Node use) rather than by hand: a negative or doubled Content-Length, Content-Length beside
    chunked, bad chunk sizes and the other request-smuggling shapes are refused, as `BadMessage`
    (400), and the caller closes the connection. Keep one per connection: bytes read past a
    message (a pipelined request) are kept for the next.

    A request or a response, told by the first bytes. With `writer` (a server reading
    requests), `Expect: 100-continue` is answered before the body is read."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        *,
        max_body: int,
        writer: asyncio.StreamWriter | None = None,
    ) -> None:
        self.reader, self.writer, self.max_body = reader, writer, max_body
        self.parser: httptools.HttpRequestParser | httptools.HttpResponseParser | None = None
        self.done: deque[Message] = deque()
        self.started = False  # inside a message
        self.problem: BadMessage | None = None
        self._reset()

    def _reset(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_size = 0
        self.body: list[bytes] = []
        self.size = 0

    async def next(self) -> Message | None:
        """The next message; None when the peer closed the connection between messages."""
        while not self.done:
            data = await self.reader.read(READ_SIZE)
            if not data:
                if self.started:
                    raise BadMessage("the message ended before it was complete")
                return None
            if self.parser is None:
                response = data.startswith(b"HTTP/")
                self.parser = (
                    httptools.HttpResponseParser if response else httptools.HttpRequestParser
                )(self)
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserError as exc:
                if self.problem is not None:
                    raise self.problem from exc
                raise BadMessage(f"malformed HTTP: {_said(exc)}") from exc
        return self.done.popleft()

    # -- the parser's callbacks --------------------------------------------------------------
    def on_message_begin(self) -> None:
        self.started = True
        self._reset()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_size += len(name) + len(value) + 4
        if self.head_size > MAX_HEAD:
            self._refuse(BadMessage("the message head is larger than the limit", 431))
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        named = dict(self.headers)
        length = named.get(b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body:
            size = int(length)
            self._refuse(
                BadMessage(f"the body is {size} bytes, more than the limit of {self.max_body}", 413)
            )
        expect = named.get(b"expect", b"").lower()
        if self.writer is not None and expect == b"100-continue":
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self.size += len(body)
        if self.size > self.max_body:
            self._refuse(
                BadMessage(f"the body is more than the limit of {self.max_body} bytes", 413)
            )
        self.body.append(body)

    def on_message_complete(self) -> None:
        parser = self.parser
        assert parser is not None
        if isinstance(parser, httptools.HttpResponseParser):
            version = parser.get_http_version().encode()
            start = [b"HTTP/" + version, str(parser.get_status_code()).encode()]
        else:
            start = [parser.get_method(), self.url]
        message = Message(start, self.headers, b"".join(self.body))
        message.keep_alive = parser.should_keep_alive()
        self.done.append(message)
        self.started = False

    def _refuse(self, problem: BadMessage) -> None:
        """Stop parsing: an exception in a callback ends `feed_data` with a parser error."""
        self.problem = problem
        raise problem


def _said(exc: Exception) -> str:
    """llhttp's reason, without its error code's prefix."""
    return str(exc).removeprefix("Expected ").strip() or type(exc).__name__


def encode_request(message: Message, extra: Sequence[tuple[bytes, bytes]] = ()) -> bytes:
    """The request as the gateway forwards it: end-to-end headers but the caller's credentials,
    a Content-Length body."""
    head = [message.start[0] + b" " + message.start[1] + b" HTTP/1.1"]
    head += [name + b": " + value for name, value in message.headers if name not in NOT_FORWARDED]
    head += [name + b": " + value for name, value in extra]
    head.append(b"content-length: " + str(len(message.body)).encode())
    return b"\r\n".join(head) + b"\r\n\r\n" + message.body


def encode_response(
    status: int,
    body: bytes,
    headers: Sequence[tuple[bytes, bytes]] = (),
    *,
    reason: bytes | None = None,
    keep_alive: bool = True,
) -> bytes:
    text = reason if reason is not None else REASONS.get(status, "").encode()
    head = [b"HTTP/1.1 " + str(status).encode() + b" " + text]
    head += [name + b": " + value for name, value in headers if name not in HOP_BY_HOP]
    head.append(b"content-length: " + str(len(body)).encode())
    if not keep_alive:
        head.append(b"connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + body
