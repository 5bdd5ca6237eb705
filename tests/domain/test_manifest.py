"""The manifest: FfDL's own manifests parse; anything wrong is an error naming field and value."""

from __future__ import annotations

from pathlib import Path

import pytest

from loom.domain.errors import ManifestError
from loom.domain.manifest import REDACTED, MetricsType, load_manifest, parse_manifest

FFDL = Path(__file__).parent / "ffdl_manifests"
BASE = "name: x\nframework: {name: pytorch, command: python train.py}\n"


def test_ffdl_tf_tutorial_parses_with_ffdl_meaning() -> None:
    """The seed's tf_convolutional_network_tutorial keeps every value FfDL gave it."""
    m = parse_manifest((FFDL / "tf_convolutional_network_tutorial.yml").read_text())
    assert m.cpus == 0.5
    assert m.memory == 10**9  # FfDL's `Gb` is gigabytes
    assert m.learners == 1
    assert m.data_stores[0].type == "mount_cos"
    assert m.data_stores[0].training_data is not None
    assert m.data_stores[0].training_data.container == "tf_training_data"
    assert m.evaluation_metrics is not None
    assert m.evaluation_metrics.type == MetricsType.TENSORBOARD
    assert m.evaluation_metrics.in_ == "$JOB_STATE_DIR/logs/tb"


def test_folded_command_is_one_command() -> None:
    """A folded block's more-indented lines continue the command, as FfDL ran it."""
    m = parse_manifest((FFDL / "tf_convolutional_network_tutorial.yml").read_text())
    assert "\n" not in m.framework.command
    assert m.framework.command.startswith("python3 convolutional_network.py --trainImagesFile")
    assert m.framework.command.endswith("--trainingIters 2000")


@pytest.mark.parametrize("name", ["hostmount.yml", "horovod.yml", "caffe_regex.yml"])
def test_other_ffdl_manifests_parse(name: str) -> None:
    """FfDL's host-mount, multi-learner and regex-extractor manifests are accepted."""
    m = parse_manifest((FFDL / name).read_text())
    assert m.name


def test_regex_extractor_groups() -> None:
    """A regex_extractor spec keeps its groups, typed values and lookahead."""
    m = parse_manifest((FFDL / "caffe_regex.yml").read_text())
    assert m.evaluation_metrics is not None
    group = m.evaluation_metrics.groups["train"]  # type: ignore[index]
    assert group.scalars is not None and group.scalars["loss"].value == "$loss"
    assert m.evaluation_metrics.lookahead == 4


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1Gb", 10**9),
        ("1GB", 10**9),
        ("1GiB", 2**30),
        ("512MiB", 512 * 2**20),
        ("300MB", 300 * 10**6),
        ("2 GiB", 2 * 2**30),
        ("0.5GiB", 2**29),
    ],
)
def test_memory_units(text: str, expected: int) -> None:
    """MB, MiB, GB, GiB and FfDL's Gb are read with their true sizes."""
    assert parse_manifest(BASE + f"memory: {text}\n").memory == expected


@pytest.mark.parametrize("text", ["1000", "1Xb", "lots", "-1GB", "0MB", "true"])
def test_bad_memory_is_an_error_not_a_fallback(text: str) -> None:
    """FfDL silently used 512 MB; Loom names the field and the value."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest(BASE + f"memory: {text}\n")
    assert caught.value.field == "memory"
    assert "memory" in caught.value.message


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        ("learners: 0\n", "learners", "0"),
        ("cpus: -1\n", "cpus", "-1"),
        ("gpus: 1.5\n", "gpus", "1.5"),
        ("colour: blue\n", "colour", "blue"),
        ("data_stores: [{id: a, type: ftp}]\n", "data_stores[0].type", "ftp"),
        ("evaluation_metrics: {type: sometimes}\n", "evaluation_metrics.type", "sometimes"),
        ("restart_policy: Always\n", "restart_policy", "Always"),
    ],
)
def test_bad_field_names_path_and_value(extra: str, field: str, value: str) -> None:
    """Every bad or unknown field is reported with its dotted path and the value given."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest(BASE + extra)
    assert caught.value.field == field
    assert field in caught.value.message
    assert value in caught.value.message
    assert caught.value.code is not None and caught.value.code.value == "C101"


