"""Applied objects for one caller: apply (create, unchanged or update), get, list and delete,
each kind through its handler; the objects themselves are rows of `kube_objects`."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import IntegrityError

from loom.api.platform import Platform
from loom.dialects.apply.documents import SERVER_METADATA, group_of, label, name_of
from loom.dialects.apply.registry import Registry
from loom.dialects.kinds import Applied, Context, Document, KindHandler, KindInfo, Note, Stored
from loom.dialects.kinds import timestamp as k8s_time
from loom.domain.errors import Conflict, InvalidInput, NotFound, SecretKeyError
from loom.store import objects as rows
from loom.store.tables import KubeObject, User

REF_ANNOTATION = "loom.dev/"  # what an object became, shown as its annotations


def stored_of(row: KubeObject) -> Stored:
    return Stored(
        id=row.id,
        group=row.api_group,
        api_version=row.api_version,
        kind=row.kind,
        name=row.name,
        document=row.document,
        refs=dict(row.refs or {}),
        notes=tuple(Note(n["field"], n["treatment"], n["why"]) for n in row.notes or []),  # type: ignore[arg-type]  # stored from a Note
        generation=row.generation,
        created_at=row.created_at,
        updated_at=row.updated_at,
    )


def digest(document: Document) -> str:
    """What says whether a document changed: its contents less what a cluster writes."""
    kept = copy.deepcopy(document)
    kept.pop("status", None)
    metadata = kept.get("metadata") or {}
    for key in SERVER_METADATA:
        metadata.pop(key, None)
    text = json.dumps(kept, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def secret_data(document: Document) -> dict[str, str]:
    """A Secret's values: `data` (base64) and `stringData` (plain), as Kubernetes merges them."""
    found: dict[str, str] = {}
    for key, value in (document.get("data") or {}).items():
        try:
            found[str(key)] = base64.b64decode(str(value), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            raise InvalidInput(
                f"Secret {name_of(document)}: data.{key} is not base64 of UTF-8 text",
                field=f"data.{key}",
            ) from None
    found.update({str(k): str(v) for k, v in (document.get("stringData") or {}).items()})
    return found


class Objects:
    def __init__(
        self, platform: Platform, user: User, registry: Registry, code: bytes | None = None
    ) -> None:
        self.platform = platform
        self.user = user
        self.registry = registry
        self._pending: dict[tuple[str, str, str], Document] = {}
        self.context = Context(platform, user, code, self._lookup, self._secret)

    # -- what handlers see -------------------------------------------------------------------
    def _lookup(self, group: str, kind: str, name: str) -> Stored | None:
        pending = self._pending.get((group, kind, name))
        if pending is not None:
            now = time.time()
            version = str(pending["apiVersion"])
            return Stored("", group, version, kind, name, pending, {}, (), 0, now, now)
        with self.platform.db.session() as session:
            row = rows.find(session, self.user.id, group, kind, name)
            return stored_of(row) if row is not None else None

    def _secret(self, name: str) -> Mapping[str, str]:
        pending = self._pending.get(("", "Secret", name))
        if pending is not None:
            return secret_data(pending)
        with self.platform.db.session() as session:
            row = rows.find(session, self.user.id, "", "Secret", name)
        if row is None:
            raise NotFound(f"no Secret {name!r}: apply it first, or in the same file")
        if row.sealed is None:
            return {}
        try:
            found: dict[str, str] = json.loads(self.platform.keys.open(row.sealed))
        except SecretKeyError as exc:
            raise SecretKeyError(f"Secret {name} cannot be opened: {exc}") from exc
        if found.pop("\0object", None) != row.id:
            raise SecretKeyError(f"the data sealed for Secret {name} is not its own")
        return found

    # -- apply -------------------------------------------------------------------------------
    def apply(self, documents: list[Document]) -> list[dict[str, Any]]:
        """Every document checked, then each created, left unchanged or updated, in order."""
        plans = self._plan(documents)
        results = []
        for index, (document, info, handler, row) in enumerate(plans):
            action = "unchanged"
            applied: Applied | None = None
            if row is None:
                applied, action = self._create(document, info, handler, index), "created"
            elif row.refs.get("_digest") != digest(document):
                applied, action = self._update(document, handler, row, index), "configured"
            shown = applied or Applied(row.refs if row else {}, row.notes if row else ())
            results.append(
                {
                    "apiVersion": document["apiVersion"],
                    "kind": info.kind,
                    "name": name_of(document),
                    "action": action,
                    "refs": {k: v for k, v in shown.refs.items() if not k.startswith("_")},
                    "notes": [n.as_dict() for n in shown.notes],
                }
            )
        return results

    def _plan(
        self, documents: list[Document]
    ) -> list[tuple[Document, KindInfo, KindHandler, Stored | None]]:
        plans = []
        self._pending = {}
        for index, document in enumerate(documents):
            info, handler = self.registry.of_document(document, index)
            key = (info.group, info.kind, name_of(document))
            if key in self._pending:
                raise InvalidInput(f"{label(document, index)}: applied twice in one request")
            self._pending[key] = document
            plans.append((document, info, handler))
        checked = []
        for index, (document, info, handler) in enumerate(plans):
            with self.platform.db.session() as session:
                row = rows.find(session, self.user.id, info.group, info.kind, name_of(document))
            stored = stored_of(row) if row is not None else None
            if stored is None or stored.refs.get("_digest") != digest(document):
                self._check(handler, document, index)
            checked.append((document, info, handler, stored))
        return checked

    def _check(self, handler: KindHandler, document: Document, index: int) -> None:
        try:
            handler.check(self.context, document)
        except InvalidInput as exc:
            said = exc.message
            if exc.field and exc.field not in said:  # the whole path, not the last name alone
                said = f"field `{exc.field}`: {said}"
            raise type(exc)(f"{label(document, index)}: {said}", field=exc.field) from None

    def _create(
        self, document: Document, info: KindInfo, handler: KindHandler, index: int
    ) -> Applied:
        applied = handler.create(self.context, document)
        now = time.time()
        row = KubeObject(
            id=rows.new_object_id(),
            owner_id=self.user.id,
            api_group=info.group,
            api_version=str(document["apiVersion"]),
            kind=info.kind,
            name=name_of(document),
            document=applied.document or document,
            sealed=None,
            refs={**applied.refs, "_digest": digest(document)},
            notes=[n.as_dict() for n in applied.notes],
            generation=1,
            created_at=now,
            updated_at=now,
        )
        row.sealed = self._seal(row.id, applied.secrets)
        try:
            with self.platform.db.session() as session:
                session.add(row)
        except IntegrityError:
            handler.delete(self.context, stored_of(row))
            raise Conflict(
                f"{label(document, index)}: applied at the same time by another request"
            ) from None
        return applied

    def _update(
        self, document: Document, handler: KindHandler, stored: Stored, index: int
    ) -> Applied:
        applied = handler.update(self.context, stored, document)
        with self.platform.db.session() as session:
            row = session.get_one(KubeObject, stored.id)
            row.document = applied.document or document
            row.api_version = str(document["apiVersion"])
            row.refs = {**applied.refs, "_digest": digest(document)}
            row.notes = [n.as_dict() for n in applied.notes]
            row.generation += 1
            row.updated_at = time.time()
            row.sealed = self._seal(row.id, applied.secrets)
        return applied

    def _seal(self, object_id: str, secrets: dict[str, str] | None) -> str | None:
        if not secrets:
            return None
        payload = {"\0object": object_id, **secrets}  # binds the sealed value to its row
        return self.platform.keys.seal(json.dumps(payload).encode())

    # -- get, list, delete -------------------------------------------------------------------
    def listing(self, kind: str) -> list[dict[str, Any]]:
        info, handler = self.registry.of_name(kind)
        with self.platform.db.session() as session:
            found = rows.of_kind(session, self.user.id, info.group, info.kind)
        return [self._shown(stored_of(row), handler) for row in found]

    def get(self, kind: str, name: str) -> dict[str, Any]:
        info, handler = self.registry.of_name(kind)
        return self._shown(self._stored(info, name), handler)

    def delete(self, kind: str, name: str) -> dict[str, Any]:
        info, handler = self.registry.of_name(kind)
        return self._delete(info, handler, name)

    def _delete(self, info: KindInfo, handler: KindHandler, name: str) -> dict[str, Any]:
        stored = self._stored(info, name)
        handler.delete(self.context, stored)
        with self.platform.db.session() as session:
            rows.remove(session, stored.id)
        return {
            "apiVersion": stored.api_version,
            "kind": info.kind,
            "name": name,
            "action": "deleted",
        }

    def delete_documents(self, documents: list[Document]) -> list[dict[str, Any]]:
        """`kubectl delete -f`: each document's object, or `not found`; kinds checked first."""
        entries = [self.registry.of_document(d, i) for i, d in enumerate(documents)]
        results = []
        for document, (info, handler) in zip(documents, entries, strict=True):
            try:
                results.append(self._delete(info, handler, name_of(document)))
            except NotFound:
                results.append(
                    {
                        "apiVersion": document["apiVersion"],
                        "kind": info.kind,
                        "name": name_of(document),
                        "action": "not found",
                    }
                )
        return results

    def _stored(self, info: KindInfo, name: str) -> Stored:
        with self.platform.db.session() as session:
            row = rows.find(session, self.user.id, info.group, info.kind, name)
        if row is None:
            raise NotFound(f"no {info.kind} {name!r}")
        return stored_of(row)

    def _shown(self, stored: Stored, handler: KindHandler) -> dict[str, Any]:
        """The object as `kubectl get -o yaml` shows it: its document, Loom's metadata, and the
        status its controller would write."""
        shown = copy.deepcopy(stored.document)
        shown.pop("status", None)
        metadata = shown.setdefault("metadata", {})
        metadata.update(
            uid=stored.id,
            generation=stored.generation,
            creationTimestamp=k8s_time(stored.created_at),
        )
        annotations = dict(metadata.get("annotations") or {})
        for key, value in stored.refs.items():
            if not key.startswith("_"):
                annotations[REF_ANNOTATION + key] = str(value)
        if stored.notes:
            annotations[REF_ANNOTATION + "notes"] = "\n".join(
                f"{n.field}: {n.treatment}: {n.why}" for n in stored.notes
            )
        if annotations:
            metadata["annotations"] = annotations
        status = handler.status(self.context, stored)
        if status:
            shown["status"] = status
        return shown


def kinds_of(registry: Registry) -> list[dict[str, Any]]:
    """What `kubectl api-resources` says: each kind, its names and versions."""
    return [
        {
            "kind": info.kind,
            "apiVersion": info.api_version,
            "versions": [f"{info.group}/{v}" if info.group else v for v in info.versions],
            "name": info.plural,
            "shortNames": sorted(info.short),
        }
        for info in registry.infos()
    ]


def group_version(document: Document) -> tuple[str, str]:
    return group_of(str(document["apiVersion"]))
