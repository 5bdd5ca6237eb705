"""Kubeflow Trainer v2.2's CRD schemas (`../shared/kubernetes/`), made strict as
`kubernetes-validate --strict` is: a field the schema does not name is an error."""

from __future__ import annotations

import functools
from typing import Any

import jsonschema
import pytest
import yaml

from tests.conftest import ROOT

CRDS = ROOT.parent / "shared" / "kubernetes"


def strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists properties and does not
    keep unknown fields itself."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    made = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in made
        and "additionalProperties" not in made
        and not made.get("x-kubernetes-preserve-unknown-fields")
    ):
        made["additionalProperties"] = False
    return made


@functools.cache
def schema(plural: str) -> dict[str, Any]:
    path = CRDS / f"trainer.kubeflow.org_{plural}.yaml"
    if not path.exists():
        pytest.skip(f"Kubeflow Trainer's CRDs are not at {CRDS}")
    crd = yaml.safe_load(path.read_text())
    found = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    found["properties"]["metadata"] = {"type": "object"}  # checked by the API server itself
    return dict(strict(found))


def validate(obj: dict[str, Any]) -> None:
    plural = {"TrainJob": "trainjobs", "ClusterTrainingRuntime": "clustertrainingruntimes"}
    jsonschema.validate(obj, schema(plural[obj["kind"]]))
