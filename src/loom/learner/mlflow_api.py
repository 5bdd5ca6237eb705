"""MLflow's tracking REST API, the subset its client uses to log runs, served by the learner's
wrapper on loopback: training code written for MLflow runs unchanged on Loom.

The learner gets `MLFLOW_TRACKING_URI` (this server) and `MLFLOW_TRACKING_TOKEN` (a secret of
this learner's alone, never the job's platform token), so no other process on the machine can
write into this job. What arrives becomes the job's metric points, parameters and tags, shipped
like the tracking SDK's. Metrics named `group/name` (`test/accuracy`) keep their group; others
are in the group `mlflow`. Runs and experiments live only as long as the learner: a job is one
experiment, and each run the code starts is recorded under it.
"""

from __future__ import annotations

import hmac
import json
import math
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from loom.domain.run_info import problem

PREFIX = "/api/2.0/mlflow/"
MAX_BODY = 4 << 20
MAX_RUNS = 1000
MAX_KEYS = 10_000
# What this endpoint (the platform's process, outside the job's cgroup) holds for a learner at
# most, whatever it is sent: past it a request is refused (413) and the job's log says so.
MAX_HELD_BYTES = 16 << 20
MAX_CONNECTIONS = 16  # requests served at once; more wait in the listen queue
Points = Callable[[list[dict[str, Any]]], None]


