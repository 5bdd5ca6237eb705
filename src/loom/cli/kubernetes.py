"""`loom kubernetes render MANIFEST`: the Kubernetes objects a job would become, as YAML, without
a cluster or a platform, for an operator to read and review."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import typer
import yaml
from rich.markup import escape

from loom.cli.common import err
from loom.domain.errors import ManifestError
from loom.domain.manifest import load_manifest
from loom.kube.objects import JobShape, KubeOptions, render

app = typer.Typer(help="Loom on Kubernetes: what jobs become there.", no_args_is_help=True)


@app.command("render")
def render_command(
    manifest: Annotated[Path, typer.Argument(help="the job's manifest (YAML)")],
    kind: Annotated[
        str, typer.Option(help="job: an indexed batch Job; trainjob: a Kubeflow TrainJob")
    ] = "job",
    namespace: Annotated[
        str, typer.Option(envvar="LOOM_KUBE_NAMESPACE", help="the jobs' namespace")
    ] = "loom-jobs",
    image: Annotated[
        str, typer.Option(envvar="LOOM_KUBE_IMAGE", help="the learner image")
    ] = "ghcr.io/loom-ml/loom-learner:latest",
    runtimes: Annotated[
        str, typer.Option(envvar="LOOM_KUBE_RUNTIMES", help="framework → runtime (JSON)")
    ] = "{}",
    gpu_resource: Annotated[
        str, typer.Option(envvar="LOOM_KUBE_GPU_RESOURCE", help="a GPU's resource name")
    ] = "nvidia.com/gpu",
    owner: Annotated[str, typer.Option(help="the owner shown in the labels")] = "you",
    job_id: Annotated[str, typer.Option(help="the job id shown in names")] = "training-0000000000",
    attempt: Annotated[int, typer.Option(min=1)] = 1,
) -> None:
    """Print the Secret, Service, NetworkPolicy and Job (or TrainJob) of the job's attempt.
    The Secret shows what it will hold, never a value."""
    if kind not in ("job", "trainjob"):
        err.print(f"[red]error:[/red] --kind {escape(kind)!r}: choose job or trainjob")
        raise typer.Exit(2)
    try:
        parsed, _ = load_manifest(manifest.read_bytes(), source=str(manifest))
        chosen = json.loads(runtimes)
        if not isinstance(chosen, dict):
            raise ValueError("a JSON object is needed")
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot read {escape(str(manifest))}: {exc.strerror}")
        raise typer.Exit(2) from exc
    except ManifestError as exc:
        err.print(f"[red]error:[/red] {escape(exc.message)}", highlight=False)
        raise typer.Exit(2) from exc
    except ValueError as exc:
        err.print(f"[red]error:[/red] --runtimes is not a JSON object of names: {exc}")
        raise typer.Exit(2) from exc
    shape = JobShape(
        job_id=job_id,
        attempt=attempt,
        owner=owner,
        framework=parsed.framework.name,
        learners=parsed.learners,
        per_learner=parsed.per_learner,
        restart_policy=str(parsed.restart_policy),
        max_restarts=parsed.max_restarts,
        storage=parsed.storage,
    )
    options = KubeOptions(
        namespace=namespace,
        image=image,
        gpu_resource=gpu_resource,
        runtimes={str(k): str(v) for k, v in chosen.items()},
    )
    chosen_kind: Literal["job", "trainjob"] = "trainjob" if kind == "trainjob" else "job"
    objects = render(shape, options, chosen_kind)
    typer.echo(yaml.safe_dump_all(objects, sort_keys=False), nl=False)
