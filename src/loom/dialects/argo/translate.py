"""Argo Workflows as Loom pipelines (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loom.domain.pipeline_dialects import Lookup, Translation

DIALECT = "argo"


class ArgoDialect:
    name = DIALECT

    def recognises(self, documents: Sequence[Any]) -> bool:
        first = documents[0] if documents else None
        return isinstance(first, dict) and str(first.get("apiVersion", "")).startswith(
            "argoproj.io/"
        )

    def translate(
        self, documents: Sequence[Any], parameters: dict[str, Any] | None, lookup: Lookup
    ) -> Translation:
        raise NotImplementedError
