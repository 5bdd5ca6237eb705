"""The stock MLflow client's calls, run against one tracking server (in the client's own venv):
prints one JSON line, a list of `{"call", "outcome"}` in order, where an outcome is the value
the client got (ids and server-chosen times replaced by stable names) or the error code it got.
Run once against the real MLflow server and once against Loom, the two lists must be equal.

    MLFLOW_TRACKING_URI=… [MLFLOW_TRACKING_TOKEN=…] python client_calls.py OUT.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag, ViewType
from mlflow.exceptions import MlflowException

T0 = 1_700_000_000_000  # start times and metric times the script chooses, so both servers agree
client = MlflowClient()
results: list[dict[str, Any]] = []
names: dict[str, str] = {}  # an id either server chose → a stable name
# The names this script gives things start with P: one server can be asked twice.
P = os.environ.get("DIFF_PREFIX", "diff")


def stable(value: str, kind: str) -> str:
    if value not in names:
        names[value] = f"<{kind}{sum(1 for n in names.values() if n.startswith('<' + kind))}>"
    return names[value]


def scrub(text: str) -> str:
    """Ids and server-chosen locations in a string, by their stable names: a long id anywhere
    in it, a short one (an experiment's number) as a segment of a URI, this run's prefix."""
    for found, name in names.items():
        if len(found) >= 8:
            text = text.replace(found, name)
    if ":/" in text:
        text = "/".join(names.get(part, part) for part in text.split("/"))
    if text.startswith(f"{P}-"):
        text = "diff-" + text.removeprefix(f"{P}-")
    return text


def exp(value: str) -> str:
    return names.get(value, value)


def number(value: float) -> Any:
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def shown(value: Any) -> Any:
    """What the client got, as JSON, with ids and times the server chose made stable."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, float):
        return number(value)
    if isinstance(value, list | tuple):
        return [shown(v) for v in value]
    if isinstance(value, dict):
        return {scrub(str(k)): shown(v) for k, v in sorted(value.items())}
    entity = ENTITIES.get(type(value).__name__)
    return entity(value) if entity is not None else repr(value)


def paged(value: Any) -> Any:
    return {"items": [shown(v) for v in value], "more": bool(value.token)}


def experiment(value: Any) -> Any:
    stable(value.experiment_id, "exp")
    return {
        "id": exp(value.experiment_id),
        "name": scrub(value.name),
        "stage": value.lifecycle_stage,
        "tags": shown(value.tags),
        "artifacts": scrub(value.artifact_location),
    }


def when(value: int | None) -> Any:
    """A time this script chose, or one the server did ("<now>")."""
    return value if value is None or value < T0 + 10**8 else "<now>"


def run(value: Any) -> Any:
    info = value.info
    stable(info.run_id, "run")
    return {
        "id": scrub(info.run_id),
        "name": info.run_name,
        "exp": exp(info.experiment_id),
        "status": info.status,
        "stage": info.lifecycle_stage,
        "start": when(info.start_time),
        "end": when(info.end_time),
        "artifacts": scrub(info.artifact_uri),
        "params": shown(value.data.params),
        "metrics": shown(value.data.metrics),
        "tags": {
            k: scrub(v)
            for k, v in sorted(value.data.tags.items())
            if not k.startswith("mlflow.source.")
        },
    }


def metric(value: Any) -> Any:
    return [value.key, number(value.value), value.step, value.timestamp]


def registered_model(value: Any) -> Any:
    return {
        "name": scrub(value.name),
        "description": value.description,
        "tags": shown(value.tags),
        "aliases": shown(value.aliases),
        "latest": [shown(v) for v in value.latest_versions or []],
    }


def model_version(value: Any) -> Any:
    return {
        "name": scrub(value.name),
        "version": str(value.version),
        "stage": value.current_stage,
        "description": value.description,
        "tags": shown(value.tags),
        "aliases": sorted(value.aliases),
        "run": scrub(value.run_id or ""),
        "source": scrub(value.source or ""),
        "status": value.status,
    }


def logged_model(value: Any) -> Any:
    stable(value.model_id, "model")
    return {
        "id": scrub(value.model_id),
        "name": value.name,
        "status": str(value.status),
        "run": scrub(value.source_run_id or ""),
        "params": shown(value.params),
        "artifacts": scrub(value.artifact_location),
    }


def model_info(value: Any) -> Any:
    stable(value.model_id, "model")
    return {"uri": scrub(value.model_uri), "flavors": sorted(value.flavors)}


ENTITIES = {
    "PagedList": paged,
    "Experiment": experiment,
    "Run": run,
    "Metric": metric,
    "RegisteredModel": registered_model,
    "ModelVersion": model_version,
    "LoggedModel": logged_model,
    "FileInfo": lambda v: [v.path, v.is_dir, v.file_size],
    "ModelInfo": model_info,
}


def call(name: str, action: Any, made: str = "") -> Any:
    """Do one thing with the client and keep its outcome; `made`: the value is a new id of
    that kind, named before it is shown."""
    began = time.monotonic()
    try:
        value = action()
        if made:
            stable(value, made)
    except MlflowException as exc:
        results.append({"call": scrub(name), "outcome": {"error": exc.error_code}})
        return None
    results.append({"call": scrub(name), "outcome": names[value] if made else shown(value)})
    print(f"{time.monotonic() - began:6.2f}s {name}", file=sys.stderr, flush=True)
    return value


def metrics(key: str, values: list[float], offset: int = 0) -> list[Metric]:
    return [Metric(key, v, T0 + 1000 * (n + offset), n + offset) for n, v in enumerate(values)]


def experiments() -> tuple[str, str]:
    a = call(
        "create_experiment",
        lambda: client.create_experiment(f"{P}-alpha", tags={"team": "vision"}),
        made="exp",
    )
    b = call("create_experiment 2", lambda: client.create_experiment(f"{P}-beta"), made="exp")
    call("create_experiment taken", lambda: client.create_experiment(f"{P}-alpha"))
    call("get_experiment", lambda: client.get_experiment(a))
    call("get_experiment_by_name", lambda: client.get_experiment_by_name(f"{P}-beta"))
    call("get_experiment_by_name missing", lambda: client.get_experiment_by_name(f"{P}-missing"))
    call("get_experiment missing", lambda: client.get_experiment("987654321"))
    call("get_experiment default", lambda: client.get_experiment("0"))
    call("set_experiment_tag", lambda: client.set_experiment_tag(a, "stage", "dev"))
    call("set_experiment_tag 2", lambda: client.set_experiment_tag(a, "owner", "ana"))
    call("delete_experiment_tag", lambda: client.delete_experiment_tag(a, "owner"))
    call("get_experiment tags", lambda: client.get_experiment(a).tags)
    call("rename_experiment", lambda: client.rename_experiment(b, f"{P}-beta-2"))
    call(
        "search_experiments like",
        lambda: client.search_experiments(
            filter_string=f"name LIKE '{P}-%'", order_by=["name ASC"]
        ),
    )
    call(
        "search_experiments tag",
        lambda: client.search_experiments(filter_string="tags.team = 'vision'"),
    )
    first = call(
        "search_experiments page 1",
        lambda: client.search_experiments(
            max_results=1, filter_string=f"name LIKE '{P}-%'", order_by=["name DESC"]
        ),
    )
    call(
        "search_experiments page 2",
        lambda: client.search_experiments(
            max_results=1,
            filter_string=f"name LIKE '{P}-%'",
            order_by=["name DESC"],
            page_token=first.token,
        ),
    )
    call(
        "search_experiments bad filter",
        lambda: client.search_experiments(filter_string="name ~ 'x'"),
    )
    call("delete_experiment", lambda: client.delete_experiment(b))
    call(
        "search_experiments deleted",
        lambda: client.search_experiments(
            view_type=ViewType.DELETED_ONLY, filter_string=f"name LIKE '{P}-%'"
        ),
    )
    call("get_experiment deleted", lambda: client.get_experiment(b).lifecycle_stage)
    call("create_run in deleted experiment", lambda: client.create_run(b))
    call("restore_experiment", lambda: client.restore_experiment(b))
    call(
        "search_experiments all",
        lambda: [
            e.name
            for e in client.search_experiments(
                view_type=ViewType.ALL, filter_string=f"name LIKE '{P}-%'", order_by=["name ASC"]
            )
        ],
    )
    return a, b


def runs(a: str) -> list[str]:
    made = []
    for n, (name, kind) in enumerate([("base", "baseline"), ("wide", "wide"), ("deep", "deep")]):
        run = call(
            f"create_run {name}",
            lambda name=name, kind=kind, n=n: client.create_run(
                a, start_time=T0 + 1000 * n, run_name=name, tags={"kind": kind}
            ),
        )
        made.append(run.info.run_id)
    r1, r2, r3 = made
    call("log_param", lambda: client.log_param(r1, "lr", "0.1"))
    call("log_param same value", lambda: client.log_param(r1, "lr", "0.1"))
    call("log_param changed", lambda: client.log_param(r1, "lr", "0.2"))
    call("log_param bad name", lambda: client.log_param(r1, "bad name!", "1"))
    for run, losses, batch in (
        (r1, [1.0, 0.6, 0.4], "32"),
        (r2, [0.9, 0.5, 0.3], "128"),
        (r3, [1.2, 0.8, 0.7], "64"),
    ):
        call(
            "log_batch",
            lambda run=run, losses=losses, batch=batch: client.log_batch(
                run,
                metrics=metrics("loss", losses),
                params=[Param("batch", batch), Param("lr", "0.1")],
                tags=[RunTag("note", f"batch {batch}")],
            ),
        )
    call(
        "log_batch duplicate params",
        lambda: client.log_batch(r2, params=[Param("x", "1"), Param("x", "2")]),
    )
    call("log_metric", lambda: client.log_metric(r1, "acc", 0.7, timestamp=T0 + 5000, step=1))
    call("log_metric 2", lambda: client.log_metric(r1, "acc", 0.8, timestamp=T0 + 6000, step=2))
    call(
        "log_metric same again",
        lambda: client.log_metric(r1, "acc", 0.8, timestamp=T0 + 6000, step=2),
    )
    call("log_metric nan", lambda: client.log_metric(r2, "acc", math.nan, timestamp=T0, step=1))
    call("log_metric inf", lambda: client.log_metric(r3, "acc", math.inf, timestamp=T0, step=1))
    call(
        "log_metric older step",
        lambda: client.log_metric(r1, "acc", 0.1, timestamp=T0 + 9000, step=0),
    )
    call("set_tag", lambda: client.set_tag(r1, "mlflow.note.content", "the baseline"))
    call("set_tag 2", lambda: client.set_tag(r2, "team", "a"))
    call("delete_tag", lambda: client.delete_tag(r2, "team"))
    call("delete_tag missing", lambda: client.delete_tag(r2, "team"))
    call("get_run", lambda: client.get_run(r1))
    call("get_run missing", lambda: client.get_run("0123456789abcdef0123456789abcdef"))
    call("get_metric_history", lambda: client.get_metric_history(r1, "loss"))
    call("get_metric_history acc", lambda: client.get_metric_history(r1, "acc"))
    call("get_metric_history missing", lambda: client.get_metric_history(r1, "nothing"))
    searches = [
        ("metrics.loss < 0.5", None),
        ("params.lr = '0.1'", None),
        ("tags.kind LIKE 'base%'", None),
        ("tags.kind ILIKE 'BASE%'", None),
        ("metrics.acc > 0.75", None),
        ("attributes.run_name = 'wide'", None),
        (f"attributes.run_id IN ('{r2}', '{r3}')", None),
        ("tags.`mlflow.note.content` IS NULL", None),
        ("params.batch != '32'", None),
        ("attributes.status = 'RUNNING'", ["metrics.acc DESC"]),
        ("", ["metrics.acc ASC"]),
        ("", ["params.batch ASC"]),
        ("", ["tags.kind DESC"]),
        ("", ["attributes.run_name ASC"]),
        ("attributes.start_time >= 1700000001000", ["attributes.start_time ASC"]),
        ("metrics.loss >", None),
        ("params.lr = '0.1' or params.lr = '0.2'", None),
        ("metrics.loss < 'a'", None),
        ("nonsense.key = 'x'", None),
    ]
    for where, order in searches:
        call(
            f"search_runs {where!r} {order}",
            lambda where=where, order=order: client.search_runs(
                [a], filter_string=where, order_by=order
            ),
        )
    page = call("search_runs page 1", lambda: client.search_runs([a], max_results=2))
    call(
        "search_runs page 2", lambda: client.search_runs([a], max_results=2, page_token=page.token)
    )
    call("update_run", lambda: client.update_run(r2, status="FAILED", name="wide-2"))
    call("set_terminated", lambda: client.set_terminated(r1, end_time=T0 + 100_000))
    call("search_runs finished", lambda: client.search_runs([a], "attributes.status = 'FINISHED'"))
    call("delete_run", lambda: client.delete_run(r3))
    call("log_metric to deleted run", lambda: client.log_metric(r3, "loss", 1.0, timestamp=T0))
    call("search_runs active", lambda: client.search_runs([a]))
    call(
        "search_runs deleted", lambda: client.search_runs([a], run_view_type=ViewType.DELETED_ONLY)
    )
    call("restore_run", lambda: client.restore_run(r3))
    call("get_run restored", lambda: client.get_run(r3))
    return made


def fluent(folder: Path) -> str:
    mlflow.set_experiment(f"{P}-fluent")
    with mlflow.start_run(run_name="outer") as outer:
        stable(outer.info.experiment_id, "exp")
        stable(outer.info.run_id, "run")
        mlflow.log_params({"layers": 3, "optimizer": "adam"})
        mlflow.log_metrics({"loss": 0.5, "test/accuracy": 0.9}, step=1)
        with mlflow.start_run(run_name="inner", nested=True) as inner:
            stable(inner.info.run_id, "run")
            mlflow.log_param("layers", 4)
        call("fluent log_text", lambda: mlflow.log_text("what this run tried", "notes/why.txt"))
        call("fluent log_dict", lambda: mlflow.log_dict({"a": 1}, "config.json"))
        (folder / "data.csv").write_text("x,y\n1,2\n")
        call("fluent log_artifact", lambda: mlflow.log_artifact(str(folder / "data.csv"), "inputs"))
    call("fluent outer", lambda: client.get_run(outer.info.run_id))
    call("fluent inner", lambda: client.get_run(inner.info.run_id))
    call(
        "fluent children",
        lambda: client.search_runs(
            [outer.info.experiment_id], f"tags.mlflow.parentRunId = '{outer.info.run_id}'"
        ),
    )
    call("list_artifacts", lambda: client.list_artifacts(outer.info.run_id))
    call("list_artifacts folder", lambda: client.list_artifacts(outer.info.run_id, "notes"))
    call(
        "load_text", lambda: mlflow.artifacts.load_text(outer.info.artifact_uri + "/notes/why.txt")
    )
    call("load_dict", lambda: mlflow.artifacts.load_dict(outer.info.artifact_uri + "/config.json"))
    call(
        "download_artifacts",
        lambda: sorted(
            p.name
            for p in Path(
                mlflow.artifacts.download_artifacts(
                    run_id=outer.info.run_id, artifact_path="inputs", dst_path=str(folder / "down")
                )
            ).iterdir()
        ),
    )
    return str(outer.info.run_id)


def registry(run_id: str) -> None:
    call(
        "create_registered_model",
        lambda: client.create_registered_model(
            f"{P}-model", tags={"task": "digits"}, description="first"
        ),
    )
    call("create_registered_model taken", lambda: client.create_registered_model(f"{P}-model"))
    call("get_registered_model", lambda: client.get_registered_model(f"{P}-model"))
    call("update_registered_model", lambda: client.update_registered_model(f"{P}-model", "second"))
    call(
        "set_registered_model_tag", lambda: client.set_registered_model_tag(f"{P}-model", "k", "v")
    )
    call(
        "delete_registered_model_tag", lambda: client.delete_registered_model_tag(f"{P}-model", "k")
    )
    source = f"runs:/{run_id}/inputs"
    call(
        "create_model_version",
        lambda: client.create_model_version(
            f"{P}-model", source, run_id=run_id, tags={"t": "1"}, description="v1"
        ),
    )
    call(
        "create_model_version 2",
        lambda: client.create_model_version(f"{P}-model", source, run_id=run_id),
    )
    call("get_model_version", lambda: client.get_model_version(f"{P}-model", "1"))
    call("get_model_version missing", lambda: client.get_model_version(f"{P}-model", "9"))
    call(
        "update_model_version", lambda: client.update_model_version(f"{P}-model", "1", "first one")
    )
    call(
        "set_model_version_tag",
        lambda: client.set_model_version_tag(f"{P}-model", "1", "q", "high"),
    )
    call(
        "delete_model_version_tag", lambda: client.delete_model_version_tag(f"{P}-model", "1", "t")
    )
    call(
        "set_registered_model_alias",
        lambda: client.set_registered_model_alias(f"{P}-model", "champion", "1"),
    )
    call(
        "get_model_version_by_alias",
        lambda: client.get_model_version_by_alias(f"{P}-model", "champion"),
    )
    call("get_registered_model aliases", lambda: client.get_registered_model(f"{P}-model"))
    call(
        "delete_registered_model_alias",
        lambda: client.delete_registered_model_alias(f"{P}-model", "champion"),
    )
    call(
        "get_model_version_by_alias gone",
        lambda: client.get_model_version_by_alias(f"{P}-model", "champion"),
    )
    call(
        "transition_model_version_stage",
        lambda: client.transition_model_version_stage(f"{P}-model", "1", "Staging"),
    )
    call(
        "get_latest_versions", lambda: client.get_latest_versions(f"{P}-model", stages=["Staging"])
    )
    call("search_registered_models", lambda: client.search_registered_models(f"name LIKE '{P}-%'"))
    call("search_model_versions", lambda: client.search_model_versions(f"name = '{P}-model'"))
    call(
        "download artifacts of a version",
        lambda: sorted(
            p.name
            for p in Path(mlflow.artifacts.download_artifacts(f"models:/{P}-model/1")).iterdir()
        ),
    )
    call(
        "rename_registered_model",
        lambda: client.rename_registered_model(f"{P}-model", f"{P}-model-2"),
    )
    call("get_registered_model old name", lambda: client.get_registered_model(f"{P}-model"))
    call("delete_model_version", lambda: client.delete_model_version(f"{P}-model-2", "2"))
    call("get_model_version deleted", lambda: client.get_model_version(f"{P}-model-2", "2"))
    call("delete_registered_model", lambda: client.delete_registered_model(f"{P}-model-2"))
    call("get_registered_model deleted", lambda: client.get_registered_model(f"{P}-model-2"))


def sklearn_models(folder: Path) -> None:
    import mlflow.models
    import numpy as np
    import sklearn
    from sklearn.linear_model import LogisticRegression

    # The client guesses a model's requirements by loading it in a subprocess (13 CPU-s each
    # time on this machine, four times a run): the client's own business, not the server's,
    # and the same for both. It is told them instead.
    mlflow.models.infer_pip_requirements = lambda *_a, **_k: [
        f"scikit-learn=={sklearn.__version__}"
    ]

    features = np.array([[0.0, 1.0], [1.0, 0.0], [0.2, 0.9], [0.9, 0.1]])
    labels = np.array([0, 1, 0, 1])
    mlflow.set_experiment(f"{P}-models")
    with mlflow.start_run(run_name="sk") as run:
        stable(run.info.experiment_id, "exp")
        stable(run.info.run_id, "run")
        model = LogisticRegression().fit(features, labels)
        info = call("sklearn log_model", lambda: mlflow.sklearn.log_model(model, name="clf"))
    call("get_logged_model", lambda: client.get_logged_model(info.model_id))
    call(
        "search_logged_models",
        lambda: client.search_logged_models(experiment_ids=[run.info.experiment_id]),
    )
    call(
        "load_model predict",
        lambda: mlflow.sklearn.load_model(info.model_uri).predict(features).tolist(),
    )
    call("register_model", lambda: mlflow.register_model(info.model_uri, f"{P}-sk"))
    call(
        "load registered predict",
        lambda: mlflow.pyfunc.load_model(f"models:/{P}-sk/1").predict(features).tolist(),
    )
    mlflow.sklearn.autolog()
    with mlflow.start_run(run_name="auto") as auto:
        stable(auto.info.run_id, "run")
        LogisticRegression(C=0.5).fit(features, labels)
    found = client.search_logged_models(
        experiment_ids=[auto.info.experiment_id],
        filter_string=f"source_run_id = '{auto.info.run_id}'",
    )
    call("autolog logged its model", lambda: [m.name for m in found])
    call(
        "autolog params",
        lambda: {
            k: v
            for k, v in client.get_run(auto.info.run_id).data.params.items()
            if k in ("C", "max_iter", "penalty")
        },
    )


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    a, _b = experiments()
    runs(a)
    outer = fluent(folder)
    registry(outer)
    sklearn_models(folder)
    Path(sys.argv[1]).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
