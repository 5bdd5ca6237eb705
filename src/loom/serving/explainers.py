"""The built-in explainer behind V1's `:explain`, for a model served by one of Loom's runtimes
(a `kserve.Model` explains with its own `explain()`): Captum's feature ablation, run in the
replica (its environment holds `captum`), over the runtime itself — any runtime, since ablation
needs the model's answers, not its gradients.

Each input value is replaced by the baseline (0) in turn, in batches, and its attribution is how
much the target's score falls: for a classifier, the class the model picks for the instance;
for a model with one score per instance, that score. The answer keeps V1's shape: one
explanation per instance, its attributions shaped as the instance.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from loom.serving.runtimes import Runtime

METHOD = "captum.attr.FeatureAblation"
BATCH = 64  # ablated copies run at once


class ExplainError(ValueError):
    """The model cannot be explained this way; the message says why."""


class CaptumExplainer:
    def __init__(self, runtime: Runtime) -> None:
        import captum.attr  # noqa: F401  (in the replica's environment: fail at start if not)

        numeric = [s for s in runtime.inputs if s.datatype not in ("BYTES", "BOOL")]
        if len(runtime.inputs) != 1 or len(numeric) != 1:
            raise ExplainError(
                "the built-in explainer takes a model with one numeric input; serve a "
                "predictor.py whose model has its own explain()"
            )
        self.runtime = runtime
        self.input = runtime.inputs[0].name
        self.output = runtime.outputs[0].name

    async def explain(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, Any]:
        return await asyncio.to_thread(self._explain, inputs[self.input])

    def _explain(self, x: np.ndarray[Any, Any]) -> dict[str, Any]:
        def score(batch: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
            return np.asarray(self.runtime.infer({self.input: batch.astype(x.dtype)})[self.output])

        found = ablation(score, x)
        explanations = [
            {
                "target": int(found.targets[i]) if found.targets is not None else None,
                "score": float(found.scores[i, found.targets[i]])
                if found.targets is not None
                else float(np.ravel(found.scores[i])[0]),
                "attributions": found.attributions[i].tolist(),
            }
            for i in range(len(x))
        ]
        return {"explanations": explanations, "method": METHOD, "baseline": 0.0}


@dataclass(frozen=True)
class Ablation:
    """What feature ablation found of a batch: each value's attribution (shaped as the batch),
    the model's scores, and the class explained per instance (None: one score each)."""

    attributions: np.ndarray[Any, Any]
    scores: np.ndarray[Any, Any]
    targets: np.ndarray[Any, Any] | None


def ablation(score: Callable[[np.ndarray[Any, Any]], Any], x: np.ndarray[Any, Any]) -> Ablation:
    """Captum's feature ablation of `x` under `score` (a batch → its scores): the served
    model's `:explain`, and `loom.evaluation.explanations(method="captum")`."""
    import torch
    from captum.attr import FeatureAblation

    scores = np.asarray(score(x))
    classes = scores.ndim == 2 and scores.shape[1] > 1
    targets = scores.argmax(axis=1) if classes else None

    def forward(batch: torch.Tensor) -> torch.Tensor:
        answer = np.asarray(score(batch.numpy()), dtype=np.float64)
        return torch.from_numpy(answer.reshape(len(answer), -1))

    attributions = FeatureAblation(forward).attribute(
        torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)),
        target=torch.from_numpy(targets) if targets is not None else 0,
        baselines=0.0,
        perturbations_per_eval=BATCH,
    )
    return Ablation(attributions.numpy(), scores, targets)
