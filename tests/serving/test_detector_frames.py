"""The detector reads the gateway's frames from its pipe in batches: all that queued at once,
a frame split across reads kept until its body is whole, a bad header skipped and told at once.
No Alibi Detect: only the framing, on a real pipe."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import suppress

import pytest

from loom.serving.detector import Frames


def frame(request_id: str, body: bytes) -> bytes:
    header = {"id": request_id, "version": "1", "time": 0.0, "n": len(body)}
    return json.dumps(header).encode() + b"\n" + body


@pytest.fixture
def pipe() -> Iterator[tuple[Frames, int]]:
    read, write = os.pipe()
    with os.fdopen(read, "rb", buffering=0) as source:
        yield Frames(source), write
        with suppress(OSError):  # a test may have closed it to end the input
            os.close(write)


def test_frames_already_in_the_pipe_come_as_one_batch(pipe: tuple[Frames, int]) -> None:
    """Three frames written before the read are returned together, bodies intact (a newline
    inside a body does not split it)."""
    frames, write = pipe
    os.write(write, frame("a", b'{"x": 1}') + frame("b", b"{\n}") + frame("c", b"[]"))
    batch = frames.batch()
    assert batch is not None
    assert [(h["id"], body) for h, body in batch] == [
        ("a", b'{"x": 1}'),
        ("b", b"{\n}"),
        ("c", b"[]"),
    ]


def test_a_frame_split_across_reads_waits_for_its_body(pipe: tuple[Frames, int]) -> None:
    """A frame whose body has not all come yet is not returned until it has."""
    frames, write = pipe
    whole = frame("a", b'{"instances": [[1, 2]]}')
    os.write(write, frame("first", b"{}") + whole[:-5])
    first = frames.batch()
    assert first is not None and [h["id"] for h, _ in first] == ["first"]
    os.write(write, whole[-5:])
    second = frames.batch()
    assert second is not None and second[0][1] == b'{"instances": [[1, 2]]}'


def test_a_bad_header_is_counted_and_skipped(pipe: tuple[Frames, int]) -> None:
    """A header that is not JSON, or names no size, is counted as bad and returned at once,
    and the frame after it is still read; the count is the last batch's; the end of input is
    None."""
    frames, write = pipe
    os.write(write, b"not a header\n")
    assert frames.batch() == [] and frames.bad == 1
    os.write(write, b'{"id": "x"}\n' + frame("b", b"{}"))
    batch = frames.batch()
    assert batch is not None and [h["id"] for h, _ in batch] == ["b"] and frames.bad == 1
    os.close(write)
    assert frames.batch() is None
