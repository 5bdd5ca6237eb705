"""Prometheus text (through prometheus_client) for a latency histogram and for replicas' merged
families; the request log."""

from __future__ import annotations

import json
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from loom.serving import exposition
from loom.serving.exposition import relabelled, render
from loom.serving.observe import Histogram, RequestLog


def test_histogram_is_cumulative_with_sum_count_help_and_type() -> None:
    histogram = Histogram((0.01, 0.1))
    for value in (0.005, 0.05, 0.05, 3.0):
        histogram.observe(value)
    text = render([exposition.histogram("lat", "A latency", ["d"], [(["x"], histogram)])])
    lines = text.decode().splitlines()
    assert lines[:2] == ["# HELP lat A latency", "# TYPE lat histogram"]
    assert lines[2:5] == ['lat_bucket{d="x",le="0.01"} 1.0', 'lat_bucket{d="x",le="0.1"} 3.0',
                          'lat_bucket{d="x",le="+Inf"} 4.0']  # fmt: skip
    assert lines[5:7] == ['lat_count{d="x"} 4.0', 'lat_sum{d="x"} 3.105']


def test_replica_families_are_merged_relabelled_and_escaped() -> None:
    """Two replicas' text: one family each, every sample with its replica, and a label value
    with quotes and a newline escaped (it was pasted into the text before)."""
    one = '# TYPE a_total counter\na_total{model="m"} 3\n# TYPE b gauge\nb 4\n'
    two = '# TYPE a_total counter\na_total{model="m"} 5\n'
    families = relabelled([(one, {"replica": "1"}), (two, {"replica": 'odd "2"\n'})])
    text = render(families).decode()
    assert text.count("# TYPE a_total counter") == 1
    assert 'a_total{model="m",replica="1"} 3.0' in text
    assert 'a_total{model="m",replica="odd \\"2\\"\\n"} 5.0' in text
    assert 'b{replica="1"} 4.0' in text
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    assert [s.value for s in parsed["a"].samples] == [3.0, 5.0]


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
