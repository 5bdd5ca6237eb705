"""Kubernetes' core objects that Kubeflow's files lean on: a ConfigMap (Katib's trial template
source), a Secret and a ServiceAccount (KServe's storage credentials). They are kept, not run:
the kinds that name them read them (`Context.lookup`, `Context.secret`). A Secret's values are
sealed with the platform's keys and never shown again."""

from __future__ import annotations

import copy
from typing import Any

from loom.dialects.apply.service import secret_data
from loom.dialects.kinds import Applied, Context, Document, KindInfo, Note, Stored
from loom.domain import spec_checks as check

REDACTED = "***"
CONFIG_MAP = KindInfo("", ("v1",), "ConfigMap", "configmaps", ("cm",))
SECRET = KindInfo("", ("v1",), "Secret", "secrets")
SERVICE_ACCOUNT = KindInfo("", ("v1",), "ServiceAccount", "serviceaccounts", ("sa",))
_FIELDS = {
    "ConfigMap": ("data", "binaryData", "immutable"),
    "Secret": ("data", "stringData", "type", "immutable"),
    "ServiceAccount": ("secrets", "imagePullSecrets", "automountServiceAccountToken"),
}
_ENVELOPE = ("apiVersion", "kind", "metadata", "status")


class CoreObjects:
    """ConfigMaps, Secrets and ServiceAccounts: stored as given (a Secret's values sealed)."""

    kinds = (CONFIG_MAP, SECRET, SERVICE_ACCOUNT)

    def check(self, ctx: Context, document: Document) -> None:
        kind = str(document["kind"])
        check.known(document, (*_ENVELOPE, *_FIELDS[kind]), "")
        if kind == "ConfigMap":
            for key, value in check.mapping(document.get("data") or {}, "data").items():
                check.text(value, f"data.{key}")
        if kind == "Secret":
            secret_data(document)
        if kind == "ServiceAccount":
            for at, entry in check.entries(document.get("secrets"), "secrets", ("name",)):
                check.name(entry.get("name"), f"{at}.name")

    def create(self, ctx: Context, document: Document) -> Applied:
        notes = []
        if "namespace" in document.get("metadata", {}):
            notes.append(
                Note("metadata.namespace", "ignored", "objects belong to their owner's space")
            )
        if document["kind"] == "ServiceAccount" and "imagePullSecrets" in document:
            notes.append(Note("imagePullSecrets", "ignored", "no image is pulled on this path"))
        if document["kind"] != "Secret":
            return Applied({}, tuple(notes))
        shown = copy.deepcopy(document)
        for key in ("data", "stringData"):
            if isinstance(shown.get(key), dict):
                shown[key] = dict.fromkeys(shown[key], REDACTED)
        return Applied({}, tuple(notes), document=shown, secrets=secret_data(document))

    def update(self, ctx: Context, stored: Stored, document: Document) -> Applied:
        return self.create(ctx, document)

    def status(self, ctx: Context, stored: Stored) -> dict[str, Any]:
        return {}

    def delete(self, ctx: Context, stored: Stored) -> None:
        return None
