"""The contract between `loom apply` / `loom get` / `loom delete -f` and the dialects that give
Kubernetes-style kinds (Kubeflow's training jobs, Katib's Experiment, KServe's InferenceService,
KFP's and Argo's, ...).

A dialect room implements one `KindHandler` per family of kinds and the apply room
(`loom.dialects.apply`) lists it; nothing else is needed for `apply`, `get` and `delete` to
serve the kind over REST and the CLI. The apply room stores every applied object (the document,
what it became, the notes) and decides create, unchanged or update; a handler only translates:

- `check(ctx, document)`: everything that would refuse the document, raised as an `InvalidInput`
  (usually a `ManifestError`) whose `field` is the path in the document
  (`spec.tfReplicaSpecs.Worker.replicas`). Nothing is created. `apply` checks every document of
  a request before it creates any, so a refused third document leaves the first two unapplied.
- `create(ctx, document)`: make the Loom objects (a job, an experiment, a deployment, ...) and
  say what they are (`Applied.refs`) and which fields were ignored or approximated, with why
  (`Applied.notes`): a translation never drops a field in silence.
- `update(ctx, stored, document)`: a changed document applied again under the same name.
  Kinds whose spec Kubernetes keeps immutable refuse (`Immutable.update`).
- `status(ctx, stored)`: the object's `status` the way its own controller writes it
  (conditions, replica counts, URLs), read from the Loom objects it became.
- `delete(ctx, stored)`: remove what it became.

Handlers are plain objects; they raise Loom's errors (`loom.domain.errors`), never HTTP ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from loom.domain.errors import Conflict

if TYPE_CHECKING:
    from loom.api.platform import Platform
    from loom.store.tables import User

Document = dict[str, Any]
Treatment = Literal["ignored", "approximated"]


@dataclass(frozen=True)
class KindInfo:
    """One kind a handler serves: `group` "" is Kubernetes' core group (`apiVersion: v1`)."""

    group: str
    versions: tuple[str, ...]  # the accepted versions, the preferred first
    kind: str  # as written in `kind:`, e.g. TFJob
    plural: str  # as `kubectl get` takes it, e.g. tfjobs
    short: tuple[str, ...] = ()  # other names `loom get` takes, e.g. isvc

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.versions[0]}" if self.group else self.versions[0]

    def names(self) -> set[str]:
        """What `loom get NAME` may call the kind: kind, plural, short names, with the group."""
        plain = {self.kind.lower(), self.plural, *self.short}
        return plain | {f"{name}.{self.group}" for name in plain if self.group}


@dataclass(frozen=True)
class Note:
    """A field that was not honoured as written: ignored, or approximated; `why` says how."""

    field: str
    treatment: Treatment
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "treatment": self.treatment, "why": self.why}


@dataclass(frozen=True)
class Applied:
    """What `create` or `update` made: the Loom objects (`refs`, e.g. {"job": ID}), the notes,
    and, where the document holds secrets, the document to store without them and the
    secrets to seal apart."""

    refs: dict[str, Any]
    notes: tuple[Note, ...] = ()
    document: Document | None = None  # stored instead of the applied one (secrets redacted)
    secrets: dict[str, str] | None = None  # sealed with the platform's keys


@dataclass(frozen=True)
class Stored:
    """An applied object as stored."""

    id: str
    group: str
    api_version: str
    kind: str
    name: str
    document: Document
    refs: dict[str, Any]
    notes: tuple[Note, ...]
    generation: int
    created_at: float
    updated_at: float


@dataclass
class Context:
    """What a handler may use: the platform's services, the caller, the code sent with the
    request (a zip; None when none was), and the other objects by kind and name: those applied
    earlier in the same request first, then the stored ones."""

    platform: Platform
    user: User
    code: bytes | None
    lookup: Callable[[str, str, str], Stored | None]  # (group, kind, name)
    secret: Callable[[str], Mapping[str, str]]  # a Secret's data by name; NotFound if none


class KindHandler(Protocol):
    @property
    def kinds(self) -> tuple[KindInfo, ...]: ...

    def check(self, ctx: Context, document: Document) -> None: ...

    def create(self, ctx: Context, document: Document) -> Applied: ...

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied: ...

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]: ...

    def delete(self, ctx: Context, stored: Stored) -> None: ...


class Immutable:
    """For kinds whose spec cannot change once applied (training jobs, experiments): applying
    a changed document under the same name is refused, as the operators' webhooks do."""

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        raise Conflict(
            f"{stored.kind} {stored.name} exists with another spec, which cannot change once "
            f"applied; delete it first (loom delete {stored.kind.lower()} {stored.name})"
        )


@dataclass(frozen=True)
class Condition:
    """One of a status' conditions, as Kubernetes controllers write them."""

    type: str
    status: bool
    reason: str = ""
    message: str = ""
    at: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"type": self.type, "status": "True" if self.status else "False"}
        if self.reason:
            found["reason"] = self.reason
        if self.message:
            found["message"] = self.message
        if self.at is not None:
            found["lastTransitionTime"] = found["lastUpdateTime"] = timestamp(self.at)
        return {**found, **self.extra}


def timestamp(at: float | None) -> str | None:
    """A time as Kubernetes writes it (RFC 3339, seconds, UTC): 2026-11-26T14:00:00Z."""
    return None if at is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
