"""Foreign pipeline formats (KFP's pipeline IR, Argo's Workflows) as the pipelines service sees
them: a dialect says whether a file's documents are its own and translates them into a Loom
pipeline spec, with what it approximated said in `warnings`. The dialects live in
`loom.dialects`; the composition root hands them to the service, which knows only this."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# A document the owner applied before (an Argo WorkflowTemplate a Workflow refers to), by its
# kind and name in the dialect's API group; None when there is none.
Lookup = Callable[[str, str], dict[str, Any] | None]


@dataclass(frozen=True)
class Translation:
    """A Loom pipeline spec (a mapping, as `parse_pipeline` takes it), the run's parameters as
    Loom names them (None: the spec's defaults), and what was ignored or approximated."""

    document: dict[str, Any]
    parameters: dict[str, Any] | None = None
    warnings: tuple[str, ...] = ()
    dialect: str = ""
    schedule: dict[str, Any] = field(default_factory=dict)  # a CronWorkflow's: cron, enabled


class PipelineDialect(Protocol):
    name: str
    group: str  # the API group of the dialect's objects that `loom apply` keeps

    def recognises(self, documents: Sequence[Any]) -> bool:
        """Whether the documents are this dialect's (cheap: their shape, not their content)."""

    def translate(
        self, documents: Sequence[Any], parameters: dict[str, Any] | None, lookup: Lookup
    ) -> Translation:
        """The documents as a Loom spec, with `parameters` (as the dialect names them) checked
        and translated; refused with `ManifestError` naming the field."""
