"""One rule for parameters and tags: the SDK raises with it, the platform drops with it."""

from __future__ import annotations

import pytest

from loom import tracking
from loom.domain.run_info import MAX_VALUE, problem
from loom.tds.run_info import split


def test_the_rule() -> None:
    assert problem("param", "lr", "0.01") == ""
    assert "expected param or tag" in problem("metric", "lr", "1")
    assert "1 to 250 characters" in problem("tag", "k" * 251, "v")
    assert "no NUL" in problem("tag", "note", "a\x00b")
    assert problem("param", "p", "x" * MAX_VALUE["param"]) == ""
    assert "at most 6000" in problem("param", "p", "x" * (MAX_VALUE["param"] + 1))


def test_the_sdk_raises_and_the_platform_drops_by_the_same_rule() -> None:
    with pytest.raises(ValueError, match="at most 8000"):
        tracking.set_tag("note", "x" * 8001)
    points = [
        {"seq": 1, "time": 5.0, "info": {"kind": "tag", "key": "note", "value": "x" * 8001}},
        {"seq": 2, "time": 6.0, "info": {"kind": "param", "key": "lr", "value": "0.1"}},
        {"seq": 3, "time": 7.0, "group": "train", "values": {"loss": 1.0}},
    ]
    entries, rest = split(points)
    assert entries == [("param", "lr", "0.1", 6.0)]
    assert [p["seq"] for p in rest] == [3]
