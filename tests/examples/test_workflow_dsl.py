"""The workflow example in the Python DSL is the YAML example, step for step."""

from __future__ import annotations

import importlib.util

import yaml

from loom.domain.pipeline import parse_pipeline
from tests.conftest import ROOT

WORKFLOW = ROOT / "examples" / "workflow"


def test_the_dsl_example_is_the_yaml_example() -> None:
    spec = importlib.util.spec_from_file_location("workflow", WORKFLOW / "pipeline.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = yaml.safe_load((WORKFLOW / "pipeline.yml").read_text())
    assert module.pipeline.to_dict() == written
    assert parse_pipeline(module.pipeline.to_dict()) == parse_pipeline(written)
