"""A pipeline's conditions and its steps' values are bounded in size and nesting, so the
driver never meets one it cannot evaluate."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom.domain.errors import ManifestError
from loom.domain.pipeline_refs import MAX_DEPTH, UnresolvedReference, check_condition, condition
from loom.pipelines.steps import StepFailed, _values


@pytest.mark.parametrize(
    "expression",
    ["not " * 5000 + "1", "- " * 3000 + "1", "not " * 40 + "1", "1 == 1 and " * 300 + "1"],
)
def test_a_condition_too_long_or_too_deep_is_refused_naming_the_field(expression: str) -> None:
    """Past 2,000 characters or 32 levels a condition is refused as a manifest error on the
    step's `when`, whatever parser limit it would have met otherwise."""
    with pytest.raises(ManifestError) as refused:
        check_condition(expression, "steps[0].when")
    assert refused.value.field == "steps[0].when"


def test_a_value_nested_too_deeply_fails_the_condition_not_the_driver() -> None:
    """A step's output nested past the limit, written into a condition, is an
    UnresolvedReference (the step fails with the reason), never a RecursionError."""
    nested: list[object] = [1]
    for _ in range(MAX_DEPTH + 5):
        nested = [nested]
    with pytest.raises(UnresolvedReference):
        condition("${{ steps.a.outputs.x }} == 1", lambda _path: nested)
    assert condition("${{ steps.a.outputs.x }} == [[1]]", lambda _path: [[1]])


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 30_000 + "]" * 30_000, "nested too deeply"),
        ("[" * 40 + "]" * 40, "is a list"),
        ('{"a":' * 40 + "1" + "}" * 40, "nested deeper than"),
        ("{not json", "not JSON"),
        ('{"x": "' + "y" * 70_000 + '"}', "larger than 64 KiB"),
    ],
)
def test_outputs_json_that_cannot_be_a_steps_outputs_fails_the_step(
    tmp_path: Path, text: str, why: str
) -> None:
    """outputs.json that is there but unusable fails its step saying why; none at all is
    no outputs."""
    assert _values(tmp_path) is None
    (tmp_path / "outputs.json").write_text(text)
    with pytest.raises(StepFailed) as failed:
        _values(tmp_path)
    assert why in failed.value.message