def test_unknown_nested_field() -> None:
    """An unknown key inside the framework block is named with its full path."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest("name: x\nframework: {name: p, command: c, flavour: x}\n")
    assert caught.value.field == "framework.flavour"


@pytest.mark.parametrize(
    ("text", "field", "meant"),
    [
        ("name: x\nlearnrs: 2\nframework: {name: p, command: c}\n", "learnrs", "learners"),
        ("name: x\nframework: {name: p, comand: c}\n", "framework.comand", "command"),
        (
            "name: x\nframework: {name: p, command: c}\n"
            "data_stores: [{id: a, type: local, trainng_data: {container: b}}]\n",
            "data_stores[0].trainng_data",
            "training_data",
        ),
    ],
)
def test_a_misspelt_field_gets_a_did_you_mean(text: str, field: str, meant: str) -> None:
    """The unknown field is named first (before the field it was meant to be, missing), with
    the closest field its block takes."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest(text)
    assert caught.value.field == field
    assert f"did you mean `{meant}`?" in caught.value.message


def test_no_did_you_mean_when_nothing_is_close() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest("name: x\nframework: {name: p, command: c}\nzzz: 1\n")
    assert "did you mean" not in caught.value.message


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "name: [unclosed\n", "just text"])
def test_not_a_mapping(text: str) -> None:
    """YAML that is not a mapping, or not YAML, is a C101 too."""
    with pytest.raises(ManifestError):
        parse_manifest(text)


def test_missing_command() -> None:
    """A manifest without a command says which field is missing."""
    with pytest.raises(ManifestError) as caught:
        parse_manifest("name: x\nframework: {name: pytorch}\n")
    assert caught.value.field == "framework.command"


def test_redaction_hides_every_secret() -> None:
    """Passwords and access keys never leave the manifest; public keys stay readable."""
    m, original = load_manifest((FFDL / "horovod.yml").read_text())
    shown = m.redacted(original)
    connection = shown["data_stores"][0]["connection"]
    assert connection["password"] == REDACTED
    assert connection["user_name"] == REDACTED
    assert connection["auth_url"].startswith("http://")
    assert shown["memory"] == "1Gb"
    assert "test" not in str(shown["data_stores"])
    assert m.secrets == ["test", "test"]


def test_version_number_becomes_text() -> None:
    """`version: 1.0` unquoted is the string FfDL meant."""
    assert parse_manifest(BASE + "version: 1.0\n").version == "1.0"


BASE = "name: k\nframework: {name: python, command: python t.py}\n"


def test_katibs_collector_fields() -> None:
    manifest, _ = load_manifest(
        BASE + "evaluation_metrics: {type: katib, in: m.json, format: JSON}\n"
    )
    assert manifest.evaluation_metrics is not None
    assert manifest.evaluation_metrics.format == "JSON"
    filtered, _ = load_manifest(
        BASE + "evaluation_metrics: {type: katib, filters: ['(\\w+):(\\S+)']}\n"
    )
    assert filtered.evaluation_metrics is not None
    assert filtered.evaluation_metrics.filters == ["(\\w+):(\\S+)"]


@pytest.mark.parametrize(
    ("metrics", "words"),
    [
        ("{type: katib, filters: ['(\\w+)']}", "needs two groups"),
        ("{type: katib, filters: ['(']}", "not a regular expression"),
        ("{type: logger, filters: ['(\\w+)=(\\S+)']}", "only with type katib"),
        ("{type: katib, format: TEXT}", "give the file with `in`"),
        ("{type: katib, in: m.json, format: JSON, filters: ['(a)(b)']}", "no filters"),
        ("{type: katib, in: m.txt, format: CSV}", "evaluation_metrics.format"),
    ],
)
def test_katib_collector_fields_are_checked(metrics: str, words: str) -> None:
    with pytest.raises(ManifestError) as refused:
        load_manifest(BASE + f"evaluation_metrics: {metrics}\n")
    assert words in refused.value.message
    assert refused.value.field.startswith("evaluation_metrics")
