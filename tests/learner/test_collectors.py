"""The collectors on their own: what each turns into metric points, and what it leaves alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loom.learner.collectors import (
    EMetricsCollector,
    RegexCollector,
    emetrics_point,
    file_collectors,
    line_collectors,
)
from loom.learner.katib_metrics import KatibFile, KatibLines
from loom.learner.tensorboard import TensorBoardCollector

CAFFE = {
    "type": "regex_extractor",
    "line_lookahead": 2,
    "groups": {
        "train": {
            "regex": r"%{GLOG_STAMP}.*Iteration (?P<iteration>\d+), loss = %{FLOAT:loss}",
            "meta": {"time": "$timestamp"},
            "scalars": {"loss": {"type": "FLOAT", "value": "$loss"}},
            "etimes": {"iteration": {"type": "INT", "value": "$iteration"}},
        },
        "test": {
            "regex": r".*Test net output #0: accuracy = %{FLOAT:acc}",
            "values": {"accuracy": {"type": "FLOAT", "value": "$acc"}},
        },
    },
}


def test_regex_extractor_groups_and_macros() -> None:
    """FfDL's macros and `$name` references give typed values and the step from `etimes`."""
    collector = RegexCollector(CAFFE)
    lines = [
        "I0210 13:39:22.381027 27 solver.cpp:204] Iteration 100, loss = 0.3125",
        "some noise",
        "I0210 13:39:23.000001 27 solver.cpp:404] Test net output #0: accuracy = 0.97",
        "Iteration 200, loss = nope",
    ]
    points = [p for line in lines for p in collector.on_line(line)]
    assert points == [
        {"group": "train", "step": 100, "etimes": {"iteration": 100}, "values": {"loss": 0.3125}},
        {"group": "test", "step": None, "etimes": {}, "values": {"accuracy": 0.97}},
    ]


def test_regex_lookahead_spans_lines() -> None:
    """With line_lookahead 2, a pattern may match across two consecutive lines."""
    spec = {
        "line_lookahead": 2,
        "groups": {
            "val": {
                "regex": r"epoch (?P<e>\d+)\nval_loss: %{FLOAT:v}",
                "scalars": {"loss": {"type": "FLOAT", "value": "$v"}},
                "etimes": {"epoch": {"type": "INT", "value": "$e"}},
            }
        },
    }
    collector = RegexCollector(spec)
    assert collector.on_line("epoch 3") == []
    assert collector.on_line("val_loss: 1.5e-2") == [
        {"group": "val", "step": 3, "etimes": {"epoch": 3}, "values": {"loss": 0.015}}
    ]


def test_katib_pairs() -> None:
    """Katib's `name=value` pairs make one point per line; epoch/step become the step."""
    collector = KatibLines()
    assert collector.on_line("epoch=3 accuracy=0.91 loss=1e-2") == [
        {"group": "default", "step": 3, "etimes": {"epoch": 3}, "values": {
            "accuracy": 0.91, "loss": 0.01}}
    ]  # fmt: skip
    assert collector.on_line("no metrics here, just a = sign") == []
    assert collector.on_line("path=/tmp/x") == []


def test_emetrics_records_and_garbage(tmp_path: Path) -> None:
    """FfDL's EMetrics JSON lines are read as they are appended; broken lines are skipped."""
    path = tmp_path / "evaluation-metrics.txt"
    collector = EMetricsCollector(path)
    assert collector.poll() == []
    record = {
        "meta": {"training_id": "t", "time": 1, "rindex": 1},
        "grouplabel": "test",
        "etimes": {"iteration": {"type": "INT", "value": "7"}},
        "values": {"accuracy": {"type": "FLOAT", "value": "0.5"}},
    }
    path.write_text(json.dumps(record) + "\nnot json\n" + json.dumps(record)[:20])
    assert collector.poll() == [
        {"group": "test", "step": 7, "etimes": {"iteration": 7}, "values": {"accuracy": 0.5}}
    ]
    with path.open("a") as out:
        out.write(json.dumps(record)[20:] + "\n")
    assert len(collector.poll()) == 1  # the record completed later is read then


