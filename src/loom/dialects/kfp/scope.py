"""The state of one translation of KFP's IR (pure): Loom names for the IR's, the DAG being
translated, and what the whole translation shares."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from loom.dialects.kfp import ir
from loom.domain.pipeline import STEP_NAME

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass
class Names:
    """Loom names for the IR's (a step's is a letter, then letters, digits, `-` and `_`, at
    most 63): the same IR name always gets the same Loom name, and two never share one."""

    given: dict[str, str] = field(default_factory=dict)

    def of(self, name: str) -> str:
        if name not in self.given:
            self.given[name] = self._fresh(name)
        return self.given[name]

    def _fresh(self, name: str) -> str:
        clean = _UNSAFE.sub("-", name).strip("-") or "task"
        if not clean[0].isalpha():
            clean = f"t-{clean}"
        if STEP_NAME.fullmatch(clean) and clean not in self.given.values():
            return clean
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        return f"{clean[:54]}-{digest}"


@dataclass
class Scope:
    """One DAG being translated: where it is in the IR, its inputs' Loom names, and how each
    of its tasks is known (a step's name, or an importer's constant artifact)."""

    where: str
    component: dict[str, Any]
    inputs: Names = field(default_factory=Names)
    steps: Names = field(default_factory=Names)
    kinds: dict[str, str] = field(default_factory=dict)  # task → executor | dag | importer
    imported: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


@dataclass
class Context:
    """What the whole translation shares: the IR's parts and the warnings said so far."""

    spec: dict[str, Any]
    platform: dict[str, Any]
    pipeline: str
    warnings: list[str] = field(default_factory=list)

    def component(self, name: str, where: str) -> dict[str, Any]:
        found = (self.spec.get("components") or {}).get(name)
        if not isinstance(found, dict):
            raise ir.fail(where, f"names component {name!r}, which the pipeline does not have")
        return found

    def executor(self, label: str, where: str) -> dict[str, Any]:
        executors = (self.spec.get("deploymentSpec") or {}).get("executors") or {}
        found = executors.get(label)
        if not isinstance(found, dict):
            raise ir.fail(where, f"names executor {label!r}, which deploymentSpec does not have")
        return found

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)
