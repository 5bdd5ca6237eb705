"""`loom deploy MODEL[:VERSION|@ALIAS]`, `loom deployments list|show|update|delete` and
`loom deployments keys create|list|revoke`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from loom.cli import monitoring
from loom.cli.common import client, console, err
from loom.cli.jobs import zip_code
from loom.cli.output import Format, JsonOpt, OutputOpt, WatchOpt, chosen, emit, watch, whole
from loom.client import ClientError

app = typer.Typer(help="Deployments: registered models served over REST.", no_args_is_help=True)
keys = typer.Typer(
    help="Keys that call a deployment's endpoint (Authorization: Bearer KEY).", no_args_is_help=True
)
app.add_typer(keys, name="keys")
monitoring.register(app)  # drift, payloads

MinReplicas = Annotated[
    int | None, typer.Option("--min-replicas", help="0 scales to zero when idle")
]
MaxReplicas = Annotated[int | None, typer.Option("--max-replicas")]
Target = Annotated[
    float | None,
    typer.Option("--target-concurrency", help="in-flight requests per replica before scaling up"),
]
Delay = Annotated[
    float | None,
    typer.Option("--scale-down-delay", help="seconds below size before removing a replica"),
]
BatchSize = Annotated[
    int | None, typer.Option("--batch-size", help="max samples per batch; 1: no batching")
]
BatchWait = Annotated[float | None, typer.Option("--batch-wait-ms", help="max wait for a batch")]
Gpus = Annotated[
    int | None,
    typer.Option("--gpus", min=0, help="GPUs each replica is pinned to (its model runs there)"),
]
RequestLog = Annotated[
    bool | None,
    typer.Option("--request-log/--no-request-log", help="log each request and response"),
]

Monitor = Annotated[
    bool | None,
    typer.Option(
        "--monitor/--no-monitor",
        help="drift and outlier detection against the version's reference data",
    ),
]
Window = Annotated[int | None, typer.Option("--window", min=10, help="samples per drift test")]
PayloadRate = Annotated[
    float | None,
    typer.Option("--log-payloads", min=0, max=1, help="share of requests whose payloads are kept"),
]


def parse_ref(ref: str) -> tuple[str, str]:
    """`digits` → latest, `digits:3` → version 3, `digits@production` → that alias."""
    for sep in ("@", ":"):
        if sep in ref:
            model, _, version = ref.partition(sep)
            if not model or not version:
                raise typer.BadParameter(f"{ref!r}: use MODEL, MODEL:VERSION or MODEL@ALIAS")
            return model, version
    return ref, "latest"


def _options(**given: Any) -> dict[str, Any]:
    return {key: value for key, value in given.items() if value is not None}


def monitoring_options(
    monitor: bool | None, window: int | None, payload_rate: float | None
) -> dict[str, Any] | None:
    """The API's `monitoring` object for what was given; None for nothing given."""
    given: dict[str, Any] = _options(drift=monitor, outliers=monitor, window=window)
    if payload_rate is not None:
        given["payloads"] = {"rate": payload_rate}
    return given or None


def _replicas(found: dict[str, Any]) -> str:
    r = found["replicas"]
    extra = "".join(
        f", {r[k]} {k}" for k in ("starting", "draining") if r.get(k)
    )  # only when there are some
    return f"{r.get('ready', 0)}/{r.get('desired', 0)} ready{extra}"


def _print(found: dict[str, Any]) -> None:
    console.print(f"[bold]{found['name']}[/bold]: {found['state']}")
    if found.get("kind") == "graph":
        nodes = (found.get("graph") or {}).get("nodes", {})
        console.print(f"  graph      nodes {', '.join(sorted(nodes))}")
    else:
        console.print(f"  model      {found['model']} version {found['model_version']}")
    if found.get("canary"):
        canary = found["canary"]
        console.print(
            f"  canary     version {canary['version']} for {canary['percent']:g}% of requests"
        )
    if len(found.get("requests_by_version") or {}) > 1:
        counts = ", ".join(f"v{v}: {n}" for v, n in sorted(found["requests_by_version"].items()))
        console.print(f"  requests   {counts}")
    console.print(
        f"  replicas   {_replicas(found)} (min {found['min_replicas']}, "
        f"max {found['max_replicas']}, target {found['target_concurrency']:g} in flight each)"
    )
    access = "public: no token needed" if found.get("public") else "needs a token or a key"
    console.print(f"  endpoint   {found['endpoint']} ({access})")
    console.print(f"  V2 infer   POST {found['urls']['v2_infer']}")
    console.print(f"  V1 predict POST {found['urls']['v1_predict']}")
    if found.get("grpc_endpoint"):
        console.print(f"  V2 gRPC    {found['grpc_endpoint']} (inference.GRPCInferenceService)")
    console.print(f"  metrics    {found['urls']['metrics']}")
    if found.get("monitoring"):
        console.print(f"  monitoring {monitoring_line(found['monitoring'])}")
    if found.get("data_path"):  # what answers its requests (absent until its gateway reports)
        why = f" ({found['unproxied']})" if found.get("unproxied") else ""
        console.print(f"  data path  {found['data_path']}{why}")
    if found["message"]:
        console.print(f"  [yellow]{found['message']}[/yellow]")


