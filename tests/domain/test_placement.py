"""Whether a gang fits a cluster's nodes, per placement strategy, and why not."""

from __future__ import annotations

from loom.domain.placement import check
from loom.domain.resources import Resources

GIB = 2**30
ONE = Resources(cpus=1, memory=GIB)
NODES = [Resources(cpus=2, memory=8 * GIB), Resources(cpus=2, memory=8 * GIB)]


def test_a_gang_that_fits_now() -> None:
    assert check(ONE, 4, "pack", NODES, NODES) is None
    assert check(ONE, 2, "strict_spread", NODES, NODES) is None
    assert check(ONE, 2, "strict_pack", NODES, NODES) is None


def test_strict_spread_needs_distinct_nodes() -> None:
    """Three learners one per node on two nodes never fit; two wait while a node is busy."""
    never = check(ONE, 3, "strict_spread", NODES, NODES)
    assert never is not None and never.never
    assert "needs 3 nodes with 1 CPU, 1.0 GiB each; 2 have" in never.reason
    busy = [Resources(cpus=0, memory=8 * GIB), NODES[1]]
    waits = check(ONE, 2, "strict_spread", busy, NODES)
    assert waits is not None and not waits.never
    assert waits.reason.startswith("waiting for the Ray cluster")


def test_a_learner_bigger_than_any_node_never_fits() -> None:
    """4 CPUs free in all, but no node has 3: the aggregate would have let it start."""
    found = check(Resources(cpus=3), 1, "pack", NODES, NODES)
    assert found is not None and found.never
    assert "no node has 3 CPU for one learner" in found.reason


def test_strict_pack_needs_one_node() -> None:
    found = check(ONE, 3, "strict_pack", NODES, NODES)
    assert found is not None and found.never