def test_emetrics_point_without_values() -> None:
    """A record with no numeric values is not a point."""
    assert (
        emetrics_point({"grouplabel": "x", "values": {"a": {"type": "STRING", "value": "b"}}})
        is None
    )


def test_tensorboard_events_written_by_torch(tmp_path: Path) -> None:
    """Scalars that torch's SummaryWriter writes are read without TensorFlow: one point per
    step per folder, the folder's name as group."""
    from torch.utils.tensorboard import SummaryWriter

    collector = TensorBoardCollector([tmp_path])
    for group in ("train", "test"):
        writer = SummaryWriter(str(tmp_path / "tb" / group))
        for step in range(1, 4):
            writer.add_scalar("loss", 1.0 / step, step)
            writer.add_scalar("accuracy", 0.5 + step / 10, step)
        writer.close()
    points = collector.poll() + collector.poll(final=True)
    by_group = {g: [p for p in points if p["group"] == g] for g in ("train", "test")}
    for group_points in by_group.values():
        assert [p["step"] for p in group_points] == [1, 2, 3]
        assert group_points[1]["values"]["loss"] == 0.5
        assert abs(group_points[2]["values"]["accuracy"] - 0.8) < 1e-6


def test_regex_window_slides_out_at_the_end() -> None:
    """With the default lookahead, the last lines still make their points when output ends."""
    spec = {
        "groups": {
            "test": {
                "regex": r"accuracy = %{FLOAT:acc}",
                "scalars": {"accuracy": {"type": "FLOAT", "value": "$acc"}},
            }
        }
    }
    collector = RegexCollector(spec)
    found = collector.on_line("warming up")
    found += collector.on_line("accuracy = 0.5")
    found += collector.on_line("done")
    found += collector.flush()
    assert [p["values"] for p in found] == [{"accuracy": 0.5}]


def test_tensorboard_ignores_non_scalars_and_negative_steps(tmp_path: Path) -> None:
    """Histograms and PR curves are not scalars; a step of -1 stays -1."""
    import numpy as np
    from torch.utils.tensorboard import SummaryWriter

    collector = TensorBoardCollector([tmp_path])
    writer = SummaryWriter(str(tmp_path / "tb"))
    writer.add_histogram("weights", np.arange(10.0), 1)
    writer.add_pr_curve("pr", np.array([0, 1, 1, 0]), np.array([0.1, 0.9, 0.8, 0.2]), 1)
    writer.add_scalar("loss", 0.25, -1)
    writer.close()
    points = collector.poll(final=True)
    assert points == [{"group": "tb", "step": -1, "etimes": {"step": -1}, "values": {"loss": 0.25}}]


def test_emetrics_bad_record_costs_only_itself(tmp_path: Path) -> None:
    """A record of the wrong shape is skipped; the good ones around it are kept, and a last
    line without its newline is read at the end."""
    path = tmp_path / "evaluation-metrics.txt"
    collector = EMetricsCollector(path)
    good = json.dumps({"grouplabel": "g", "values": {"a": {"type": "FLOAT", "value": "1"}}})
    path.write_text(good + "\n" + json.dumps({"values": [1, 2]}) + "\n" + good)
    assert len(collector.poll()) == 1
    assert len(collector.poll(final=True)) == 1


def test_an_earlier_attempts_metrics_are_not_read_again(tmp_path: Path) -> None:
    """A restarted learner shares LOG_DIR with its earlier attempt; what is already in the
    emetrics file was shipped then and is not shipped twice."""
    path = tmp_path / "evaluation-metrics.txt"
    record = json.dumps({"grouplabel": "g", "values": {"a": {"type": "FLOAT", "value": "1"}}})
    path.write_text(record + "\n")
    collector = EMetricsCollector(path)
    with path.open("a") as out:
        out.write(record.replace('"1"', '"2"') + "\n")
    assert [p["values"] for p in collector.poll()] == [{"a": 2.0}]


GLOG = {
    "type": "regex_extractor",
    "groups": {
        "train": {
            "regex": "Iteration %{INT:iter}, loss = %{FLOAT:loss}",
            "scalars": {"loss": {"type": "FLOAT", "value": "$loss"}},
            "etimes": {"iteration": {"type": "INT", "value": "$iter"}},
        }
    },
}


