"""The code the experiments' trials run in these tests, and their experiment documents."""

from __future__ import annotations

from typing import Any

import yaml

from tests.conftest import make_zip

# Accuracy rises with the epochs towards a ceiling set by the parameters; `--fail yes` exits 3.
TRAIN = """
import argparse, json, math, os, time
p = argparse.ArgumentParser()
p.add_argument('--lr', type=float, default=0.1)
p.add_argument('--width', type=int, default=8)
p.add_argument('--optimizer', default='sgd')
p.add_argument('--epochs', type=int, default=3)
p.add_argument('--pause', type=float, default=0.0)
p.add_argument('--fail', default='no')
a = p.parse_args()
print('args', json.dumps(vars(a)), flush=True)
if a.fail == 'yes':
    raise SystemExit(3)
ceiling = 0.99 - abs(math.log10(a.lr) + 2) * 0.1 - (0.05 if a.optimizer == 'sgd' else 0.0)
for epoch in range(1, a.epochs + 1):
    accuracy = ceiling * (1 - 0.5 ** epoch)
    print(f'epoch={epoch} accuracy={accuracy:.5f} loss={1 - accuracy:.5f}', flush=True)
    time.sleep(a.pause)
model = os.path.join(os.environ['RESULT_DIR'], 'model')
os.makedirs(model, exist_ok=True)
with open(os.path.join(model, 'params.json'), 'w') as f:
    json.dump(vars(a), f)
"""


def code() -> bytes:
    return make_zip({"train.py": TRAIN})


PARAMETERS: list[dict[str, Any]] = [
    {
        "name": "lr",
        "parameterType": "double",
        "feasibleSpace": {"min": "0.001", "max": "0.1", "step": "0.001"},
    },
    {"name": "width", "parameterType": "int", "feasibleSpace": {"min": "4", "max": "32"}},
    {
        "name": "optimizer",
        "parameterType": "categorical",
        "feasibleSpace": {"list": ["sgd", "adam", "rmsprop"]},
    },
]


def experiment(
    name: str,
    algorithm: str = "random",
    *,
    max_trials: int = 3,
    parallel: int = 3,
    extra_args: str = "",
    parameters: list[dict[str, Any]] | None = None,
    settings: dict[str, str] | None = None,
    **spec: Any,
) -> str:
    """A Katib v1beta1 Experiment whose trialSpec is a Loom manifest running `train.py`."""
    parameters = PARAMETERS if parameters is None else parameters
    names = [p["name"] for p in parameters]
    args = " ".join(f"--{n} ${{trialParameters.{n}}}" for n in names)
    algo: dict[str, Any] = {"algorithmName": algorithm}
    if settings:
        algo["algorithmSettings"] = [{"name": k, "value": v} for k, v in settings.items()]
    document = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name},
        "spec": {
            "objective": {
                "type": "maximize",
                "objectiveMetricName": "accuracy",
                "additionalMetricNames": ["loss"],
            },
            "algorithm": algo,
            "parallelTrialCount": min(parallel, max_trials),
            "maxTrialCount": max_trials,
            "parameters": parameters,
            "trialTemplate": {
                "trialParameters": [{"name": n, "reference": n} for n in names],
                "trialSpec": {
                    "name": "hpo-test",
                    "cpus": 0.25,
                    "memory": "256MiB",
                    "framework": {
                        "name": "python",
                        "command": f"python train.py {args} {extra_args}".strip(),
                    },
                },
            },
            **spec,
        },
    }
    return yaml.safe_dump(document, sort_keys=False)
