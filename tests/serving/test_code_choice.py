"""What the platform decides about a model's code from names and text alone: which runtime
serves which files, what a replica's environment holds, how a graph's conditions read."""

from __future__ import annotations

import pytest

from loom.serving import gjson, replica_env
from loom.serving.formats import Chosen, NotServable, model_file

ZIP_OF_TORCHSCRIPT = ["m/code/__torch__.py", "m/constants.pkl", "m/data.pkl"]
ZIP_OF_PICKLE = ["m/data.pkl", "m/data/0", "m/version"]


def kind(names: dict[str, str], runtime: str | None = None, scripted: bool = True) -> str:
    entries = ZIP_OF_TORCHSCRIPT if scripted else ZIP_OF_PICKLE
    return model_file(set(names), lambda n: names[n].encode(), lambda n: entries, runtime).kind


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ({"predictor.py": "", "model.onnx": ""}, "kserve"),
        ({"model.onnx": "", "saved_model/saved_model.pb": ""}, "onnx"),
        ({"saved_model.pb": "", "variables/variables.index": ""}, "tensorflow"),
        ({"model.keras": ""}, "keras"),
        ({"model.joblib": ""}, "sklearn"),
        ({"model.pkl": ""}, "sklearn"),
        ({"model.lgb": ""}, "lightgbm"),
        ({"model.bst": "", "requirements.txt": "lightgbm==4.6\n"}, "lightgbm"),
        ({"model.bst": ""}, "xgboost_native"),
        ({"model.ubj": ""}, "xgboost_native"),
        ({"config.json": "", "model.safetensors": "", "tokenizer.json": ""}, "huggingface"),
        ({"MLmodel": "flavors:\n  python_function: {loader_module: mlflow.sklearn}\n"}, "pyfunc"),
    ],
)  # fmt: skip
def test_each_format_is_told_by_its_files(names: dict[str, str], expected: str) -> None:
    """Each format is chosen by its files' names (and requirements.txt for model.bst)."""
    assert kind(names) == expected


def test_a_model_pt_is_torchscript_or_a_pickle_by_its_zip_entries() -> None:
    """`model.pt` is TorchScript when its archive has TorchScript's entries, else a
    torch.save pickle (loaded only in the sandbox); the runtime asked for wins."""
    assert kind({"model.pt": ""}) == "torchscript"
    assert kind({"model.pt": ""}, scripted=False) == "torch"
    assert kind({"model.onnx": "", "saved_model.pb": ""}, runtime="tensorflow") == "tensorflow"
    with pytest.raises(NotServable, match="runtime 'keras': the model has no file it serves"):
        kind({"model.onnx": ""}, runtime="keras")
    with pytest.raises(NotServable, match="not one of"):
        kind({"model.onnx": ""}, runtime="caffe")


def test_which_formats_run_their_authors_code() -> None:
    """Only Loom's data formats may be read outside a sandbox."""
    assert not Chosen("model.onnx", "onnx").runs_code
    assert not Chosen("model.json", "xgboost_native").runs_code
    assert Chosen("model.pkl", "sklearn").runs_code
    assert Chosen("predictor.py", "kserve").runs_code


def test_a_replicas_environment_holds_what_its_format_needs() -> None:
    """KServe for a predictor, TensorFlow for a SavedModel, the requirements' own pins first,
    mlflow as mlflow-skinny, nothing for what the platform has, none for ONNX."""
    assert replica_env.plan(Chosen("model.onnx", "onnx"), []) is None
    assert replica_env.plan(Chosen("model.ubj", "xgboost"), ["mlflow==2.17.2"]) is None
    assert replica_env.plan(Chosen("model.pkl", "sklearn"), []) is None  # the platform's
    kserve = replica_env.plan(Chosen("predictor.py", "kserve"), ["requests==2.32.3"])
    assert kserve is not None and kserve.packages == ("kserve==0.21.0", "requests==2.32.3")
    pinned = replica_env.plan(Chosen("predictor.py", "kserve"), ["kserve==0.20.0"])
    assert pinned is not None and pinned.packages == ("kserve==0.20.0",)
    tf = replica_env.plan(Chosen("saved_model", "tensorflow"), [], gpus=1)
    assert tf is not None and tf.packages == ("tensorflow[and-cuda]==2.21.*",)
    pyfunc = replica_env.plan(Chosen(".", "pyfunc"), ["mlflow==3.17.2"], ["tabulate"])
    assert pyfunc is not None
    assert set(pyfunc.packages) == {"mlflow-skinny==3.17.2", "pandas", "tabulate"}
    transformer = replica_env.plan(Chosen("model.onnx", "onnx"), [], transformer=True)
    assert transformer is not None and transformer.packages == ("kserve==0.21.0",)


@pytest.mark.parametrize(
    ("condition", "holds"),
    [
        ("instances", True), ("missing", False), ("predictions.1", True), ("predictions.7", False),
        ("predictions.#(>0.5)", True), ("predictions.#(>0.95)", False), ("meta.kind", True),
        ("meta.a\\.b", True), ("rows.#(age>45)", True), ("rows.#(age>55)", False),
        ('rows.#(name%"D*")', True), ('rows.#(name!%"D*")', False), ("rows.#(name)#", True),
        ("rows.#.age", True), ('rows.#(name=="Eve")', False), ("meta.#", False),
    ],
)  # fmt: skip
def test_gjson_conditions(condition: str, holds: bool) -> None:
    """Conditions hold as GJSON's Exists() says, for the subset Loom reads."""
    document = {"instances": [[1, 2]], "predictions": [0.2, 0.9],
                "meta": {"kind": "cat", "a.b": 1},
                "rows": [{"age": 50, "name": "Dale"}, {"age": 30}]}  # fmt: skip
    assert gjson.exists(document, condition) is holds


@pytest.mark.parametrize("condition", ["a.*", "@reverse", "a|b", "#(x=>1)", "a..b", "#(a>b)", ""])
def test_gjson_outside_the_subset_is_refused(condition: str) -> None:
    """Wildcards, modifiers, pipes, bad values and empty parts are refused, never guessed."""
    with pytest.raises(gjson.BadCondition):
        gjson.parse(condition)
