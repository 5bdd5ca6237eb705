"""A KServe transformer in front of the digits model, whatever serves it (ONNX Runtime, a custom
predictor): callers send scikit-learn's raw digits — 8×8 pixels of 0..16 — as
`{"instances": [{"pixels": [[…], …]}]}` and get the digits' names back. `preprocess` scales the
pixels and makes the V2 request the model takes; `postprocess` names the most likely digit.

Deployed with `loom deploy digits --name digits-named --transformer
examples/custom-predictor/transformer`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from kserve import InferInput, InferRequest, InferResponse, Model
from kserve.errors import InvalidInput

NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


class DigitsTransformer(Model):
    def preprocess(self, payload: Any, headers: dict[str, str] | None = None) -> InferRequest:
        rows = payload.get("instances") if isinstance(payload, dict) else None
        if not isinstance(rows, list) or not all(
            isinstance(r, dict) and "pixels" in r for r in rows
        ):
            raise InvalidInput('expected {"instances": [{"pixels": [[...8 values], ...8 rows]}]}')
        images = np.asarray([r["pixels"] for r in rows], dtype=np.float32) / 16.0
        if images.shape[1:] != (8, 8):
            raise InvalidInput(f"pixels are 8x8, got {list(images.shape[1:])}")
        tensor = InferInput("image", [len(images), 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(images[:, None], binary_data=False)
        return InferRequest(self.name, [tensor], request_id=(headers or {}).get("x-request-id"))

    def postprocess(
        self, response: InferResponse, headers: dict[str, str] | None = None
    ) -> dict[str, Any]:
        logits = response.outputs[0].as_numpy()
        return {"predictions": [NAMES[d] for d in logits.argmax(axis=1)]}