class MlflowError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Tracking:
    """The state behind the API: experiments and runs of this learner, and where points go."""

    def __init__(
        self,
        job_id: str,
        artifacts: str,
        ship: Points,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.job_id = job_id
        self.artifacts = artifacts
        self.ship = ship
        self.notice = notice  # a line in the job's log (said once: what was refused and why)
        self.held = 0
        self._refused = False
        self.lock = threading.Lock()
        self.experiments = {"0": "Default"}
        self.runs: dict[str, dict[str, Any]] = {}

    # -- experiments -----------------------------------------------------------------------
    def experiment(self, experiment_id: str) -> dict[str, Any]:
        name = self.experiments.get(experiment_id)
        if name is None:
            raise MlflowError(404, "RESOURCE_DOES_NOT_EXIST", f"no experiment {experiment_id}")
        return {
            "experiment_id": experiment_id,
            "name": name,
            "artifact_location": self.artifacts,
            "lifecycle_stage": "active",
            "tags": [],
        }

    def experiment_named(self, name: str) -> dict[str, Any]:
        for key, known in self.experiments.items():
            if known == name:
                return self.experiment(key)
        raise MlflowError(404, "RESOURCE_DOES_NOT_EXIST", f"no experiment named {name!r}")

    def create_experiment(self, name: str) -> str:
        with self.lock:
            if name in self.experiments.values():
                raise MlflowError(400, "RESOURCE_ALREADY_EXISTS", f"{name!r} exists")
            key = str(len(self.experiments))
            self.experiments[key] = name
            return key

    # -- runs ------------------------------------------------------------------------------
    def create_run(self, body: dict[str, Any]) -> dict[str, Any]:
        experiment_id = str(body.get("experiment_id") or "0")
        self.experiment(experiment_id)
        run_id = uuid.uuid4().hex
        run = {
            "info": {
                "run_id": run_id,
                "run_uuid": run_id,
                "run_name": str(body.get("run_name") or f"{self.job_id}"),
                "experiment_id": experiment_id,
                "user_id": str(body.get("user_id") or ""),
                "status": "RUNNING",
                "start_time": int(body.get("start_time") or time.time() * 1000),
                "artifact_uri": self.artifacts,
                "lifecycle_stage": "active",
            },
            "params": {},
            "tags": {},
            "metrics": {},
        }
        with self.lock:
            if len(self.runs) >= MAX_RUNS:
                raise MlflowError(400, "RESOURCE_LIMIT_EXCEEDED", f"more than {MAX_RUNS} runs")
            self._hold(512 + len(str(body.get("run_name") or "")), "a run")
            self.runs[run_id] = run
        for tag in _entries(body.get("tags")):
            self.set_tag(run_id, tag.get("key"), tag.get("value"))
        return self.shown(run_id)

    def run(self, run_id: Any) -> dict[str, Any]:
        run = self.runs.get(str(run_id))
        if run is None:
            raise MlflowError(404, "RESOURCE_DOES_NOT_EXIST", f"no run {run_id}")
        return run

    def shown(self, run_id: str) -> dict[str, Any]:
        run = self.run(run_id)
        with self.lock:
            return {
                "info": dict(run["info"]),
                "data": {
                    "metrics": list(run["metrics"].values()),
                    "params": [{"key": k, "value": v} for k, v in run["params"].items()],
                    "tags": [{"key": k, "value": v} for k, v in run["tags"].items()],
                },
            }

    def update(self, body: dict[str, Any]) -> dict[str, Any]:
        run = self.run(body.get("run_id") or body.get("run_uuid"))
        with self.lock:
            for field in ("status", "end_time", "run_name"):
                if body.get(field) is not None:
                    run["info"][field] = body[field]
            return dict(run["info"])

    def log_metrics(self, run_id: Any, metrics: list[Any]) -> None:
        run = self.run(run_id)
        points = []
        for metric in metrics:
            if not isinstance(metric, dict):
                raise MlflowError(400, "INVALID_PARAMETER_VALUE", f"bad metric {metric!r:.100}")
            key, value = metric.get("key"), _number(metric.get("value"))
            if not isinstance(key, str) or not key or len(key) > 250 or value is None:
                raise MlflowError(400, "INVALID_PARAMETER_VALUE", f"bad metric {metric!r:.200}")
            step = int(metric.get("step") or 0)
            stamp = int(metric.get("timestamp") or time.time() * 1000)
            if len(run["metrics"]) >= MAX_KEYS and key not in run["metrics"]:
                raise MlflowError(400, "RESOURCE_LIMIT_EXCEEDED", f"more than {MAX_KEYS} metrics")
            with self.lock:
                if key not in run["metrics"]:
                    self._hold(128 + len(key), f"metric {key!r}")
                run["metrics"][key] = {"key": key, "value": value, "step": step, "timestamp": stamp}
            if not math.isfinite(float(value)):
                continue  # kept by the run, as MLflow does; not a point
            group, _, name = key.rpartition("/")
            points.append(
                {
                    "group": group or "mlflow",
                    "step": step,
                    "etimes": {"step": step, "time": stamp},
                    "values": {name: value},
                }
            )
        if points:
            self.ship(points)

    def log_param(self, run_id: Any, key: Any, value: Any) -> None:
        run = self.run(run_id)
        if not isinstance(key, str) or value is None:
            raise MlflowError(400, "INVALID_PARAMETER_VALUE", "a param needs a key and a value")
        value = str(value)
        self._valid("param", key, value)
        with self.lock:
            before = run["params"].get(key)
            if before is not None and before != value:
                raise MlflowError(
                    400,
                    "INVALID_PARAMETER_VALUE",
                    f"Changing param values is not allowed. Param with key={key!r} was already "
                    f"logged with value={before!r} for run ID={run_id!r}. "
                    f"Attempted logging new value {value!r}.",
                )
            if before is None:
                if len(run["params"]) >= MAX_KEYS:
                    raise MlflowError(
                        400, "RESOURCE_LIMIT_EXCEEDED", f"more than {MAX_KEYS} params"
                    )
                self._hold(64 + len(key) + len(value), f"param {key!r}")
            run["params"][key] = value
        if before is None:
            self.ship([{"info": {"kind": "param", "key": key, "value": value}}])

    def set_tag(self, run_id: Any, key: Any, value: Any) -> None:
        run = self.run(run_id)
        if not isinstance(key, str) or value is None:
            raise MlflowError(400, "INVALID_PARAMETER_VALUE", "a tag needs a key and a value")
        value = str(value)
        own = key.startswith("mlflow.")  # the client's own bookkeeping (source, user, name)
        if not own:
            self._valid("tag", key, value)
        with self.lock:
            if len(run["tags"]) >= MAX_KEYS and key not in run["tags"]:
                raise MlflowError(400, "RESOURCE_LIMIT_EXCEEDED", f"more than {MAX_KEYS} tags")
            kept = value[:5000]
            grown = len(kept) - len(run["tags"].get(key, "")) + (0 if key in run["tags"] else 64)
            self._hold(max(grown + len(key) * (key not in run["tags"]), 0), f"tag {key!r}")
            run["tags"][key] = kept
        if not own:
            self.ship([{"info": {"kind": "tag", "key": key, "value": value}}])

    def _hold(self, size: int, what: str) -> None:
        """Count `size` more bytes held, or refuse: the endpoint's memory stays bounded."""
        if self.held + size > MAX_HELD_BYTES:
            message = (
                f"this learner's MLflow runs hold {self.held / 2**20:.1f} MiB of runs, params, "
                f"tags and metrics, the most the platform keeps for a learner "
                f"({MAX_HELD_BYTES >> 20} MiB); {what} was not logged"
            )
            if not self._refused and self.notice is not None:
                self._refused = True
                self.notice(f"loom: MLflow: {message} (later refusals are not said again)")
            raise MlflowError(413, "RESOURCE_LIMIT_EXCEEDED", message)
        self.held += size

    @staticmethod
    def _valid(kind: str, key: str, value: str) -> None:
        said = problem(kind, key, value)
        if said:
            raise MlflowError(400, "INVALID_PARAMETER_VALUE", said)

    # -- dispatch --------------------------------------------------------------------------
    def handle(self, method: str, route: str, query: dict[str, str], body: dict[str, Any]) -> Any:
        if method == "GET":
            return self._get(route, query)
        return self._post(route, body)

    def _get(self, route: str, query: dict[str, str]) -> Any:
        if route == "experiments/get":
            return {"experiment": self.experiment(query.get("experiment_id", ""))}
        if route == "experiments/get-by-name":
            return {"experiment": self.experiment_named(query.get("experiment_name", ""))}
        if route == "runs/get":
            return {"run": self.shown(query.get("run_id") or query.get("run_uuid") or "")}
        raise MlflowError(404, "ENDPOINT_NOT_FOUND", f"GET {PREFIX}{route} is not served here")

    def _post(self, route: str, body: dict[str, Any]) -> Any:
        run_id = body.get("run_id") or body.get("run_uuid")
        if route == "experiments/create":
            return {"experiment_id": self.create_experiment(str(body.get("name") or ""))}
        if route == "runs/create":
            return {"run": self.create_run(body)}
        if route == "runs/update":
            return {"run_info": self.update(body)}
        if route == "runs/log-metric":
            self.log_metrics(run_id, [body])
        elif route == "runs/log-parameter":
            self.log_param(run_id, body.get("key"), body.get("value"))
        elif route == "runs/set-tag":
            self.set_tag(run_id, body.get("key"), body.get("value"))
        elif route == "runs/log-batch":
            for param in _entries(body.get("params")):
                self.log_param(run_id, param.get("key"), param.get("value"))
            for tag in _entries(body.get("tags")):
                self.set_tag(run_id, tag.get("key"), tag.get("value"))
            self.log_metrics(run_id, list(_entries(body.get("metrics"))))
        elif route in ("runs/log-inputs", "runs/log-model", "runs/log-outputs"):
            self.run(run_id)  # accepted, not kept: Loom registers models from RESULT_DIR
        else:
            raise MlflowError(404, "ENDPOINT_NOT_FOUND", f"POST {PREFIX}{route} is not served here")
        return {}


def _entries(value: Any) -> list[dict[str, Any]]:
    """A list of `{key, value, …}` objects, as MLflow's API sends them."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise MlflowError(400, "INVALID_PARAMETER_VALUE", "expected a list of objects")
    return value


def _number(value: Any) -> float | None:
    """A metric's value: a number, or MLflow's spelling of one ("NaN", "Infinity")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | str):
        try:
            return float(value)
        except (ValueError, OverflowError):  # not a number, or an integer past a float's range
            return None
    return None


