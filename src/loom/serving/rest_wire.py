"""The model server's HTTP/1 protocol: uvicorn's, with each response written in one write,
requests counted for the data plane from when they are read, and V2 inference requests (the
hot route) answered by the protocol itself, without ASGI."""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any, cast

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from loom.serving.dataplane import DataPlane
from loom.serving.rest import InferRoute, infer_target


class _WholeWrites:
    """A connection's transport whose writes in one turn of the event loop leave in one: a
    response's head and body together. uvicorn writes them apart, and a replica killed between
    the two (descheduled on a busy machine) left HAProxy with a head it had already passed on,
    so it could not send the request to another replica, and the caller got a cut answer."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(bytes(data))

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Infer:
    """An inference request the protocol answers itself: what uvicorn's request cycle would
    hold of it (its body so far, and the flags the protocol reads), without the ASGI scope,
    events and messages that cost a small request a fifth of its time."""

    __slots__ = ("chunks", "disconnected", "headers", "keep_alive", "response_complete", "target")

    def __init__(
        self, target: tuple[str, str | None], headers: list[tuple[bytes, bytes]], keep_alive: bool
    ) -> None:
        self.target = target
        self.headers = headers  # its own: the next request's head gets a list of its own
        self.chunks: list[bytes] = []
        self.keep_alive = keep_alive
        self.response_complete = False
        self.disconnected = False

    @property
    def message_event(self) -> _Infer:  # uvicorn sets it when the connection is lost
        return self

    def set(self) -> None:
        pass


class WholeResponses(HttpToolsProtocol):
    """uvicorn's HTTP/1 protocol, each response written at once (`_WholeWrites`), and each
    request counted by the data plane from when its head is read (`DataPlane.waiting`) until
    the app takes it up. A burst read in one turn of the loop is then a burst to the plane:
    counted only once begun, each request found itself alone and ran at once on the loop, one
    by one, never batched and never in the line.

    With a `route`, V2 inference requests are answered here, without ASGI: their body read,
    the route called, the reply written. A request that is not simply that (another route,
    `Expect: 100-continue`, an upgrade, one pipelined behind another) goes the ASGI way."""

    plane: DataPlane | None = None  # set by `counting`
    route: InferRoute | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting = 0  # requests read here that the app has not taken up
        self._app = self.app
        self.app = self._begin

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(cast(asyncio.Transport, _WholeWrites(transport)))

    def on_headers_complete(self) -> None:
        cycle = self.cycle
        if self.route is not None and self._answer_here(cycle):
            return
        super().on_headers_complete()
        if self.plane is not None and self.cycle is not cycle:  # a request to run
            self.waiting += 1
            self.plane.waiting += 1

    def _answer_here(self, cycle: Any) -> bool:
        """Whether this request is one to answer here (its `_Infer` made if so)."""
        if self.expect_100_continue or (cycle is not None and not cycle.response_complete):
            return False
        parser = self.parser
        if parser.get_method() != b"POST" or parser.should_upgrade():
            return False
        path = httptools.parse_url(self.url).path
        if b"%" in path:
            return False
        target = infer_target("POST", path.decode("ascii", "replace"))
        if target is None:
            return False
        keep_alive = parser.get_http_version() != "1.0" and parser.should_keep_alive()
        self.cycle = _Infer(target, self.headers, keep_alive)  # type: ignore[assignment]
        self.waiting += 1
        if self.plane is not None:
            self.plane.waiting += 1
        return True

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if isinstance(cycle, _Infer):
            cycle.chunks.append(body)
        else:
            super().on_body(body)

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if isinstance(cycle, _Infer):
            task = self.loop.create_task(self._infer(cycle))
            task.add_done_callback(self.tasks.discard)
            self.tasks.add(task)  # a graceful shutdown waits for it
        else:
            super().on_message_complete()

    async def _infer(self, cycle: _Infer) -> None:
        plane, route = self.plane, self.route
        assert plane is not None and route is not None
        if self.waiting:
            self.waiting -= 1
            plane.waiting -= 1
        plane.active += 1
        try:
            body = b"".join(cycle.chunks)
            status, headers, payload = await route(*cycle.target, body, cycle.headers)
        finally:
            plane.active -= 1
        if cycle.disconnected:
            return
        head = [_STATUS.get(status) or _status_line(status)]
        head += [b"%s: %s\r\n" % pair for pair in headers]
        if not cycle.keep_alive:
            head.append(b"connection: close\r\n")
        self.transport.write(b"".join(head) + b"\r\n" + payload)
        cycle.response_complete = True
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()

    async def _begin(self, scope: Any, receive: Any, send: Any) -> None:
        if self.waiting and self.plane is not None:
            self.waiting -= 1
            self.plane.waiting -= 1
        await self._app(scope, receive, send)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.plane is not None:  # pipelined requests the app will never take up
            self.plane.waiting -= self.waiting
        self.waiting = 0
        super().connection_lost(exc)


def _status_line(status: int) -> bytes:
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = ""
    return f"HTTP/1.1 {status} {phrase}\r\n".encode()


_STATUS = {status: _status_line(status) for status in (200, 400, 404, 500, 503)}


def counting(plane: DataPlane, route: InferRoute | None = None) -> type[WholeResponses]:
    """WholeResponses counting its requests for `plane`, and answering `route`'s requests
    itself."""
    return type("Counting", (WholeResponses,), {"plane": plane, "route": route})
