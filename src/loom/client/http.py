"""`LoomClient`: the platform's REST API as Python methods."""

from __future__ import annotations

import base64
import io
import json
import os
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from loom.client import contexts
from loom.client.accounts import AccountCalls
from loom.client.archive import zip_folder
from loom.client.errors import ClientError
from loom.client.experiments import ExperimentCalls
from loom.client.identity import VerifiedToken
from loom.client.job_lookup import JobLookupCalls
from loom.client.objects import ObjectCalls
from loom.client.pipelines import PipelineCalls
from loom.client.runs import RunCalls

__all__ = ["ClientError", "LoomClient"]


def _home() -> Path:
    return Path(os.environ.get("LOOM_HOME", "~/.loom")).expanduser()


LOG_PAGE = 10_000  # the most lines the API gives in one page


Progress = Callable[[int, int | None], None]  # (bytes so far, total bytes or None)


class _Counted(io.BytesIO):
    """Bytes that tell `progress` how far they have been read (httpx reads an upload in
    chunks)."""

    def __init__(self, data: bytes, progress: Progress) -> None:
        super().__init__(data)
        self._total, self._progress = len(data), progress

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        self._progress(self.tell(), self._total)
        return chunk


@dataclass(frozen=True)
class Endpoint:
    """Where a client reaches the platform and with what: a URL and token, the platform's
    public key when known (the token goes only where that key answers), and on the platform's
    own machine its unix socket (which nobody else can take)."""

    url: str
    token: str | None
    identity: str | None = None
    socket: str | None = None


def discover_endpoint(home: Path | None = None) -> Endpoint:
    """From the first that says: `LOOM_URL`/`LOOM_TOKEN` (or FfDL's `DLAAS_URL`/`DLAAS_PASSWORD`,
    the password a Loom token); the context named by `LOOM_CONTEXT`; the current context,
    unless `LOOM_HOME` is set; what the server wrote to its home (`server.json`, `token`)."""
    url = os.environ.get("LOOM_URL") or ffdl_url(os.environ.get("DLAAS_URL"))
    token = os.environ.get("LOOM_TOKEN") or os.environ.get("DLAAS_PASSWORD") or None
    implicit = home is None and "LOOM_HOME" not in os.environ
    context = contexts.active() if implicit or os.environ.get("LOOM_CONTEXT") else None
    if context is not None:
        same = not url or url.rstrip("/") == context.url.rstrip("/")
        return Endpoint(
            url or context.url, token or context.token, context.identity if same else None
        )
    home = home or _home()
    try:
        server = json.loads((home / "server.json").read_text())
    except (OSError, ValueError):
        server = {}
    if not isinstance(server, dict):
        server = {}
    written = str(server.get("url") or "")
    if not token:
        try:
            token = (home / "token").read_text().strip()
        except OSError:
            token = None
    same = bool(written) and (not url or url.rstrip("/") == written.rstrip("/"))
    identity = server.get("identity") if same else None
    socket_path = server.get("socket") if same and not url else None
    if socket_path is not None and not Path(str(socket_path)).exists():
        socket_path = None
    return Endpoint(
        url or written or "http://127.0.0.1:8470",
        token,
        str(identity) if identity else None,
        str(socket_path) if socket_path else None,
    )


def discover(home: Path | None = None) -> tuple[str, str | None]:
    """The URL and token `discover_endpoint` finds."""
    found = discover_endpoint(home)
    return found.url, found.token


def ffdl_url(url: str | None) -> str | None:
    """The platform's address from FfDL's `DLAAS_URL`, which may point at its FfDL API
    (`…/ffdl`, what FfDL's own CLI needs) or at the platform itself."""
    if not url:
        return None
    return url.rstrip("/").removesuffix("/ffdl") or None


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        body = response.json()
        message, code = body.get("error") or str(body), body.get("code")
        if isinstance(code, int):  # FfDL's shape: the status in `code`, Loom's own in `loom_code`
            message = body.get("description") or message
            code = body.get("loom_code")
    except ValueError:
        message, code = response.text or response.reason_phrase, None
    raise ClientError(f"{message} (HTTP {response.status_code})", response.status_code, code)


