"""Which handler serves which kind: by a document's `apiVersion` and `kind`, or by the name
`loom get` is given (`tfjobs`, `tfjob`, `tfjob.kubeflow.org`, `isvc`)."""

from __future__ import annotations

from collections.abc import Iterable

from loom.dialects.apply.documents import group_of, label
from loom.dialects.kinds import Document, KindHandler, KindInfo
from loom.domain.errors import InvalidInput, ManifestError, NotFound

Entry = tuple[KindInfo, KindHandler]


class Registry:
    def __init__(self, handlers: Iterable[KindHandler]) -> None:
        self._by_key: dict[tuple[str, str], Entry] = {}
        self._by_name: dict[str, list[Entry]] = {}
        for handler in handlers:
            for info in handler.kinds:
                key = (info.group, info.kind)
                if key in self._by_key:
                    raise ValueError(f"{info.kind} of {info.group or 'core'} is served twice")
                self._by_key[key] = (info, handler)
                for name in info.names():
                    self._by_name.setdefault(name, []).append((info, handler))

    def infos(self) -> list[KindInfo]:
        return sorted((info for info, _ in self._by_key.values()), key=lambda i: i.plural)

    def of_document(self, document: Document, index: int = 0) -> Entry:
        """The kind's handler; refused naming `kind` or `apiVersion` when none serves it."""
        group, version = group_of(str(document["apiVersion"]))
        kind = str(document["kind"])
        found = self._by_key.get((group, kind))
        where = label(document, index)
        if found is None:
            same = [i for i, _ in self._by_key.values() if i.kind == kind]
            if same:
                versions = ", ".join(i.api_version for i in same)
                raise ManifestError(
                    f"{where}: apiVersion {document['apiVersion']!r} has no {kind}; use {versions}",
                    field="apiVersion",
                )
            known = ", ".join(f"{i.kind} ({i.api_version})" for i in self.infos())
            raise ManifestError(
                f"{where}: kind {kind!r} of {document['apiVersion']!r} is not served here; "
                f"Loom applies {known}",
                field="kind",
            )
        info, _ = found
        if version not in info.versions:
            accepted = ", ".join(f"{group}/{v}" if group else v for v in info.versions)
            raise ManifestError(
                f"{where}: {kind} is served at apiVersion {accepted}, not {version!r}",
                field="apiVersion",
            )
        return found

    def of_name(self, name: str) -> Entry:
        """The kind `loom get NAME` means; refused when none or several match."""
        found = self._by_name.get(name.lower(), [])
        if not found:
            known = ", ".join(i.plural for i in self.infos())
            raise NotFound(f"no kind {name!r}; the kinds are {known}")
        if len(found) > 1:
            full = ", ".join(f"{i.plural}.{i.group}" for i, _ in found)
            raise InvalidInput(f"{name!r} is ambiguous: say which, {full}", field="kind")
        return found[0]
