"""The model server's own unary gRPC over HTTP/2 (`loom.serving.grpc_wire`), held to two
oracles: the real gRPC client (grpcio's C core) for what a caller sees, and `h2`'s client state
machine, frame by frame, for the protocol itself — `h2` raises when a server overruns a window
or breaks the frame rules, so a server that did would fail these tests."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from loom.serving import grpc_wire
from loom.serving.grpc_wire import Status

h2_connection = pytest.importorskip("h2.connection")
h2_config = pytest.importorskip("h2.config")
h2_events = pytest.importorskip("h2.events")
h2_settings = pytest.importorskip("h2.settings")
uvloop = pytest.importorskip("uvloop")

MAX_MESSAGE = 4 * 2**20
SECRET = "a detail the caller must not see"


class Running:
    """A grpc_wire.Server on a loop of its own (uvloop, as `loom serve` runs it)."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []
        self.loop = uvloop.new_event_loop()
        self.counter = SimpleNamespace(waiting=0)  # calls read and not yet begun
        self.server = grpc_wire.Server(self.handlers(), MAX_MESSAGE, counter=self.counter)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.do(self.server.listen("127.0.0.1:0"))
        self.port = self.server.port
        self.target = f"127.0.0.1:{self.port}"

    def do(self, work: Any, timeout: float = 30.0) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def handlers(self) -> dict[str, grpc_wire.Handler]:
        async def echo(data: bytes, _metadata: dict[str, str]) -> bytes:
            return data

        async def big(data: bytes, _metadata: dict[str, str]) -> bytes:
            size = int(data)
            return bytes(range(256)) * (size // 256) + b"x" * (size % 256)

        async def slow(data: bytes, _metadata: dict[str, str]) -> bytes:
            try:
                await asyncio.sleep(float(data))
            except asyncio.CancelledError:
                self.cancelled.append(data.decode())
                raise
            return b"slept"

        async def fail(_data: bytes, _metadata: dict[str, str]) -> bytes:
            raise Status(grpc.StatusCode.INVALID_ARGUMENT.value[0], "bad input: 100% ünïcode\n")

        async def crash(_data: bytes, _metadata: dict[str, str]) -> bytes:
            raise RuntimeError(SECRET)

        async def meta(_data: bytes, metadata: dict[str, str]) -> bytes:
            return metadata.get("x-who", "").encode()

        found = {"Echo": echo, "Big": big, "Slow": slow, "Fail": fail, "Crash": crash}
        return {f"/t.T/{name}": call for name, call in {**found, "Meta": meta}.items()}

    def stop(self, grace: float = 1.0) -> None:
        self.do(self.server.stop(grace))

    def close(self) -> None:
        self.stop(0.1)
        self.do(asyncio.sleep(0.05))  # the cancelled calls' tasks end
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        assert self.counter.waiting == 0  # every call read was begun, or given up


@pytest.fixture
def running() -> Iterator[Running]:
    server = Running()
    yield server
    server.close()


@pytest.fixture
def channel(running: Running) -> Iterator[grpc.Channel]:
    options = [("grpc.max_receive_message_length", 64 * 2**20)]
    with grpc.insecure_channel(running.target, options=options) as found:
        yield found


def call(channel: grpc.Channel, method: str, data: bytes, **kwargs: Any) -> bytes:
    stub = channel.unary_unary(f"/t.T/{method}")
    return bytes(stub(data, **kwargs))


def failure(channel: grpc.Channel, method: str, data: bytes, **kwargs: Any) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as raised:
        call(channel, method, data, **kwargs)
    return raised.value


# -- through the real gRPC client ---------------------------------------------------------------
def test_calls_many_at_once_on_one_connection(channel: grpc.Channel) -> None:
    stub = channel.unary_unary("/t.T/Echo")
    futures = [stub.future(f"call {n}".encode()) for n in range(300)]
    assert [f.result(timeout=30) for f in futures] == [f"call {n}".encode() for n in range(300)]
    assert call(channel, "Echo", b"") == b""  # an empty message is still one message


def test_large_messages_both_ways_keep_to_the_windows(channel: grpc.Channel) -> None:
    request = bytes(range(256)) * (3 * 2**20 // 256)  # past every initial window
    assert call(channel, "Echo", request) == request
    answer = call(channel, "Big", str(20 * 2**20 + 7).encode())
    assert len(answer) == 20 * 2**20 + 7 and answer[:256] == bytes(range(256))


def test_compressed_requests_are_read(channel: grpc.Channel) -> None:
    for kind in (grpc.Compression.Gzip, grpc.Compression.Deflate):
        data = b"tensor " * 5000
        assert call(channel, "Echo", data, compression=kind) == data


def test_statuses_keep_their_code_and_message(channel: grpc.Channel) -> None:
    error = failure(channel, "Fail", b"")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() == "bad input: 100% ünïcode\n"
    error = failure(channel, "Crash", b"")
    assert error.code() == grpc.StatusCode.INTERNAL
    assert error.details() == "internal error: RuntimeError" and SECRET not in str(error)
    error = failure(channel, "Nothing", b"")
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED and "/t.T/Nothing" in error.details()
    assert call(channel, "Echo", b"still serving") == b"still serving"


def test_a_message_past_the_limit_is_refused_and_the_connection_goes_on(
    channel: grpc.Channel,
) -> None:
    error = failure(channel, "Echo", b"x" * (MAX_MESSAGE + 1))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert call(channel, "Echo", b"next") == b"next"


def test_a_deadline_ends_the_call_on_both_sides(running: Running, channel: grpc.Channel) -> None:
    error = failure(channel, "Slow", b"5", timeout=0.3)
    assert error.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    deadline = time.monotonic() + 5
    while not running.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running.cancelled == ["5"]  # the handler was stopped, not left running
    assert call(channel, "Slow", b"0.01", timeout=5) == b"slept"


def test_metadata_reaches_the_handler(channel: grpc.Channel) -> None:
    assert call(channel, "Meta", b"", metadata=[("x-who", "ada")]) == b"ada"


def test_calls_in_flight_are_answered_when_the_server_stops(running: Running) -> None:
    with grpc.insecure_channel(running.target) as channel, ThreadPoolExecutor(1) as pool:
        stub = channel.unary_unary("/t.T/Slow")
        assert stub(b"0", timeout=5) == b"slept"  # connected
        pending = pool.submit(stub, b"0.5", timeout=10)
        time.sleep(0.2)
        running.stop(grace=5)
        assert pending.result(timeout=10) == b"slept"
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", running.port)) != 0  # no longer listening


# -- frame by frame, through h2's client state machine ------------------------------------------
class Client:
    def __init__(self, port: int, window: int = 65_535) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.h2 = h2_connection.H2Connection(h2_config.H2Configuration(client_side=True))
        self.h2.local_settings = h2_settings.Settings(
            client=True, initial_values={h2_settings.SettingCodes.INITIAL_WINDOW_SIZE: window}
        )
        self.h2.initiate_connection()
        self.events: list[Any] = []
        self.flush()

    def flush(self) -> None:
        self.sock.sendall(self.h2.data_to_send())

    def send(self, name: str, data: bytes, *extra: tuple[str, str], **how: Any) -> int:
        """A call's headers and then `data` as its body, in one DATA frame (`how`: the HTTP
        method, content type and padding)."""
        sid = int(self.h2.get_next_available_stream_id())
        fields = [(":method", how.get("http_method", "POST")), (":scheme", "http"),
                  (":path", f"/t.T/{name}"), (":authority", "x"),
                  ("content-type", how.get("content_type", "application/grpc")),
                  ("te", "trailers"), *extra]  # fmt: skip
        self.h2.send_headers(sid, fields)
        self.h2.send_data(sid, data, end_stream=True, pad_length=how.get("pad"))
        self.flush()
        return sid

    def request(self, name: str, message: bytes, *extra: tuple[str, str], **how: Any) -> int:
        return self.send(name, b"\0" + len(message).to_bytes(4, "big") + message, *extra, **how)

    def until(self, done: Any, acknowledge: bool = True) -> list[Any]:
        """Events until `done(events)`; received DATA is given back as it is read."""
        while not done(self.events):
            data = self.sock.recv(65_536)
            if not data:
                raise ConnectionError("the server closed the connection")
            for event in self.h2.receive_data(data):
                self.events.append(event)
                if isinstance(event, h2_events.DataReceived) and acknowledge:
                    self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            self.flush()
        return self.events

    def answer(self, sid: int) -> tuple[dict[str, str], bytes, dict[str, str]]:
        def ended(events: list[Any]) -> bool:
            return any(isinstance(e, h2_events.StreamEnded) and e.stream_id == sid for e in events)

        self.until(ended)
        headers: list[dict[str, str]] = []
        body = b""
        for event in self.events:
            if getattr(event, "stream_id", None) != sid:
                continue
            if isinstance(event, (h2_events.ResponseReceived, h2_events.TrailersReceived)):
                headers.append({_s(k): _s(v) for k, v in event.headers})
            elif isinstance(event, h2_events.DataReceived):
                body += event.data
        return headers[0], body[5:], headers[1] if len(headers) > 1 else headers[0]

    def close(self) -> None:
        self.sock.close()


def _s(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


@pytest.fixture
def client(running: Running) -> Iterator[Client]:
    found = Client(running.port or 0)
    yield found
    found.close()


def test_a_small_client_window_is_kept_to(running: Running) -> None:
    client = Client(running.port or 0, window=100)
    try:
        sid = client.request("Big", b"300000")  # past the connection's 65,535 too
        headers, body, trailers = client.answer(sid)
        assert headers[":status"] == "200" and trailers["grpc-status"] == "0"
        assert len(body) == 300_000
        sizes = [len(e.data) for e in client.events if isinstance(e, h2_events.DataReceived)]
        assert max(sizes) <= 100  # never past the stream's window (h2 raises on an overrun)
    finally:
        client.close()


def test_a_header_block_in_continuations_and_padded_data(client: Client) -> None:
    long = "v" * 40_000  # past the frame size: h2 sends HEADERS and CONTINUATIONs
    sid = client.send("Meta", b"\0\0\0\0\0", ("x-who", long), pad=20)
    _headers, body, trailers = client.answer(sid)
    assert body == long.encode() and trailers["grpc-status"] == "0"


def test_pings_are_answered_and_unknown_methods_unimplemented(client: Client) -> None:
    client.h2.ping(b"12345678")
    client.flush()
    events = client.until(lambda es: any(isinstance(e, h2_events.PingAckReceived) for e in es))
    acks = [e for e in events if isinstance(e, h2_events.PingAckReceived)]
    assert acks[0].ping_data == b"12345678"
    _headers, _body, trailers = client.answer(client.request("Missing", b""))
    assert trailers["grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0])


def test_what_is_not_a_grpc_call_gets_an_http_status(client: Client) -> None:
    headers, _body, _trailers = client.answer(client.request("Echo", b"", http_method="GET"))
    assert headers[":status"] == "405"
    headers, _body, _trailers = client.answer(client.request("Echo", b"", content_type="text/x"))
    assert headers[":status"] == "415"


def test_two_messages_in_a_unary_call_are_refused(client: Client) -> None:
    _headers, _body, trailers = client.answer(client.send("Echo", b"\0\0\0\0\1a" * 2))
    assert trailers["grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0])


def test_a_gzip_message_and_a_grpc_timeout(client: Client) -> None:
    packed = gzip.compress(b"hello")
    framed = b"\1" + len(packed).to_bytes(4, "big") + packed
    _headers, body, trailers = client.answer(client.send("Echo", framed, ("grpc-encoding", "gzip")))
    assert body == b"hello" and trailers["grpc-status"] == "0"
    sid = client.request("Slow", b"5", ("grpc-timeout", "100m"))
    _headers, _body, trailers = client.answer(sid)
    assert trailers["grpc-status"] == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])


def test_a_reset_stream_cancels_its_call(running: Running, client: Client) -> None:
    sid = client.request("Slow", b"7")
    time.sleep(0.2)
    client.h2.reset_stream(sid)
    client.flush()
    deadline = time.monotonic() + 5
    while not running.cancelled and time.monotonic() < deadline:
        time.sleep(0.02)
    assert running.cancelled == ["7"]
    _headers, body, _trailers = client.answer(client.request("Echo", b"after"))
    assert body == b"after"


def test_a_broken_connection_gets_goaway(running: Running) -> None:
    with socket.create_connection(("127.0.0.1", running.port or 0), timeout=5) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        while chunk := raw.recv(4096):
            received += chunk
    kinds, at = {}, 0
    while at + 9 <= len(received):  # the server's frames, up to its close
        size = int.from_bytes(received[at : at + 3], "big")
        kinds[received[at + 3]] = received[at + 9 : at + 9 + size]
        at += 9 + size
    goaway = kinds[grpc_wire.GOAWAY]
    assert int.from_bytes(goaway[4:8], "big") == grpc_wire.PROTOCOL_ERROR
    assert b"preface" in goaway[8:]


def test_header_blocks_read_again_follow_the_table(client: Client) -> None:
    """Blocks are kept read while the table stands still; as h2 indexes new values and evicts
    old ones (4 KiB of table, 40 values of 200 octets), each call still reads its own."""
    who = [f"{n:03d}" + "w" * 197 for n in range(40)]
    order = [*range(40), *range(40), 3, 3, 3, 39, 0, 39, 0, *range(39, -1, -3)]
    for n in order:
        _headers, body, trailers = client.answer(client.request("Meta", b"", ("x-who", who[n])))
        assert (body.decode(), trailers["grpc-status"]) == (who[n], "0")
    sent = {client.request("Meta", b"", ("x-who", who[n])): who[n] for n in order}  # at once
    assert {sid: client.answer(sid)[1].decode() for sid in sent} == sent


def test_what_follows_an_answered_stream_is_read_and_dropped(client: Client) -> None:
    """A request past the limit is answered (RESOURCE_EXHAUSTED) before it is all sent; the
    rest of it, and its trailers, still in flight, are dropped quietly: the trailers' header
    block is read all the same, so the next call's headers still decode."""
    client.until(lambda es: any(isinstance(e, h2_events.RemoteSettingsChanged) for e in es))
    sid = int(client.h2.get_next_available_stream_id())
    head = [(":method", "POST"), (":scheme", "http"), (":path", "/t.T/Echo"), (":authority", "x")]
    client.h2.send_headers(sid, [*head, ("content-type", "application/grpc")])
    framed = b"\0" + (MAX_MESSAGE + 100).to_bytes(4, "big") + b"x" * (MAX_MESSAGE + 100)
    for at in range(0, len(framed), 16_384):
        client.h2.send_data(sid, framed[at : at + 16_384])
    client.h2.send_headers(sid, [("x-trailer", "a value the table now holds")], end_stream=True)
    client.flush()
    _headers, _body, trailers = client.answer(sid)
    assert trailers["grpc-status"] == str(grpc.StatusCode.RESOURCE_EXHAUSTED.value[0])
    _headers, body, trailers = client.answer(
        client.request("Meta", b"", ("x-who", "a value the table now holds"))
    )
    assert (body, trailers["grpc-status"]) == (b"a value the table now holds", "0")


def _entered(name: bytes, value: bytes, name_index: int = 0) -> bytes:
    """A literal field entered in the table (HPACK §6.2.1), its name a static entry or new."""
    head = grpc_wire._integer(name_index, 6, 0x40)
    if not name_index:
        head += grpc_wire._integer(len(name), 7, 0) + name
    return head + grpc_wire._integer(len(value), 7, 0) + value


def test_blocks_that_enter_fields_without_referring_to_them_keep_the_table(
    running: Running,
) -> None:
    """HAProxy's way: every field a literal entered in the table, none referred to. Such a
    block is read once and kept; each time it comes again, its fields are entered again, so
    that a later block referring to the table (index 62: the newest entry) still reads what
    the peer meant. Blocks are sent raw, frame by frame."""
    common = b"\x83\x86" + _entered(b"", b"x", 1) + _entered(b"", b"/t.T/Meta", 4)
    common += _entered(b"", b"application/grpc", 31)
    blocks = [common + _entered(b"x-who", who) for who in (b"ada", b"bob", b"cy")]
    order = [0, 1, 0, 2, 2, 1, 0, 0, 1, 2, 1] * 5
    sent = [blocks[n] for n in order]
    # then a block made of references only: :authority, :path, content-type and x-who as the
    # newest four entries (x-who the newest: 62), after :method POST and :scheme http
    sent.append(b"\x83\x86\xc1\xc0\xbf\xbe")
    expected = [(b"ada", b"bob", b"cy")[n] for n in order] + [(b"ada", b"bob", b"cy")[order[-1]]]
    message = b"\0\0\0\0\0"
    with socket.create_connection(("127.0.0.1", running.port or 0), timeout=10) as raw:
        out = grpc_wire.PREFACE + grpc_wire.frame(grpc_wire.SETTINGS, 0, 0)
        for n, block in enumerate(sent):
            sid = 1 + 2 * n
            out += grpc_wire.frame(grpc_wire.HEADERS, grpc_wire.END_HEADERS, sid, block)
            out += grpc_wire.frame(grpc_wire.DATA, grpc_wire.END_STREAM, sid, message)
        raw.sendall(out)
        bodies: dict[int, bytes] = {}
        received = b""
        while len(bodies) < len(sent):
            chunk = raw.recv(65_536)
            assert chunk, f"the server closed the connection after {len(bodies)} answers"
            received += chunk
            while len(received) >= 9 and len(received) >= 9 + int.from_bytes(received[:3], "big"):
                size = int.from_bytes(received[:3], "big")
                kind, sid = received[3], int.from_bytes(received[5:9], "big")
                if kind == grpc_wire.DATA:
                    bodies[sid] = received[9 + 5 : 9 + size]
                assert kind != grpc_wire.GOAWAY, received[9 : 9 + size]
                received = received[9 + size :]
    assert [bodies[1 + 2 * n] for n in range(len(sent))] == expected
