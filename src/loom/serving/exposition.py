"""Metrics in Prometheus' text format, written by `prometheus_client` (its escaping, HELP and
TYPE lines) from families built at scrape time: the model server's and the gateway's counters
live in their own objects, and a gateway adds its replicas' families, labelled with the replica,
by parsing their text, never by editing it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from loom.serving.observe import Histogram


def histogram(
    name: str,
    documentation: str,
    labels: Sequence[str],
    rows: Iterable[tuple[Sequence[str], Histogram]],
) -> HistogramMetricFamily:
    """One histogram family: a row of label values and a `Histogram` for each labelled series."""
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for values, found in rows:
        running, buckets = 0, []
        for bound, count in zip((*found.buckets, float("inf")), found.counts, strict=True):
            running += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), running))
        family.add_metric(list(values), buckets, found.total)
    return family


def relabelled(texts: Iterable[tuple[str, dict[str, str]]]) -> list[Metric]:
    """Other servers' families (`(text, labels to add)` each), merged by name: one family with
    the samples of every server, each carrying its added labels first."""
    merged: dict[str, Metric] = {}
    for text, extra in texts:
        for family in text_string_to_metric_families(text):
            into = merged.setdefault(
                family.name, Metric(family.name, family.documentation, family.type, family.unit)
            )
            for sample in family.samples:
                into.add_sample(sample.name, {**extra, **sample.labels}, sample.value)
    return list(merged.values())


class _Families(Collector):
    def __init__(self, families: Sequence[Metric]) -> None:
        self.families = families

    def collect(self) -> Iterator[Metric]:
        yield from self.families


def render(families: Sequence[Metric]) -> bytes:
    """The families in the text format (version 0.0.4)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
