"""Accepting every waiting connection at once, for a server on uvloop.

libuv (under uvloop) accepts one connection per turn of the event loop, and a turn of a
saturated model server parses every ready connection's request first: 64 clients connecting
at once to `loom serve` busy with 64-sample requests waited up to 1.5 s to be accepted, one
turn (~20 ms) each, while asyncio's own loop accepts them all in one turn. `Listener` listens
itself and accepts until nothing waits, each time the socket is ready, handing each connection
to the loop as an accepted socket: the server's tail stays its line's, not the accept queue's.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
import sys
from collections.abc import Callable

import uvicorn

# the kernel is out of descriptors or memory: stop accepting for a moment, as asyncio does
RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
PAUSE_S = 1.0


class Listener:
    """TCP listening sockets for (host, port), read by the running loop."""

    def __init__(self, host: str, port: int, backlog: int) -> None:
        self.backlog = backlog
        self.tls: ssl.SSLContext | None = None
        self.sockets: list[socket.socket] = []
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        try:
            for family, kind, proto, _name, address in dict.fromkeys(infos):
                sock = socket.socket(family, kind, proto)
                self.sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(address)
                sock.listen(backlog)
                sock.setblocking(False)
        except OSError:
            self.close()
            raise

    @property
    def port(self) -> int:
        return int(self.sockets[0].getsockname()[1])

    def start(
        self, protocol: Callable[[], asyncio.Protocol], tls: ssl.SSLContext | None = None
    ) -> None:
        """Take up connections with `protocol()` (each over TLS, with `tls`)."""
        self.tls = tls
        loop = asyncio.get_running_loop()
        for sock in self.sockets:
            loop.add_reader(sock.fileno(), self._accept, loop, sock, protocol)

    def _accept(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol: Callable[[], asyncio.Protocol],
    ) -> None:
        for _ in range(self.backlog):
            try:
                conn, _peer = sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return
            except OSError as exc:
                if exc.errno not in RESOURCES:
                    raise
                print(f"accept: {exc.strerror}; pausing {PAUSE_S:g} s", file=sys.stderr)
                loop.remove_reader(sock.fileno())
                loop.call_later(PAUSE_S, self._resume, loop, sock, protocol)
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            loop.create_task(self._connect(loop, conn, protocol, self.tls))

    def _resume(
        self,
        loop: asyncio.AbstractEventLoop,
        sock: socket.socket,
        protocol: Callable[[], asyncio.Protocol],
    ) -> None:
        if sock.fileno() >= 0:
            loop.add_reader(sock.fileno(), self._accept, loop, sock, protocol)

    @staticmethod
    async def _connect(
        loop: asyncio.AbstractEventLoop,
        conn: socket.socket,
        protocol: Callable[[], asyncio.Protocol],
        tls: ssl.SSLContext | None,
    ) -> None:
        try:
            await loop.connect_accepted_socket(protocol, conn, ssl=tls)
        except (OSError, ssl.SSLError):  # gone before it was taken up, or a failed handshake
            conn.close()

    def close(self) -> None:
        for sock in self.sockets:
            if sock.fileno() >= 0:
                with contextlib.suppress(RuntimeError, ValueError):
                    asyncio.get_running_loop().remove_reader(sock.fileno())
                sock.close()


class GreedyServer(uvicorn.Server):
    """uvicorn's server, over a TCP `Listener` of its own (a unix socket stays uvicorn's: the
    few long-lived connections of a gateway or proxy)."""

    listener: Listener | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        config = self.config
        if sockets is not None or config.uds is not None or config.fd is not None:
            await super().startup(sockets)
            return
        try:
            self.listener = Listener(config.host, config.port, config.backlog)
        except OSError as exc:
            print(f"cannot listen on {config.host}:{config.port}: {exc.strerror}", file=sys.stderr)
            raise SystemExit(1) from None
        await super().startup(sockets=[])  # the lifespan, and no listener of uvicorn's
        if self.should_exit:
            return
        loop = asyncio.get_running_loop()

        def protocol() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config,
                server_state=self.server_state,
                app_state=self.lifespan.state,
                _loop=loop,
            )

        self.listener.start(protocol)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.listener is not None:
            self.listener.close()  # stop accepting first, as uvicorn does
        await super().shutdown(sockets)