def test_a_regex_matches_anywhere_in_the_window() -> None:
    """glog's prefix no longer hides a pattern written without it, as Katib's filters match."""
    collector = RegexCollector(GLOG)
    line = "I1121 12:00:40.000000 solver.cpp:218] Iteration 40, loss = 0.05"
    assert collector.on_line(line) == [
        {"group": "train", "step": 40, "etimes": {"iteration": 40}, "values": {"loss": 0.05}}
    ]


def test_no_point_is_counted_twice_over_a_long_output() -> None:
    collector = RegexCollector(GLOG)
    lines = []
    for i in range(1, 51):
        lines += [f"I1121 solver.cpp:218] Iteration {i}, loss = {1 / i:.4f}", "noise", "more"]
    points = [p for line in lines for p in collector.on_line(line)] + collector.flush()
    assert [p["step"] for p in points] == list(range(1, 51))


def test_katib_custom_filters() -> None:
    """Katib's metricsFormat: each regex's group 1 is a name, group 2 its value; a value that
    is not a number is left alone."""
    collector = KatibLines([r"([\w-]+):\s*(\S+)"])
    assert collector.on_line("epoch: 2 Validation-accuracy: 0.93 note: fine") == [
        {"group": "default", "step": 2, "etimes": {"epoch": 2}, "values": {
            "Validation-accuracy": 0.93}}
    ]  # fmt: skip


def test_katib_metrics_files_text_and_json(tmp_path: Path) -> None:
    env = {"LOG_DIR": str(tmp_path / "logs"), "MODEL_DIR": str(tmp_path)}
    (tmp_path / "logs").mkdir()
    text = tmp_path / "metrics.log"
    spec = {"type": "katib", "in": "metrics.log", "format": "TEXT"}
    assert line_collectors(spec) == []  # the file is the source, not the output
    (reader,) = [c for c in file_collectors(spec, env) if isinstance(c, KatibFile)]
    text.write_text("epoch=1 accuracy=0.5\nepoch=2 accu")
    assert [p["values"] for p in reader.poll()] == [{"accuracy": 0.5}]
    with text.open("a") as f:
        f.write("racy=0.7\n")
    assert [p["step"] for p in reader.poll()] == [2]

    records = tmp_path / "metrics.json"
    spec = {"type": "katib", "in": str(records), "format": "JSON"}
    (reader,) = [c for c in file_collectors(spec, env) if isinstance(c, KatibFile)]
    records.write_text(
        '{"timestamp": "2026-11-23T00:00:00Z", "epoch": 1, "loss": "0.25", "note": "x"}\nnot json\n'
    )
    assert reader.poll(final=True) == [
        {"group": "default", "step": 1, "etimes": {"epoch": 1}, "values": {"loss": 0.25}}
    ]


def test_a_runaway_pattern_is_stopped_within_its_time_budget() -> None:
    """A pattern that backtracks for ever on a line (here (x|xx)+y on 60 x's) is cut off by its
    time limit, not left to burn the platform's CPU: the collector says why and stops."""
    import time

    from loom.learner.collectors import CollectorStopped

    collector = RegexCollector(
        {
            "groups": {
                "train": {
                    "regex": "(x|xx)+y%{FLOAT:loss}",
                    "values": {"loss": {"value": "$loss", "type": "FLOAT"}},
                }
            }
        }
    )
    began = time.perf_counter()
    with pytest.raises(CollectorStopped) as stopped:
        collector.on_line("x" * 60)
    assert time.perf_counter() - began < 30  # bounded (a plain `re` search would run for years)
    assert "switched off" in str(stopped.value) and "'train'" in str(stopped.value)
    fine = RegexCollector(
        {
            "groups": {
                "train": {
                    "regex": "loss=%{FLOAT:loss}",
                    "values": {"loss": {"value": "$loss", "type": "FLOAT"}},
                }
            }
        }
    )
    assert fine.on_line("loss=0.5")[0]["values"] == {"loss": 0.5}
