"""A Hugging Face `transformers` pipeline from a local model folder (`save_pretrained`'s: a
`config.json`, its weights and its tokenizer's files), in the replica's environment, which holds
`transformers`. Nothing is downloaded: the folder is the model.

The pipeline's task comes from `config.json`: a `task` key when there is one, else its
architecture's head (`…ForSequenceClassification` → text-classification, and so on). One input,
`text` (BYTES, a string per sample). A classifier answers `label` and `score` for each; any
other task `output`, each sample's answer as JSON text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from loom.serving.devices import NoDevice
from loom.serving.runtimes import TensorSpec

HEADS = {
    "ForSequenceClassification": "text-classification",
    "ForTokenClassification": "token-classification",
    "ForQuestionAnswering": "question-answering",
    "ForMaskedLM": "fill-mask",
    "ForCausalLM": "text-generation",
    "LMHeadModel": "text-generation",
    "ForConditionalGeneration": "text2text-generation",
}
CLASSIFIERS = ("text-classification", "sentiment-analysis")


def task_of(config: dict[str, Any]) -> str:
    """The pipeline task a model folder's `config.json` says, or names by its head."""
    given = config.get("task")
    if isinstance(given, str) and given:
        return given
    for architecture in config.get("architectures") or []:
        for head, task in HEADS.items():
            if str(architecture).endswith(head):
                return task
    raise ValueError(
        "config.json names no task and no architecture with a known head: add "
        '"task": "<pipeline task>" to it'
    )


class PipelineRuntime:
    platform = "huggingface"
    v1_rows = True

    def __init__(self, folder: Path, device: str) -> None:
        import torch
        from transformers import pipeline

        if device == "cuda" and not torch.cuda.is_available():
            raise NoDevice("PyTorch sees no GPU here")
        on_gpu = device == "cuda" or (device == "auto" and torch.cuda.is_available())
        self.device = "cuda:0" if on_gpu else "cpu"
        self.task = task_of(json.loads((folder / "config.json").read_text()))
        self.pipe = pipeline(
            self.task, model=str(folder), tokenizer=str(folder), device=0 if on_gpu else -1
        )
        self.inputs = [TensorSpec("text", "BYTES", [-1])]
        if self.task in CLASSIFIERS:
            self.outputs = [TensorSpec("label", "BYTES", [-1]), TensorSpec("score", "FP32", [-1])]
        else:
            self.outputs = [TensorSpec("output", "BYTES", [-1])]

    def infer(self, inputs: dict[str, np.ndarray[Any, Any]]) -> dict[str, np.ndarray[Any, Any]]:
        texts = [v.decode() if isinstance(v, bytes) else str(v) for v in inputs["text"].ravel()]
        results = self.pipe(texts)
        if self.task in CLASSIFIERS:
            best = [r[0] if isinstance(r, list) else r for r in results]
            return {
                "label": np.array([str(r["label"]) for r in best], dtype=object),
                "score": np.array([float(r["score"]) for r in best], dtype=np.float32),
            }
        return {"output": np.array([json.dumps(r, default=str) for r in results], dtype=object)}
