"""The platform's own metrics: every family in Prometheus' text format, the gauges read at
scrape time, and one registry per platform."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from loom.observability import PlatformMetrics


def scrape(metrics: PlatformMetrics) -> dict[str, list[Sample]]:
    text = metrics.exposition().decode()
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(samples: list[Sample], name: str, **labels: str) -> float:
    found = [s.value for s in samples if s.name == name and s.labels == labels]
    assert len(found) == 1, (name, labels, samples)
    return found[0]


def test_scrape_reads_jobs_queue_and_leader_when_asked() -> None:
    """Jobs by state come from the callback at each scrape, every state present (0 when none),
    with the queue's length and this server's leadership beside them."""
    counts = {"COMPLETED": 2, "QUEUED": 3}
    metrics = PlatformMetrics()
    metrics.read_at_scrape(lambda: counts, lambda: ("host:42", True))
    families = scrape(metrics)
    assert value(families["loom_jobs"], "loom_jobs", state="COMPLETED") == 2
    assert value(families["loom_jobs"], "loom_jobs", state="PENDING") == 0
    assert len(families["loom_jobs"]) == 8  # FfDL's eight states
    assert value(families["loom_queue_length"], "loom_queue_length") == 3
    assert value(families["loom_lifecycle_leader"], "loom_lifecycle_leader", server="host:42") == 1
    assert value(families["loom_database_up"], "loom_database_up") == 1
    counts["QUEUED"] = 0
    assert value(scrape(metrics)["loom_queue_length"], "loom_queue_length") == 0


def test_counters_and_histograms_follow_conventions() -> None:
    """Counters end in `_total`, durations are histograms in seconds, all named `loom_…`
    beside the process' own (`process_…`, as in every Prometheus client)."""
    metrics = PlatformMetrics()
    metrics.admissions.inc(2)
    metrics.ingested_lines.inc(7)
    metrics.queue_wait.observe(3.0)
    metrics.http_duration.labels("/v1/jobs/{job_id}", "GET", "2xx").observe(0.02)
    families = scrape(metrics)
    assert value(families["loom_admissions"], "loom_admissions_total") == 2
    assert value(families["loom_ingested_lines"], "loom_ingested_lines_total") == 7
    assert value(families["loom_ingested_points"], "loom_ingested_points_total") == 0
    assert value(families["loom_queue_wait_seconds"], "loom_queue_wait_seconds_count") == 1
    assert value(families["loom_queue_wait_seconds"], "loom_queue_wait_seconds_sum") == 3.0
    labels = {"route": "/v1/jobs/{job_id}", "method": "GET", "status_class": "2xx"}
    http = families["loom_http_request_duration_seconds"]
    assert value(http, "loom_http_request_duration_seconds_count", **labels) == 1
    assert "loom_scheduler_pass_seconds" in families
    assert all(name.startswith(("loom_", "process_")) for name in families)
    assert value(families["process_resident_memory_bytes"], "process_resident_memory_bytes") > 0


def test_two_platforms_count_apart() -> None:
    """Each platform has its own registry: a second one in the process neither collides with
    the first nor sees its counts."""
    first, second = PlatformMetrics(), PlatformMetrics()
    first.ingested_points.inc(5)
    assert value(scrape(first)["loom_ingested_points"], "loom_ingested_points_total") == 5
    assert value(scrape(second)["loom_ingested_points"], "loom_ingested_points_total") == 0


def test_a_database_that_does_not_answer_still_leaves_a_scrape() -> None:
    """When the jobs cannot be counted the scrape still answers, says the database is down,
    and leaves the job gauges out rather than report zeros that are not true."""

    def down() -> dict[str, int]:
        raise ConnectionRefusedError("no database")

    metrics = PlatformMetrics()
    metrics.read_at_scrape(down, lambda: ("host:42", False))
    families = scrape(metrics)
    assert value(families["loom_database_up"], "loom_database_up") == 0
    assert "loom_jobs" not in families and "loom_queue_length" not in families
    assert value(families["loom_lifecycle_leader"], "loom_lifecycle_leader", server="host:42") == 0
    assert "loom_admissions" in families