def monitoring_line(monitoring: dict[str, Any]) -> str:
    watched = [k for k in ("drift", "outliers") if monitoring.get(k)]
    rate = (monitoring.get("payloads") or {}).get("rate") or 0
    parts = [f"{' and '.join(watched)} over windows of {monitoring['window']}"] if watched else []
    if rate:
        parts.append(f"payloads of {rate:.0%} of requests kept")
    status = monitoring.get("status") or {}
    if status.get("state"):
        parts.append(f"detector {status['state']}")
    return "; ".join(parts) or "off"


def deploy(
    model: Annotated[str, typer.Argument(help="MODEL, MODEL:VERSION or MODEL@ALIAS")],
    name: Annotated[str, typer.Option("--name", "-n", help="the deployment's name")],
    min_replicas: MinReplicas = None,
    max_replicas: MaxReplicas = None,
    target_concurrency: Target = None,
    scale_down_delay: Delay = None,
    batch_size: BatchSize = None,
    batch_wait_ms: BatchWait = None,
    gpus: Gpus = None,
    request_log: RequestLog = None,
    monitor: Monitor = None,
    window: Window = None,
    log_payloads: PayloadRate = None,
    port: Annotated[int | None, typer.Option(help="endpoint port; default: a free one")] = None,
    grpc_port: Annotated[
        int | None, typer.Option(help="V2 gRPC endpoint port; default: a free one")
    ] = None,
    public: Annotated[
        bool, typer.Option("--public", help="answer without a token (default: token or key)")
    ] = False,
    runtime: Annotated[
        str | None,
        typer.Option(
            help="serve it with this runtime (e.g. tensorflow, kserve); default: "
            "the first that fits its files"
        ),
    ] = None,
    pip: Annotated[
        list[str] | None, typer.Option("--pip", help="a package for its replicas (repeat it)")
    ] = None,
    explainer: Annotated[
        str | None, typer.Option(help="the built-in explainer for :explain (captum)")
    ] = None,
    transformer: Annotated[
        Path | None,
        typer.Option(help="a folder with transformer.py (a kserve.Model) to run in front"),
    ] = None,
    wait: Annotated[bool, typer.Option(help="wait until it serves")] = True,
) -> None:
    """Serve a registered model version behind one endpoint (V2 and V1 over REST, V2 over gRPC)."""
    model_name, version = parse_ref(model)
    options = _options(
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        target_concurrency=target_concurrency,
        scale_down_delay_s=scale_down_delay,
        batch_size=batch_size,
        batch_wait_ms=batch_wait_ms,
        gpus_per_replica=gpus,
        request_log=request_log,
        port=port,
        grpc_port=grpc_port,
        public=public or None,
        monitoring=monitoring_options(monitor, window, log_payloads),
        runtime=runtime,
        pip=pip or None,
        explainer=explainer,
        transformer=zip_code(transformer) if transformer else None,
    )
    with client() as loom:
        found = loom.deploy(name, model_name, version, **options)
        if wait:
            found = _wait(loom, name)
    _print(found)


def _wait(loom: Any, name: str) -> dict[str, Any]:
    """Wait for the deployment's replicas, with a spinner saying where it is."""
    try:
        with err.status(f"deploying {name}…") as spinner:

            def seen(found: dict[str, Any]) -> None:
                said = f": {found['message']}" if found.get("message") else ""
                spinner.update(f"deploying {name}: {found['state']}, {_replicas(found)}{said}")

            ready = ("ready", "scaled to zero")
            found: dict[str, Any] = loom.wait_deployment(name, states=ready, seen=seen)
    except ClientError as exc:
        err.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from exc
    return found


@app.command("list")
def list_deployments(fmt: OutputOpt = Format.TABLE, watching: WatchOpt = False) -> None:
    """Your deployments."""
    with client() as loom:
        if watching:
            watch(fmt, loom.deployments, lambda found, _wide: _deployments_table(found))
            return
        found = loom.deployments()
    emit(fmt, found, lambda _wide: _deployments_table(found))