def tls_verify(ca_bundle: str | None = None, url: str = "https:") -> ssl.SSLContext | bool:
    """What HTTPS trusts: the CA bundle given, else `LOOM_CA_BUNDLE`, else the system's. For
    a platform at an `http://` URL, a context that trusts nothing: it is never used (every
    request goes to that URL), and loading the system's certificates took a command's start
    a tenth longer."""
    if url.startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies, and would refuse any server
    bundle = ca_bundle or os.environ.get("LOOM_CA_BUNDLE")
    if not bundle:
        return True
    try:
        return ssl.create_default_context(cafile=bundle)
    except (OSError, ssl.SSLError) as exc:
        why = getattr(exc, "strerror", None) or type(exc).__name__
        raise ClientError(f"CA bundle {bundle!r} (LOOM_CA_BUNDLE, --cacert): {why}") from exc


class LoomClient(
    AccountCalls, ExperimentCalls, ObjectCalls, PipelineCalls, JobLookupCalls, RunCalls
):
    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        timeout: float = 60.0,
        ca_bundle: str | None = None,
        identity: str | None = None,
        socket: str | None = None,
    ) -> None:
        """`identity`: the platform's public key, checked before the token is first sent;
        `socket`: the platform's unix socket on this machine, used instead of its URL's port."""
        self.url = url.rstrip("/")
        verify = tls_verify(ca_bundle, self.url)
        headers: dict[str, str] = {}
        auth: httpx.Auth | None = None
        if token and identity and not socket:
            auth = VerifiedToken(token, identity, self.url)
        elif token:
            headers["Authorization"] = f"Bearer {token}"
        transport = httpx.HTTPTransport(uds=socket, verify=verify) if socket else None
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            auth=auth,
            timeout=timeout,
            verify=verify,
            transport=transport,
        )

    @classmethod
    def from_env(cls, home: Path | None = None) -> LoomClient:
        found = discover_endpoint(home)
        return cls(found.url, found.token, identity=found.identity, socket=found.socket)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LoomClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ClientError(
                f"cannot reach Loom at {self.url} ({exc}): start it with `loom server`, or point"
                " LOOM_URL at where it runs"
            ) from exc
        _raise_for(response)
        return response

    # -- jobs ------------------------------------------------------------------------------
    def submit(
        self, manifest: str | bytes, code_zip: bytes, progress: Progress | None = None
    ) -> str:
        """Submit a job, its id back; `progress(sent, total)` is told as the code goes up."""
        return str(self.submit_job(manifest, code_zip, progress)["id"])

    def submit_job(
        self, manifest: str | bytes, code_zip: bytes, progress: Progress | None = None
    ) -> dict[str, Any]:
        """Submit a job: the whole answer, `id`, `location` and `warnings` (fields of the
        manifest that change nothing on this platform, each with why)."""
        code: Any = _Counted(code_zip, progress) if progress else code_zip
        files = {
            "manifest": ("manifest.yml", manifest, "application/yaml"),
            "model_definition": ("model.zip", code, "application/zip"),
        }
        result: dict[str, Any] = self._request("POST", "/v1/jobs", files=files).json()
        return result

    def jobs(
        self,
        state: list[str] | None = None,
        offset: int = 0,
        limit: int = 50,
        *,
        owner: str | None = None,
        everyone: bool = False,
        cursor: str | None = None,
        name: str | None = None,
    ) -> dict[str, Any]:
        """A page of your jobs, newest first; admins may ask for one `owner`'s or `everyone`'s;
        `name`: only jobs whose name holds it. The next page: pass the page's `next_cursor` as
        `cursor` (None on the last page)."""
        params: dict[str, Any] = {"offset": offset, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        if name:
            params["name"] = name
        if state:
            params["state"] = state
        if owner:
            params["owner"] = owner
        if everyone:
            params["all"] = "true"
        result: dict[str, Any] = self._request("GET", "/v1/jobs", params=params).json()
        return result

    def job(self, job_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/jobs/{job_id}").json()
        return result

    def halt(self, job_id: str) -> dict[str, Any]:
        body = {"action": "halt"}
        result: dict[str, Any] = self._request("PATCH", f"/v1/jobs/{job_id}", json=body).json()
        return result

    def resume(self, job_id: str) -> dict[str, Any]:
        body = {"action": "resume"}
        result: dict[str, Any] = self._request("PATCH", f"/v1/jobs/{job_id}", json=body).json()
        return result

    def capacity(self) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", "/v1/capacity").json()
        return result

    def set_quota(
        self,
        name: str,
        *,
        cpus: float | None,
        gpus: int | None,
        jobs: int | None,
        max_priority: int | None = None,
    ) -> dict[str, Any]:
        quota = {"cpus": cpus, "gpus": gpus, "jobs": jobs, "max_priority": max_priority}
        body = {"quota": quota}
        result: dict[str, Any] = self._request("PATCH", f"/v1/users/{name}", json=body).json()
        return result

    def delete(self, job_id: str) -> None:
        self._request("DELETE", f"/v1/jobs/{job_id}")

    def _save(
        self,
        path: str,
        target: Path,
        params: dict[str, str] | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Stream a download to `target`, without holding it in memory; `progress(received,
        total)` is told as it comes (total: None when the server does not say)."""
        with self._http.stream("GET", path, params=params or {}) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            length = response.headers.get("content-length")
            total = int(length) if length and length.isdigit() else None
            done = 0
            with target.open("wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
                    done += len(chunk)
                    if progress is not None:
                        progress(done, total)
        return target

    def download(
        self, job_id: str, what: str, target: Path, progress: Progress | None = None
    ) -> Path:
        """Save the job's `definition` or `results` zip to `target`."""
        return self._save(f"/v1/jobs/{job_id}/{what}", target, progress=progress)

    # -- logs ------------------------------------------------------------------------------
    def logs(
        self,
        job_id: str,
        *,
        pos: int = 0,
        pagesize: int = 100,
        since: str | None = None,
        learner: int | None = None,
        after: int | None = None,
    ) -> list[dict[str, Any]]:
        """A page of a job's lines: from `pos` (FfDL's), or after the line whose `id` is
        `after` (as fast deep into a long log as at its start)."""
        params: dict[str, Any] = {"pagesize": pagesize}
        if after is not None:
            params["after"] = after
        else:
            params["pos"] = pos
        if since is not None:
            params["since"] = since
        if learner is not None:
            params["learner"] = learner
        lines: list[dict[str, Any]] = self._request(
            "GET", f"/v1/jobs/{job_id}/logs", params=params
        ).json()["lines"]
        return lines

    def all_logs(
        self,
        job_id: str,
        *,
        since: str | None = None,
        learner: int | None = None,
        tail: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every line of a job (or its last `tail`), in order, a page of 10,000 at a time."""
        if tail is not None:
            yield from self._tail(job_id, tail, since, learner)
            return
        page = self.logs(job_id, pagesize=LOG_PAGE, since=since, learner=learner)
        while page:
            yield from page
            if len(page) < LOG_PAGE:
                return
            after = page[-1]["id"]
            page = self.logs(job_id, pagesize=LOG_PAGE, since=since, learner=learner, after=after)

    def _tail(
        self, job_id: str, count: int, since: str | None, learner: int | None
    ) -> Iterator[dict[str, Any]]:
        pages: list[list[dict[str, Any]]] = []
        while count > 0:  # backwards from the end, then printed in order
            size = min(count, LOG_PAGE)
            back = sum(len(p) for p in pages)
            page = self.logs(job_id, pos=-1 - back, pagesize=size, since=since, learner=learner)
            pages.insert(0, page)
            count -= size
            if len(page) < size:
                break
        for page in pages:
            yield from page

    def follow(
        self,
        job_id: str,
        *,
        learner: int | None = None,
        pos: int = 0,
        pagesize: int = 10_000,
        after: int | None = None,
        metrics: bool = False,
        states: bool = False,
        reconnect_s: float = 60.0,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """Server-sent events as (`line`|`metric`|`state`|`end`, data) until the job ends.

        With `metrics`, the stream carries metric points as well as log lines; with `states`,
        each change of the job's state and of its reason (`{"state", "message"}`). If the
        connection drops (a restart of the platform, say), it reconnects with `Last-Event-ID`
        for up to `reconnect_s` seconds, so nothing is missed or repeated. Lines start at
        `pos` (FfDL's; `pos=-1, pagesize=N`: the last N lines, then what comes), or after the
        line whose `id` is `after` (the stream's own cursor: nothing before it is sent).
        """
        params: dict[str, Any] = {"follow": "true"}
        if learner is not None:
            params["learner"] = learner
        if states:
            params["states"] = "true"
        if not metrics:
            params.update(pos=pos, pagesize=pagesize)
        path = f"/v1/jobs/{job_id}/{'metrics' if metrics else 'logs'}"
        last_id = f"{after}.0" if after is not None else None
        gave_up = time.monotonic() + reconnect_s
        while True:
            try:
                for event_id, kind, data in self._events(path, params, last_id):
                    last_id = event_id or last_id
                    gave_up = time.monotonic() + reconnect_s
                    yield kind, data
                    if kind == "end":
                        return
                return
            except (httpx.TransportError, ClientError) as exc:
                if isinstance(exc, ClientError) and 0 < exc.status < 500:
                    raise
                if time.monotonic() > gave_up:
                    raise ClientError(f"lost the stream of job {job_id}: {exc}") from exc
                time.sleep(0.5)

    def _events(
        self, path: str, params: dict[str, Any], last_id: str | None
    ) -> Iterator[tuple[str | None, str, dict[str, Any]]]:
        headers = {"Last-Event-ID": last_id} if last_id else {}
        timeout = httpx.Timeout(60.0, read=None)
        with self._http.stream(
            "GET", path, params=params, headers=headers, timeout=timeout
        ) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            event_id, kind, data = None, "message", ""
            for raw in response.iter_lines():
                if raw.startswith("id:"):
                    event_id = raw[3:].strip()
                elif raw.startswith("event:"):
                    kind = raw[6:].strip()
                elif raw.startswith("data:"):
                    data += raw[5:].strip()
                elif raw == "" and data:
                    yield event_id, kind, json.loads(data)
                    event_id, kind, data = None, "message", ""

    def _state_changes(self, job_id: str, read_s: float | None) -> Iterator[str]:
        params = {"follow": "true", "states": "true", "lines": "false"}  # the states alone
        timeout = httpx.Timeout(60.0, read=None if read_s is None else max(read_s, 0.01))
        path = f"/v1/jobs/{job_id}/logs"
        with self._http.stream("GET", path, params=params, timeout=timeout) as response:
            if not response.is_success:
                response.read()
                _raise_for(response)
            kind = "message"
            for raw in response.iter_lines():
                if raw.startswith("event:"):
                    kind = raw[6:].strip()
                elif raw.startswith("data:") and kind in ("state", "end"):
                    yield str(json.loads(raw[5:])["state"]) if kind == "state" else "end"
                elif raw == "":
                    kind = "message"

    def metrics(self, job_id: str, **params: Any) -> dict[str, Any]:
        """`GET /v1/jobs/{id}/metrics` with `form`, `group`, `name`, `learner`, `pos`, …"""
        query = {k: v for k, v in params.items() if v is not None}
        result: dict[str, Any] = self._request(
            "GET", f"/v1/jobs/{job_id}/metrics", params=query
        ).json()
        return result

    def log_metrics(self, job_id: str, points: list[dict[str, Any]]) -> int:
        """Add points to a job from outside it (each with a `seq`, idempotent)."""
        body = {"metrics": points}
        response = self._request("POST", f"/v1/jobs/{job_id}/metrics", json=body)
        return int(response.json()["accepted"])

    # -- models ----------------------------------------------------------------------------
    def models(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._request("GET", "/v1/models").json()["models"]
        return result

    def model(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/models/{name}").json()
        return result

    def model_version(self, name: str, ref: str = "latest") -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/models/{name}/versions/{ref}").json()
        return result

    def factsheet(self, name: str, ref: str = "latest", markdown: bool = False) -> Any:
        """The version's factsheet: a dict, or (`markdown`) a Markdown document."""
        params = {"format": "markdown" if markdown else "json"}
        response = self._request(
            "GET", f"/v1/models/{name}/versions/{ref}/factsheet", params=params
        )
        return response.text if markdown else response.json()

    def best_model(self, name: str, metric: str, mode: str = "max") -> dict[str, Any]:
        params = {"metric": metric, "mode": mode}
        result: dict[str, Any] = self._request(
            "GET", f"/v1/models/{name}/best", params=params
        ).json()
        return result

    def set_alias(self, name: str, alias: str, version: int | str) -> dict[str, Any]:
        body = {"version": version}
        result: dict[str, Any] = self._request(
            "PUT", f"/v1/models/{name}/aliases/{alias}", json=body
        ).json()
        return result

    def download_model(
        self,
        name: str,
        ref: str,
        target: Path,
        file: str | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Save a version's files as a zip, or one of its files (`file="model.onnx"`)."""
        params = {"file": file} if file else {}
        path = f"/v1/models/{name}/versions/{ref}/download"
        return self._save(path, target, params, progress)

    def delete_model(self, name: str, ref: str | None = None) -> None:
        path = f"/v1/models/{name}" + (f"/versions/{ref}" if ref else "")
        self._request("DELETE", path)

    def deploy(
        self, name: str, model: str, version: str | int = "latest", **options: Any
    ) -> dict[str, Any]:
        """Serve a version of a model; `options`: min_replicas, max_replicas,
        target_concurrency, scale_down_delay_s, batch_size, batch_wait_ms, gpus_per_replica,
        request_log, port, grpc_port, public (answer without a token), runtime, pip,
        explainer, transformer (a folder holding transformer.py, or its zip's bytes)."""
        transformer = options.pop("transformer", None)
        if transformer is not None:
            data = transformer if isinstance(transformer, bytes) else zip_folder(Path(transformer))
            options["transformer"] = base64.b64encode(data).decode()
        body = {"name": name, "model": model, "version": version, **options}
        result: dict[str, Any] = self._request("POST", "/v1/deployments", json=body).json()
        return result

    def create_graph(self, name: str, graph: dict[str, Any], **options: Any) -> dict[str, Any]:
        """An inference graph of your deployments (KServe's InferenceGraph spec, or the whole
        object); `options`: port, grpc_port, public. Shown and deleted as a deployment."""
        body = {"name": name, "graph": graph, **options}
        result: dict[str, Any] = self._request("POST", "/v1/graphs", json=body).json()
        return result

    def deployments(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = self._request("GET", "/v1/deployments").json()["deployments"]
        return found

    def deployment(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/deployments/{name}").json()
        return result

    def update_deployment(self, name: str, **changes: Any) -> dict[str, Any]:
        """New scaling or batching settings, or `version=` to roll out another version."""
        response = self._request("PATCH", f"/v1/deployments/{name}", json=changes)
        result: dict[str, Any] = response.json()
        return result

    def deployment_drift(
        self, name: str, limit: int = 100, since: float | None = None
    ) -> dict[str, Any]:
        """The deployment's last drift verdict and its windows, newest first."""
        params: dict[str, Any] = {"limit": limit}
        if since is not None:
            params["since"] = since
        response = self._request("GET", f"/v1/deployments/{name}/drift", params=params)
        result: dict[str, Any] = response.json()
        return result

    def deployment_payloads(
        self,
        name: str,
        *,
        version: int | None = None,
        limit: int = 100,
        outliers: bool = False,
        since: float | None = None,
    ) -> list[dict[str, Any]]:
        """Logged payloads (a sample), or the requests flagged as outliers, newest first."""
        params: dict[str, Any] = {"limit": limit, "outliers": outliers}
        if version is not None:
            params["version"] = version
        if since is not None:
            params["since"] = since
        response = self._request("GET", f"/v1/deployments/{name}/payloads", params=params)
        found: list[dict[str, Any]] = response.json()["outliers" if outliers else "payloads"]
        return found

    def delete_deployment(self, name: str) -> None:
        self._request("DELETE", f"/v1/deployments/{name}")

    def create_deployment_key(self, name: str, key_name: str = "key") -> dict[str, Any]:
        """A key for the deployment's endpoint; its value (`key`) is shown only now."""
        body = {"name": key_name}
        response = self._request("POST", f"/v1/deployments/{name}/keys", json=body)
        result: dict[str, Any] = response.json()
        return result

    def deployment_keys(self, name: str) -> list[dict[str, Any]]:
        response = self._request("GET", f"/v1/deployments/{name}/keys")
        found: list[dict[str, Any]] = response.json()["keys"]
        return found

    def revoke_deployment_key(self, name: str, key_id: str) -> None:
        self._request("DELETE", f"/v1/deployments/{name}/keys/{key_id}")

    def wait_deployment(
        self,
        name: str,
        *,
        timeout: float = 120.0,
        states: tuple[str, ...] = ("ready",),
        seen: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Poll until the deployment is in one of `states`, telling `seen` each look; ClientError
        if it is failing or the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.deployment(name)
            if seen is not None:
                seen(found)
            if found["state"] in states:
                return found
            if found["state"] == "failing" or time.monotonic() > deadline:
                why = found["message"] or f"still {found['state']} after {timeout:g} s"
                raise ClientError(f"deployment {name!r} is not ready: {why}")
            time.sleep(0.2)

    # -- users -----------------------------------------------------------------------------
    def add_user(self, name: str, *, admin: bool = False) -> dict[str, Any]:
        body = {"name": name, "admin": admin}
        result: dict[str, Any] = self._request("POST", "/v1/users", json=body).json()
        return result

    def users(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._request("GET", "/v1/users").json()["users"]
        return result

    # -- admin -----------------------------------------------------------------------------
    def rotate_secret_key(self) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", "/v1/admin/secret-key/rotate").json()
        return result

    def health(self) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", "/health").json()
        return result
