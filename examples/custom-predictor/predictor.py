"""A custom predictor for the digits CNN, written against KServe's `kserve.Model` API and served
by Loom unchanged: `load()` opens the ONNX model beside it, `preprocess` reads V1 instances or a
V2 `InferRequest`, `predict` runs it, `postprocess` answers V1 with the digits and V2 with the
logits (an `InferResponse`). Bad input raises KServe's `InvalidInput`, answered with a 400.

The same file runs under KServe's own server (`python predictor.py`), which is how
`bench/custom_serving.py` compares the two.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import numpy as np
import onnxruntime
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer
from kserve.errors import InvalidInput

SHAPE = (1, 8, 8)


class DigitsPredictor(Model):
    def load(self) -> bool:
        folder = os.environ.get("MODEL_DIR") or os.path.dirname(os.path.abspath(__file__))
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = onnxruntime.InferenceSession(
            os.path.join(folder, "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self.input = self.session.get_inputs()[0].name
        self.ready = True
        return self.ready

    def get_input_types(self) -> list[dict[str, Any]]:
        return [{"name": "image", "datatype": "FP32", "shape": [-1, *SHAPE]}]

    def get_output_types(self) -> list[dict[str, Any]]:
        return [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]

    def preprocess(self, payload: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
        if isinstance(payload, InferRequest):  # a response's id is a string, as KServe checks
            images, request_id = payload.inputs[0].as_numpy(), payload.id or str(uuid.uuid4())
        elif isinstance(payload, dict) and isinstance(payload.get("instances"), list):
            images, request_id = np.asarray(payload["instances"], dtype=np.float32), None
        else:
            raise InvalidInput('expected {"instances": [...]} or a V2 request')
        if images.ndim == len(SHAPE):  # [n, 8, 8]: one channel
            images = images[:, None]
        if tuple(images.shape[1:]) != SHAPE:
            raise InvalidInput(f"images are {list(SHAPE)}, got {list(images.shape[1:])}")
        v2 = isinstance(payload, InferRequest)
        return {"images": images.astype(np.float32, copy=False), "v2": v2, "id": request_id}

    def predict(self, data: dict[str, Any], headers: dict[str, str] | None = None) -> Any:
        data["logits"] = self.session.run(None, {self.input: data["images"]})[0]
        return data

    def postprocess(
        self,
        data: dict[str, Any],
        headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> Any:
        logits = data["logits"]
        if not data["v2"]:
            return {"predictions": logits.argmax(axis=1).tolist()}
        output = InferOutput("logits", list(logits.shape), "FP32", logits)
        return InferResponse(data["id"], self.name, [output])


if __name__ == "__main__":  # KServe's own server, for comparison: not run by Loom
    model = DigitsPredictor(os.environ.get("MODEL_NAME", "digits"))
    model.load()
    ModelServer().start([model])
