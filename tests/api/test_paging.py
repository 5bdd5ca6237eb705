"""Cursors: what the server hands out comes back as the same key; anything else is a 400."""

from __future__ import annotations

import base64

import pytest

from loom.api.paging import decode_cursor, encode_cursor
from loom.domain.errors import InvalidInput


def test_a_cursor_round_trips() -> None:
    assert decode_cursor(encode_cursor(1_735_689_600.25, "training-abc")) == (
        1_735_689_600.25,
        "training-abc",
    )


def raw(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not-a-cursor",
        "!!!",
        raw("5"),
        raw('["x", "training-1"]'),
        raw('[true, "training-1"]'),
        raw('[NaN, "training-1"]'),
        raw('[1.0, "training\\u0000"]'),
        raw('[1.0, "' + "a" * 41 + '"]'),
        raw("[1.0, 2]"),
        raw("[1.0]"),
        raw("\xff"),
    ],
)
def test_anything_else_is_refused_naming_the_cursor(cursor: str) -> None:
    with pytest.raises(InvalidInput, match=r"^cursor: "):
        decode_cursor(cursor)
