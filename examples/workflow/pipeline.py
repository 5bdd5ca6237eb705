"""examples/workflow/pipeline.yml written with Loom's Python DSL: the same spec, step for step.

loom pipelines run examples/workflow/pipeline.py examples/ -f
"""

from __future__ import annotations

from loom.client.pipeline_dsl import Pipeline, item, param

pipeline = Pipeline(
    "digits-workflow",
    description="data, three CNN variants in parallel, the best one served and asked",
    parameters={
        "seed": 0,
        "epochs": 6,
        "variants": [
            {"width": 8, "learners": 1},
            {"width": 16, "learners": 1},
            {"width": 32, "learners": 2},
        ],
        "min_accuracy": 0.9,
    },
)
data = pipeline.python("data", file="workflow/prepare.py", args=["--seed", param("seed")])
split = {"data": data.output("job_id")}  # its RESULT_DIR, as inputs/data/
train = pipeline.job(
    "train",
    for_each=param("variants"),
    parallelism=3,
    retry={"limit": 1, "backoff_s": 2},
    inputs=split,
    manifest={
        "name": f"digits-w{item('width')}",
        "model_name": "digits-workflow",
        "cpus": 0.5,
        "memory": "1Gb",
        "learners": item("learners"),
        "framework": {
            "name": "pytorch",
            "command": (
                f"python digits-pytorch/train.py --width {item('width')} "
                f"--epochs {param('epochs')} --data inputs/data/digits.npz"
            ),
        },
        "evaluation_metrics": {"type": "logger"},
    },
)
pick = pipeline.select("pick", from_=[train], metric="accuracy", mode="max")
serve = pipeline.deploy(
    "serve",
    when=f"{pick.output('metrics.accuracy')} >= {param('min_accuracy')}",
    deployment="digits-workflow",
    model=pick.output("model"),
    public=True,
)
pipeline.python(
    "predict",
    file="workflow/predict.py",
    inputs=split,
    args=["--url", serve.output("infer_url"), "--data", "inputs/data/digits.npz"],
    cache=False,
)
