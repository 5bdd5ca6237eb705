"""KFP pipelines of our own, written with the real SDK and compiled at test time (by
`compile_all`, in the SDK's own venv): each source defines `pipeline`."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.venvs import kfp_python

# An artifact between two lightweight components, a ParallelFor over an upstream list (two at
# a time) collected into one list, If/Else on an upstream output, a nested pipeline after a
# task, a retried step behind an If on a parameter, and an ExitHandler that reads how its
# group ended. Everything cached but the exit task's input differs run to run.
FEATURES = """
from kfp import dsl
from kfp.dsl import Dataset, Input, Metrics, Model, Output


@dsl.component
def make_data(n: int, data: Output[Dataset]) -> list:
    with open(data.path, "w") as f:
        f.write(",".join(str(i) for i in range(n)))
    data.metadata["rows"] = n
    return list(range(1, n + 1))


@dsl.component
def train(
    data: Input[Dataset], scale: float, model: Output[Model], metrics: Output[Metrics]
) -> float:
    rows = open(data.path).read().split(",")
    assert data.metadata["rows"] == len(rows), data.metadata
    with open(model.path, "w") as f:
        f.write(f"weights {len(rows) * scale}")
    metrics.log_metric("accuracy", 0.5 + len(rows) / 100)
    return len(rows) * scale


@dsl.component
def square(x: int) -> int:
    return x * x


@dsl.component
def total(xs: list) -> int:
    return sum(xs)


@dsl.component
def verdict(score: float, label: str) -> str:
    return f"{label}:{score}"


@dsl.component
def flaky():
    raise SystemExit("failing on purpose")


@dsl.component
def report(status: dsl.PipelineTaskFinalStatus) -> str:
    print("the group ended", status.state, flush=True)
    return status.state


@dsl.pipeline
def doubled(v: int) -> int:
    return square(x=v).output


@dsl.pipeline(name="kfp-features")
def pipeline(n: int = 3, scale: float = 2.0, fail: bool = False):
    with dsl.ExitHandler(report()):
        data = make_data(n=n)
        model = train(data=data.outputs["data"], scale=scale)
        with dsl.ParallelFor(data.outputs["Output"], parallelism=2) as item:
            squared = square(x=item)
        total(xs=dsl.Collected(squared.output))
        with dsl.If(model.outputs["Output"] > 5.0):
            verdict(score=model.outputs["Output"], label="big")
        with dsl.Else():
            verdict(score=model.outputs["Output"], label="small")
        doubled(v=n).after(model)
        with dsl.If(fail == True):
            flaky().set_retry(num_retries=1, backoff_duration="0s")
"""

# A container component: placeholders for parameters, artifacts and output files, Concat and
# IfPresent, resources, an env variable and a retry policy.
CONTAINER = """
from kfp import dsl
from kfp.dsl import Dataset, Output


@dsl.container_component
def write(text: str, out: Output[Dataset], count: dsl.OutputPath(int), extra: str = None):
    return dsl.ContainerSpec(
        image="alpine:3.20",
        command=["sh", "-c"],
        args=[
            dsl.ConcatPlaceholder(['echo "$0" > "$1"; echo 3 > "$2"; echo ', text]),
            text,
            out.path,
            count,
            dsl.IfPresentPlaceholder(input_name="extra", then=["--extra", extra]),
        ],
    )


@dsl.pipeline(name="kfp-container")
def pipeline(text: str = "hello"):
    task = write(text=text)
    task.set_cpu_limit("500m").set_memory_limit("512Mi").set_env_variable("GREETING", "hi")
    task.set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(1)
    task.set_retry(
        num_retries=3, backoff_duration="2s", backoff_factor=3, backoff_max_duration="10s"
    )
    task.set_caching_options(False)
"""

# Two tasks in a loop body, a nested loop, an importer and Elif.
SHAPES = """
from kfp import dsl
from kfp.dsl import Dataset, Input


@dsl.component
def pick() -> int:
    return 2


@dsl.component
def use(x: int, y: str = "a") -> str:
    return f"{x}{y}"


@dsl.component
def read(data: Input[Dataset]) -> str:
    return data.uri


@dsl.pipeline(name="kfp-shapes")
def pipeline(words: list = ["a", "b"]):
    p = pick()
    with dsl.ParallelFor(words) as word:
        first = use(x=1, y=word)
        use(x=2, y=first.output)
        with dsl.ParallelFor([{"k": 1}, {"k": 2}]) as inner:
            use(x=inner.k, y=word)
    with dsl.If(p.output == 1):
        use(x=1)
    with dsl.Elif(p.output == 2):
        use(x=2)
    with dsl.Else():
        use(x=3)
    imported = dsl.importer(artifact_uri="loom://jobs/training-abc/artifacts/data",
                            artifact_class=Dataset, metadata={"origin": "earlier"})
    read(data=imported.output)
"""

_COMPILE = """
import runpy, sys, warnings
warnings.simplefilter("ignore")
from kfp import compiler
for source in sys.argv[1:]:
    found = runpy.run_path(source)  # from a file: the SDK reads each component's source
    compiler.Compiler().compile(found["pipeline"], source[: -len(".py")] + ".yaml")
"""


def compile_all(sources: dict[str, str], folder: Path) -> dict[str, str]:
    """Each source's pipeline compiled by the real SDK: its YAML, by name."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(source)
    files = [str(folder / f"{name}.py") for name in sources]
    subprocess.run([str(kfp_python()), "-c", _COMPILE, *files], check=True, timeout=300)
    return {name: (folder / f"{name}.yaml").read_text() for name in sources}


def chain(length: int) -> str:
    """A pipeline of `length` lightweight steps, each adding one to the last one's output."""
    calls = "\n".join("    x = add_one(x=x.output)" for _ in range(length - 1))
    return f"""
from kfp import dsl


@dsl.component
def add_one(x: int) -> int:
    return x + 1


@dsl.pipeline(name="chain-{length}")
def pipeline(start: int = 0):
    x = add_one(x=start)
{calls}
"""
