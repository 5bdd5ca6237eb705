"""The documents of an apply request: YAML (one or several, `---` between them) or JSON (an
object, a list, or a `kind: List`), each a Kubernetes-style object with `apiVersion`, `kind` and
`metadata.name`. Pure: no FastAPI, no database."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from loom.dialects.kinds import Document
from loom.domain import spec_checks as check
from loom.domain.errors import ManifestError
from loom.domain.manifest import yaml_problem
from loom.domain.safe_yaml import MAX_DEPTH, Loader, UnsafeYaml, check_events

MAX_DOCUMENTS = 50
MAX_NODES = 50_000  # all documents together
# Kubernetes' DNS-1123 subdomain: what most kinds' names must be.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# Metadata that a cluster writes (`kubectl get -o yaml` shows it): accepted and left aside.
SERVER_METADATA = (
    *("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"),
    *("selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences"),
    "finalizers",
)
METADATA = ("name", "namespace", "labels", "annotations", *SERVER_METADATA)


def parse(body: bytes, content_type: str = "") -> list[Document]:
    """Every document of the body, in order; refused naming the document and the field."""
    is_json = "json" in content_type or body.lstrip()[:1] in (b"{", b"[")
    found = _json(body) if is_json else _yaml(body)
    documents = [d for d in found if d is not None]
    if not documents:
        raise ManifestError("the request holds no document: give one or several objects")
    if len(documents) > MAX_DOCUMENTS:
        raise ManifestError(f"{len(documents)} documents; at most {MAX_DOCUMENTS} per request")
    for index, document in enumerate(documents):
        check_document(document, index)
    return documents


def _json(body: bytes) -> list[Any]:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"the body is not valid JSON: {exc}") from None
    if isinstance(data, dict) and data.get("kind") == "List" and "items" in data:
        data = data["items"]
    return data if isinstance(data, list) else [data]


def _yaml(body: bytes) -> list[Any]:
    try:
        check_events(body, MAX_DEPTH, MAX_NODES)
        return list(yaml.load_all(body, Loader=Loader))
    except UnsafeYaml as exc:
        raise ManifestError(f"the documents are refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(f"the documents are not valid YAML: {yaml_problem(exc)}") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(f"the documents are not UTF-8 text: {exc.reason}") from None


def label(document: Any, index: int) -> str:
    """How an error names a document: `document 2 (TFJob mnist)`."""
    if not isinstance(document, dict):
        return f"document {index + 1}"
    kind = document.get("kind") or "?"
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"document {index + 1} ({kind} {name or '?'})"


def check_document(document: Any, index: int) -> None:
    """The envelope every object has: a mapping with apiVersion, kind and metadata.name."""
    where = label(document, index)
    if not isinstance(document, dict):
        raise ManifestError(f"{where}: must be a mapping, got {type(document).__name__}")
    for key in ("apiVersion", "kind"):
        if not isinstance(document.get(key), str) or not document[key]:
            raise ManifestError(f"{where}: field `{key}` is required", field=key)
    try:
        metadata = check.section(document, "metadata", "", "the object's name")
        if "generateName" in metadata:
            raise check.fail(
                "metadata.generateName", "apply needs a fixed name: give metadata.name"
            )
        check.known(metadata, METADATA, "metadata")
        name = check.name(metadata.get("name"), "metadata.name")
        if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
            raise check.fail(
                "metadata.name",
                f"{name!r} is not a Kubernetes name (lower-case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit, at most 253 characters)",
            )
    except ManifestError as exc:
        raise ManifestError(f"{where}: {exc.message}", field=exc.field) from None


def group_of(api_version: str) -> tuple[str, str]:
    """`kubeflow.org/v1` → ("kubeflow.org", "v1"); `v1` → ("", "v1")."""
    group, _, version = api_version.rpartition("/")
    return group, version


def name_of(document: Document) -> str:
    return str(document["metadata"]["name"])
