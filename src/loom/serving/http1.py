"""Just enough HTTP/1.1 for the deployment gateway: read a request or a response (head and a
body sized by Content-Length or chunked), and write one back. Keep-alive by default, as in 1.1.

The gateway passes messages through; it never needs more of HTTP than this, and the general
clients and servers cost several times as much per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

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


async def read_message(
    reader: asyncio.StreamReader,
    *,
    max_body: int,
    writer: asyncio.StreamWriter | None = None,
) -> Message | None:
    """The next message on the stream; None when the peer closed it between messages. With
    `writer` (a server reading requests), `Expect: 100-continue` is answered before the body."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadMessage("the message ended inside its head") from exc
    except asyncio.LimitOverrunError as exc:
        raise BadMessage("the message head is larger than the reader's limit", 431) from exc
    lines = head[:-4].split(b"\r\n")
    start = lines[0].split(b" ", 2)
    if len(start) < 2:
        raise BadMessage(f"not an HTTP start line: {lines[0][:80]!r}")
    headers = []
    for number, line in enumerate(lines[1:], start=2):
        name, sep, value = line.partition(b":")
        if not sep:  # not echoed: it may hold a credential
            raise BadMessage(f"line {number} of the head is not an HTTP header (no colon)")
        headers.append((name.strip().lower(), value.strip()))
    message = Message(start, headers)
    is_response = start[0].startswith(b"HTTP/")
    version = start[0] if is_response else (start[2] if len(start) > 2 else b"HTTP/1.0")
    connection = (message.header(b"connection") or b"").lower()
    message.keep_alive = (
        b"close" not in connection if version != b"HTTP/1.0" else b"keep-alive" in connection
    )
    if writer is not None and (message.header(b"expect") or b"").lower() == b"100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    message.body = await _read_body(reader, message, max_body)
    return message


async def _read_body(reader: asyncio.StreamReader, message: Message, max_body: int) -> bytes:
    if b"chunked" in (message.header(b"transfer-encoding") or b"").lower():
        return await _read_chunked(reader, max_body)
    length = message.header(b"content-length")
    if length is None:
        return b""
    try:
        size = int(length)
    except ValueError as exc:
        raise BadMessage(f"Content-Length is not a number: {length[:40]!r}") from exc
    if size > max_body:
        raise BadMessage(f"the body is {size} bytes, more than the limit of {max_body}", 413)
    return await reader.readexactly(size) if size else b""


async def _read_chunked(reader: asyncio.StreamReader, max_body: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise BadMessage(f"bad chunk size: {line[:40]!r}") from exc
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        total += size
        if total > max_body:
            raise BadMessage(f"the body is more than the limit of {max_body} bytes", 413)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


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
