"""The gateway's HTTP/1.1 reading and writing, over real stream pairs."""

from __future__ import annotations

import asyncio

import pytest

from loom.serving.http1 import (
    BadMessage,
    Message,
    MessageReader,
    encode_request,
    encode_response,
)


def read(raw: bytes, max_body: int = 1000) -> Message | None:
    async def go() -> Message | None:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await MessageReader(reader, max_body=max_body).next()

    return asyncio.run(go())


def test_request_with_length_and_keep_alive() -> None:
    found = read(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcd")
    assert found is not None
    assert (found.method, found.target, found.body, found.keep_alive) == (
        "POST", "/v2/models/m/infer", b"abcd", True,
    )  # fmt: skip
    assert found.header(b"host") == b"x"


def test_chunked_body_and_close() -> None:
    raw = (
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        b"3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n\r\n"
    )
    found = read(raw)
    assert found is not None and found.body == b"abcde" and not found.keep_alive


def test_http10_closes_unless_asked() -> None:
    found = read(b"GET / HTTP/1.0\r\n\r\n")
    assert found is not None and not found.keep_alive


def test_end_between_messages_is_none_and_bad_ones_are_named() -> None:
    assert read(b"") is None
    with pytest.raises(BadMessage, match="Content-Length"):
        read(b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n")
    with pytest.raises(BadMessage) as caught:
        read(b"POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n")
    assert caught.value.status == 413
    with pytest.raises(BadMessage, match="malformed HTTP"):
        read(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n")
    for smuggled in (
        b"Content-Length: -1",
        b"Content-Length: 0\r\nContent-Length: 5",
        b"Content-Length: 5\r\nTransfer-Encoding: chunked",
    ):
        with pytest.raises(BadMessage) as refused:
            read(b"POST / HTTP/1.1\r\n" + smuggled + b"\r\n\r\nhello")
        assert refused.value.status == 400
    with pytest.raises(BadMessage) as too_big:
        read(b"GET / HTTP/1.1\r\nx: " + b"a" * 70_000 + b"\r\n\r\n")
    assert too_big.value.status == 431


def test_pipelined_requests_come_one_at_a_time() -> None:
    """Two requests in one read: the second is kept for the next call, not lost."""

    async def go() -> list[Message | None]:
        reader = asyncio.StreamReader()
        reader.feed_data(
            b"POST /a HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
            b"GET /b HTTP/1.1\r\nConnection: close\r\n\r\n"
        )
        reader.feed_eof()
        messages = MessageReader(reader, max_body=100)
        return [await messages.next(), await messages.next(), await messages.next()]

    first, second, end = asyncio.run(go())
    assert first is not None and (first.target, first.body, first.keep_alive) == ("/a", b"hi", True)
    assert second is not None and (second.method, second.target) == ("GET", "/b")
    assert not second.keep_alive and end is None


def test_forwarded_request_drops_hop_by_hop_headers() -> None:
    found = read(
        b"POST /x HTTP/1.1\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n"
        b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
    )
    assert found is not None
    again = read(encode_request(found))
    assert again is not None
    assert again.body == b"{}"
    assert [name for name, _ in again.headers] == [b"content-type", b"content-length"]


def test_response_round_trip() -> None:
    raw = encode_response(503, b'{"error":"x"}', [(b"content-type", b"application/json")])
    found = read(raw)
    assert found is not None and found.status == 503 and found.body == b'{"error":"x"}'
