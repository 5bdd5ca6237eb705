"""Whether a gang can be placed on a cluster's nodes, as Ray's placement strategies would place
it: pure arithmetic over each node's resources, so that the scheduler can say why a job waits
(or that it never fits) instead of asking the cluster and timing out."""

from __future__ import annotations

from dataclasses import dataclass

from loom.domain.resources import Resources


@dataclass(frozen=True)
class Verdict:
    reason: str
    never: bool  # even on the cluster's empty nodes


def _how_many(per_learner: Resources, node: Resources) -> int:
    """How many learners of this size one node holds."""
    counts = []
    if per_learner.cpus > 0:
        counts.append(int((node.cpus + 1e-9) // per_learner.cpus))
    if per_learner.memory > 0:
        counts.append(node.memory // per_learner.memory)
    if per_learner.gpus > 0:
        counts.append(node.gpus // per_learner.gpus)
    return max(min(counts), 0) if counts else 1 << 30


def _short(per_learner: Resources, learners: int, placement: str, nodes: list[Resources]) -> str:
    """Why these nodes cannot hold the gang; empty when they can."""
    fits = [_how_many(per_learner, node) for node in nodes]
    size = describe(per_learner)
    if placement == "strict_spread":
        have = sum(1 for n in fits if n >= 1)
        if have < learners:
            return f"placement strict_spread needs {learners} nodes with {size} each; {have} have"
        return ""
    if placement == "strict_pack":
        if max(fits, default=0) < learners:
            return f"placement strict_pack needs one node with {learners} × {size}"
        return ""
    if sum(fits) < learners:
        if max(fits, default=0) == 0:
            return f"no node has {size} for one learner"
        return f"the nodes hold {sum(fits)} of {learners} learners of {size}"
    return ""


def check(
    per_learner: Resources,
    learners: int,
    placement: str,
    free: list[Resources],
    total: list[Resources],
) -> Verdict | None:
    """None when the gang can be placed now on the nodes' `free` resources; else why not, and
    whether it never could (on their `total`)."""
    now = _short(per_learner, learners, placement, free)
    if not now:
        return None
    never = _short(per_learner, learners, placement, total)
    if never:
        return Verdict(f"no Ray cluster node set can hold it: {never}", True)
    return Verdict(f"waiting for the Ray cluster: {now}", False)


def describe(need: Resources) -> str:
    """One learner's share, as a person reads it: `1 CPU, 1 GPU, 2.0 GiB`."""
    parts = [f"{need.cpus:g} CPU"]
    if need.gpus:
        parts.append(f"{need.gpus} GPU")
    if need.memory:
        parts.append(f"{need.memory / 2**30:.1f} GiB")
    return ", ".join(parts)
