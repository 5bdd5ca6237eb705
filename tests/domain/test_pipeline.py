"""The pipeline spec's sub-pipelines, triggers, outputs, typed values and references: what is
accepted, and what is refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from loom.domain.errors import ManifestError
from loom.domain.pipeline import MAX_NESTING, Retry, parse_pipeline
from loom.domain.pipeline_refs import UnresolvedReference, condition, references, render, walk


def shell(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "kind": "shell", "command": "true", **more}


def spec(*steps: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "p", "steps": list(steps), **more}


def test_a_pipeline_step_holds_its_own_spec_with_its_own_references() -> None:
    """A sub-pipeline's references are checked against its own parameters and steps, not the
    parent's; the parent's `parameters` of it may reference the parent's steps."""
    inner = spec(
        shell("b", command="echo ${{ parameters.x }} ${{ steps.a.outputs.job_id }}"),
        shell("a"),
        parameters={"x": 1},
    )
    parsed = parse_pipeline(
        spec(
            shell("first"),
            {
                "name": "sub",
                "kind": "pipeline",
                "pipeline": inner,
                "parameters": {"x": "${{ steps.first.outputs.values.n }}"},
            },
        )
    )
    sub = parsed.step("sub")
    assert sub.needs == ("first",)
    assert sub.sub is not None and sub.sub.step("b").needs == ("a",)


def test_a_sub_pipeline_is_refused_with_the_path_to_its_field() -> None:
    """A bad field inside a sub-pipeline is named from the outer spec down."""
    inner = spec(shell("a", when="${{ parameters.nope }} > 1"))
    with pytest.raises(ManifestError) as caught:
        parse_pipeline(spec({"name": "sub", "kind": "pipeline", "pipeline": inner}))
    assert caught.value.field == "steps[0].pipeline.steps[0].when"


def test_parameters_a_sub_pipeline_does_not_declare_are_refused() -> None:
    """Giving a sub-pipeline a parameter it has not is refused, naming it."""
    with pytest.raises(ManifestError, match="no such parameter") as caught:
        parse_pipeline(
            spec(
                {
                    "name": "sub",
                    "kind": "pipeline",
                    "pipeline": spec(shell("a")),
                    "parameters": {"y": 1},
                }
            )
        )
    assert caught.value.field == "steps[0].parameters.y"


def test_sub_pipelines_nest_only_so_deep() -> None:
    """A chain of sub-pipelines deeper than MAX_NESTING is refused."""
    document = spec(shell("a"))
    for _ in range(MAX_NESTING + 1):
        document = spec({"name": "s", "kind": "pipeline", "pipeline": document})
    with pytest.raises(ManifestError, match="nested more than"):
        parse_pipeline(document)


def test_triggers_and_outputs_are_read_and_checked() -> None:
    """`trigger` takes three values; `outputs` reference steps and parameters only."""
    parsed = parse_pipeline(
        spec(
            shell("a"),
            shell("b", after=["a"], trigger="all_done"),
            outputs={"x": "${{ steps.a.outputs.values.x }}", "p": "${{ parameters.n }}"},
            parameters={"n": 2},
        )
    )
    assert parsed.step("b").trigger == "all_done" and parsed.step("a").trigger == "all_succeeded"
    assert set(parsed.outputs) == {"x", "p"}
    with pytest.raises(ManifestError) as caught:
        parse_pipeline(spec(shell("a", trigger="sometimes")))
    assert caught.value.field == "steps[0].trigger"
    with pytest.raises(ManifestError) as caught:
        parse_pipeline(spec(shell("a"), outputs={"x": "${{ steps.zz.outputs.job_id }}"}))
    assert caught.value.field == "outputs.x"


def test_environment_and_values_must_be_mappings() -> None:
    """A shell or python step's `environment` and `values` are mappings."""
    parse_pipeline(spec(shell("a", environment={"pip": ["x==1"]}, values={"n": 1})))
    with pytest.raises(ManifestError) as caught:
        parse_pipeline(spec(shell("a", values=[1])))
    assert caught.value.field == "steps[0].values"


def test_a_deploy_steps_monitoring_is_a_mapping_of_the_apis_fields() -> None:
    """`monitoring:` on a deploy step takes the API's fields; another, or a list, is refused
    with its path (values are checked when the step deploys, against the version too)."""

    def deploy(**more: Any) -> dict[str, Any]:
        return {"name": "d", "kind": "deploy", "deployment": "x", "model": "m@1", **more}

    watch = {"drift": True, "window": 50, "payloads": {"rate": 0.1}}
    parse_pipeline(spec(deploy(monitoring=watch)))
    with pytest.raises(ManifestError) as unknown:
        parse_pipeline(spec(deploy(monitoring={"drfit": True})))
    assert unknown.value.field == "steps[0].monitoring.drfit"
    with pytest.raises(ManifestError) as listed:
        parse_pipeline(spec(deploy(monitoring=[True])))
    assert listed.value.field == "steps[0].monitoring"


def test_a_retry_backoff_stops_growing_at_its_maximum() -> None:
    """`max_backoff_s` caps the exponential backoff."""
    parsed = parse_pipeline(
        spec(shell("a", retry={"limit": 5, "backoff_s": 1, "factor": 10, "max_backoff_s": 50}))
    )
    retry = parsed.step("a").retry
    assert [retry.delay(n) for n in range(3)] == [1, 10, 50]
    assert Retry(2, 1.0, 2.0).delay(3) == 8


def test_alternatives_take_the_first_value_that_resolves() -> None:
    """`${{ a || b }}` is a if it names a value, else b; both are references of the step."""
    values = {"a": None, "b": 2}

    def resolve(path: str) -> Any:
        if path == "c":
            raise UnresolvedReference("no c")
        return values[path]

    assert render("${{ a || b }}", resolve) == 2
    assert render("${{ c || b }}", resolve) == 2
    assert render("x=${{ c || b }}", resolve) == "x=2"
    assert condition("${{ c || b }} == 2", resolve)
    assert list(references("${{ steps.x.outputs.y || steps.z.outputs.y }}")) == [
        "steps.x.outputs.y",
        "steps.z.outputs.y",
    ]
    with pytest.raises(UnresolvedReference):
        render("${{ b || c }}", lambda path: resolve(path) if path == "c" else None)


def test_a_key_followed_into_a_list_is_followed_in_each_item() -> None:
    """`outputs.values.x` of a fan-out is every item's x; an index still picks one."""
    items = [{"values": {"x": 1}}, {"values": {"x": 2}}]
    assert walk(items, ["values", "x"], "p") == [1, 2]
    assert walk(items, ["1", "values", "x"], "p") == 2


def test_a_step_state_and_message_can_be_referenced() -> None:
    """`steps.NAME.state` and `.message` are references (and make the step a need)."""
    parsed = parse_pipeline(
        spec(
            shell("a"),
            shell(
                "b",
                trigger="all_done",
                when="${{ steps.a.state }} == 'FAILED'",
                command="echo ${{ steps.a.message }}",
            ),
        )
    )
    assert parsed.step("b").needs == ("a",)
    with pytest.raises(ManifestError):
        parse_pipeline(spec(shell("a"), shell("b", command="echo ${{ steps.a.colour }}")))