class Endpoint:
    """The HTTP server on 127.0.0.1 (a free port), in a daemon thread."""

    def __init__(self, tracking: Tracking) -> None:
        self.tracking = tracking
        self.token = secrets.token_urlsafe(32)
        handler = _handler(tracking, self.token)
        self.server = _BoundedServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        # Polled often: the learner's end waits for `shutdown`, which waits for a poll.
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """What the learner gets: where MLflow's client logs, and with which secret."""
        return {"MLFLOW_TRACKING_URI": self.url, "MLFLOW_TRACKING_TOKEN": self.token}

    def start(self) -> Endpoint:
        self.thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _BoundedServer(ThreadingHTTPServer):
    """At most MAX_CONNECTIONS connections served at once (each with its thread and up to
    MAX_BODY read); one more that finds no slot within a second is closed unanswered, so the
    job cannot make this process hold more than that."""

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._holding: set[int] = set()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(timeout=1.0):
            request.close()  # not `shutdown_request`: it holds no slot to give back
            return
        self._holding.add(id(request))
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        try:
            super().shutdown_request(request)
        finally:
            if id(request) in self._holding:
                self._holding.discard(id(request))
                self._slots.release()


def _handler(tracking: Tracking, token: str) -> type[BaseHTTPRequestHandler]:
    expected = f"Bearer {token}".encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30  # a connection that says nothing is closed

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PATCH(self) -> None:
            self._serve("POST")

        def _serve(self, method: str) -> None:
            given = (self.headers.get("Authorization") or "").encode()
            if not hmac.compare_digest(given, expected):
                self._answer(401, {"error_code": "UNAUTHENTICATED", "message": "bad token"})
                return
            url = urlparse(self.path)
            try:
                body = self._body()
                if not url.path.startswith(PREFIX):
                    raise MlflowError(404, "ENDPOINT_NOT_FOUND", f"{url.path} is not served here")
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                answer = tracking.handle(method, url.path[len(PREFIX) :], query, body)
            except MlflowError as exc:
                self._answer(exc.status, {"error_code": exc.code, "message": exc.message})
                return
            except (TypeError, ValueError, AttributeError, OverflowError) as exc:
                message = f"malformed request: {type(exc).__name__}: {str(exc)[:200]}"
                self._answer(400, {"error_code": "INVALID_PARAMETER_VALUE", "message": message})
                return
            self._answer(200, answer)

        def _body(self) -> dict[str, Any]:
            text = self.headers.get("Content-Length") or "0"
            if not text.isdigit() or int(text) > MAX_BODY:
                self.close_connection = True
                raise MlflowError(
                    400, "INVALID_PARAMETER_VALUE", f"bad Content-Length {text[:20]!r}"
                )
            length = int(text)
            raw = self.rfile.read(length) if length else b""
            if not raw:
                return {}
            try:
                found = json.loads(raw)
            except ValueError as exc:
                raise MlflowError(400, "MALFORMED_REQUEST", f"not JSON: {exc}") from exc
            if not isinstance(found, dict):
                raise MlflowError(400, "MALFORMED_REQUEST", "the body must be a JSON object")
            return found

        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # the learner's log is the user's output, not this server's

    return Handler
