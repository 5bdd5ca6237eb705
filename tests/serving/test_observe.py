"""Prometheus text for the latency histogram and relabelled replica samples; the request log."""

from __future__ import annotations

import json
from pathlib import Path

from loom.serving.observe import Histogram, RequestLog, labelled


def test_histogram_is_cumulative_with_sum_and_count() -> None:
    histogram = Histogram((0.01, 0.1))
    for value in (0.005, 0.05, 0.05, 3.0):
        histogram.observe(value)
    lines = histogram.lines("lat", 'd="x"')
    assert lines[:3] == ['lat_bucket{d="x",le="0.01"} 1', 'lat_bucket{d="x",le="0.1"} 3',
                         'lat_bucket{d="x",le="+Inf"} 4']  # fmt: skip
    assert lines[3:] == ['lat_sum{d="x"} 3.105000', 'lat_count{d="x"} 4']


def test_labelled_adds_labels_and_drops_comments() -> None:
    text = '# TYPE a counter\na{model="m"} 3\nb 4\n'
    assert labelled(text, 'replica="2"') == ['a{replica="2",model="m"} 3', 'b{replica="2"} 4']


def test_request_log_cuts_bodies_and_rotates(tmp_path: Path) -> None:
    log = RequestLog(tmp_path / "r.jsonl", max_body=5, max_bytes=200)
    log.write(status=200, request=b"0123456789", response=b"ok")
    log.flush()
    record = json.loads((tmp_path / "r.jsonl").read_text())
    assert record["request"] == "01234" and record["response"] == "ok" and record["status"] == 200
    for _ in range(5):
        log.write(status=200, request=b"x" * 5, response=b"y")
    log.flush()
    log.close()
    assert (tmp_path / "r.jsonl.1").exists()
