"""The platform's own Prometheus metrics (served at the API's `/metrics`), one set per `Platform`.

Each platform has a registry of its own, not prometheus_client's global one, so that several apps
in one process (the tests) count apart. The lifecycle, the TDS and the API record into it; what
the database holds (jobs by state, the queue) and who runs the lifecycle are read when Prometheus
scrapes, so they cannot drift from the truth, and cost one GROUP BY a scrape.

No label names a user or a job: both are unbounded, and a scraper may be less trusted than the API.
Nothing here imports the rest of Loom but the domain, so that any layer may record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

from loom.domain.states import JobState

log = logging.getLogger("loom.observability")

StateCounts = Callable[[], Mapping[str, int]]
LeaderStatus = Callable[[], tuple[str, bool]]

# A job may wait from milliseconds (an idle platform) to a day (a busy GPU cluster).
QUEUE_WAIT_BUCKETS = (0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400)
FAST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class PlatformMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        ProcessCollector(registry=registry)  # process_*: CPU, memory, open files (on Linux)
        self.queue_wait = Histogram(
            "loom_queue_wait_seconds",
            "Time a job spent QUEUED, observed as it leaves the queue (admitted, halted, failed).",
            buckets=QUEUE_WAIT_BUCKETS,
            registry=registry,
        )
        self.scheduler_pass = Histogram(
            "loom_scheduler_pass_seconds",
            "Time the lifecycle takes to decide which queued jobs start.",
            buckets=FAST_BUCKETS,
            registry=registry,
        )
        self.admissions = Counter(
            "loom_admissions", "Jobs admitted to run (one per attempt).", registry=registry
        )
        self.http_duration = Histogram(
            "loom_http_request_duration_seconds",
            "Time from a request's arrival until its response starts, by route template.",
            ["route", "method", "status_class"],
            buckets=FAST_BUCKETS,
            registry=registry,
        )
        self.ingested_lines = Counter(
            "loom_ingested_lines", "Log lines stored by the TDS.", registry=registry
        )
        self.ingested_points = Counter(
            "loom_ingested_points", "Metric points stored by the TDS.", registry=registry
        )

    def read_at_scrape(self, state_counts: StateCounts, leader: LeaderStatus) -> None:
        """Report, at each scrape, `state_counts()` (jobs by state, from the database) and
        `leader()` (this server's id, and whether it runs the lifecycle)."""
        self.registry.register(_ScrapeTime(state_counts, leader))

    def exposition(self) -> bytes:
        """Every metric in Prometheus' text format, version 0.0.4."""
        return generate_latest(self.registry)


class _ScrapeTime:
    def __init__(self, state_counts: StateCounts, leader: LeaderStatus) -> None:
        self.state_counts = state_counts
        self.leader = leader

    def collect(self) -> Iterator[GaugeMetricFamily]:
        server, leads = self.leader()
        yield _gauge(
            "loom_lifecycle_leader",
            "1 if this server runs the lifecycle (schedules and follows jobs), else 0.",
            {"server": server},
            1 if leads else 0,
        )
        try:
            counts = self.state_counts()
        except Exception:  # a scrape still tells the rest, and that the database is down
            log.warning("metrics: the database does not answer", exc_info=True)
            yield _gauge("loom_database_up", _DATABASE_UP, {}, 0)
            return
        yield _gauge("loom_database_up", _DATABASE_UP, {}, 1)
        jobs = GaugeMetricFamily("loom_jobs", "Jobs by state.", labels=["state"])
        for state in JobState:
            jobs.add_metric([state.value], counts.get(state.value, 0))
        yield jobs
        queued = counts.get(JobState.QUEUED.value, 0)
        yield _gauge("loom_queue_length", "Jobs QUEUED, waiting to start.", {}, queued)


_DATABASE_UP = "1 if the database answered this scrape's query, else 0."


def _gauge(name: str, help_text: str, labels: Mapping[str, str], value: float) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, help_text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family