def _deployments_table(found: list[dict[str, Any]]) -> Table:
    name = whole("NAME", [d["name"] for d in found])
    states = whole("STATE", [d["state"] for d in found])
    table = Table(name, states, "MODEL", "VERSION", "REPLICAS", "ENDPOINT")
    for d in found:
        table.add_row(
            d["name"],
            d["state"],
            d["model"],
            str(d["model_version"]),
            _replicas(d),
            d["endpoint"],
        )
    return table


@app.command("show")
def show(name: str, fmt: OutputOpt = Format.TABLE, as_json: JsonOpt = False) -> None:
    """A deployment's state, replicas, endpoint and settings."""
    with client() as loom:
        found = loom.deployment(name)
    emit(chosen(fmt, as_json), found, lambda _wide: _show(found))


def _show(found: dict[str, Any]) -> None:
    _print(found)
    for replica in found["replica_list"]:
        console.print(
            f"  replica {replica['id']}: {replica['state']}, pid {replica['pid']}, "
            f"version {replica['version']}"
        )


@app.command("update")
def update(
    name: str,
    version: Annotated[
        str | None, typer.Option(help="roll out another version: number, alias or latest")
    ] = None,
    min_replicas: MinReplicas = None,
    max_replicas: MaxReplicas = None,
    target_concurrency: Target = None,
    scale_down_delay: Delay = None,
    batch_size: BatchSize = None,
    batch_wait_ms: BatchWait = None,
    gpus: Gpus = None,
    request_log: RequestLog = None,
    monitor: Monitor = None,
    window: Window = None,
    log_payloads: PayloadRate = None,
    public: Annotated[
        bool | None,
        typer.Option("--public/--private", help="answer without a token, or only with one"),
    ] = None,
    canary: Annotated[
        str | None,
        typer.Option(help="serve this version (number, alias or latest) to --percent of requests"),
    ] = None,
    percent: Annotated[
        float | None,
        typer.Option(min=0, max=100, help="the canary's share of requests (default 10)"),
    ] = None,
    promote: Annotated[
        bool, typer.Option("--promote", help="the canary becomes the version served")
    ] = False,
    rollback: Annotated[bool, typer.Option("--rollback", help="remove the canary")] = False,
) -> None:
    """Change replicas, batching, the model version (rolled out without dropping requests),
    whether it answers without a token, or its canary: `--canary 3 --percent 10`, then
    `--promote` or `--rollback`."""
    changes = _options(
        canary=canary,
        canary_percent=percent,
        promote=promote or None,
        rollback=rollback or None,
        version=version,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        target_concurrency=target_concurrency,
        scale_down_delay_s=scale_down_delay,
        batch_size=batch_size,
        batch_wait_ms=batch_wait_ms,
        gpus_per_replica=gpus,
        request_log=request_log,
        public=public,
        monitoring=monitoring_options(monitor, window, log_payloads),
    )
    if not changes:
        raise typer.BadParameter(
            "nothing to change: give --version, a scaling option, --public or --private, "
            "--monitor, or --canary/--percent/--promote/--rollback"
        )
    with client() as loom:
        found = loom.update_deployment(name, **changes)
    _print(found)


@app.command("delete")
def delete(name: str) -> None:
    """Drain and stop a deployment."""
    with client() as loom:
        loom.delete_deployment(name)
    console.print(f"deleted deployment {name}")


@keys.command("create")
def create_key(
    name: Annotated[str, typer.Argument(help="the deployment")],
    key_name: Annotated[str, typer.Option("--name", "-n", help="what the key is for")] = "key",
) -> None:
    """A new key for the deployment; its value is shown this once."""
    with client() as loom:
        created = loom.create_deployment_key(name, key_name)
    console.print(f"key {created['id']} ({created['name']}) for deployment {name}:")
    console.print(created["key"], soft_wrap=True, highlight=False)
    err.print("Keep it now: it is not shown again. Send it as `Authorization: Bearer KEY`.")


@keys.command("list")
def list_keys(name: Annotated[str, typer.Argument(help="the deployment")]) -> None:
    """The deployment's keys (never their values) and when each was last used."""
    with client() as loom:
        found = loom.deployment_keys(name)
    table = Table(
        whole("ID", [k["id"] for k in found]),
        "NAME",
        whole("CREATED", [k["created_at"] for k in found]),
        "LAST USED",
    )
    for key in found:
        table.add_row(key["id"], key["name"], key["created_at"], key["last_used_at"] or "never")
    console.print(table)


@keys.command("revoke")
def revoke_key(
    name: Annotated[str, typer.Argument(help="the deployment")],
    key_id: Annotated[str, typer.Argument(help="the key's id (`loom deployments keys list`)")],
) -> None:
    """The key stops working within seconds."""
    with client() as loom:
        loom.revoke_deployment_key(name, key_id)
    console.print(f"revoked key {key_id} of deployment {name}")
