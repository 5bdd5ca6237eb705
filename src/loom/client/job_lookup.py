"""Jobs found by what people call them, waited for, and read in FfDL's shapes: calls of
`LoomClient`.

A job is known by its id, but people remember its name: `find_job` takes either, and when
neither matches it names the nearest ones. `wait` blocks until a job has ended (or reached a
state asked for) and returns its record: it listens to the state changes the platform pushes on
the job's event stream, so it returns as soon as the change is stored and asks nothing meanwhile.
`ffdl_loglines` and `ffdl_emetrics` read a job's training data through FfDL's API (its `rindex`
numbering and `v1MetaInfo`), for FfDL's CLI verbs.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Collection, Iterator
from typing import Any

import httpx

from loom.client.errors import ClientError

# The states a job ends in (the domain's TERMINAL_STATES, as the API spells them).
FINAL_STATES = frozenset({"COMPLETED", "FAILED", "HALTED"})
HINTS_FROM = 500  # the newest jobs searched for names like the one asked for
FFDL = "/ffdl/v1"


class JobLookupCalls:
    """Mixed into `LoomClient`, which supplies `_request`."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def _state_changes(self, job_id: str, read_s: float | None) -> Iterator[str]:
        """The job's states as its event stream tells them, then `end`; `read_s`: the longest
        silence allowed (httpx.ReadTimeout after it)."""
        raise NotImplementedError

    def _job(self, job_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self._request("GET", f"/v1/jobs/{job_id}").json()
        return found

    def _listed(self, name: str | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": HINTS_FROM, **({"name": name} if name else {})}
        found: list[dict[str, Any]] = self._request("GET", "/v1/jobs", params=params).json()["jobs"]
        return found

    def find_job(self, ref: str) -> dict[str, Any]:
        """The job whose id or name is `ref`; a name several jobs share is refused with their
        ids, and one no job has is answered with the nearest names and ids."""
        try:
            return self._job(ref)
        except ClientError as exc:
            if exc.status != 404:
                raise
        named = [j for j in self._listed(ref) if j["name"] == ref]
        if len(named) == 1:
            return self._job(named[0]["id"])
        if named:
            ids = ", ".join(f"{j['id']} ({j['state']})" for j in named[:10])
            raise ClientError(f"{len(named)} jobs are named {ref!r}: {ids}; give an id", 409)
        raise ClientError(self._no_such_job(ref), 404)

    def _no_such_job(self, ref: str) -> str:
        recent = self._listed()
        known = {j["id"]: j["id"] for j in recent} | {j["name"]: j["id"] for j in recent}
        close = difflib.get_close_matches(ref, list(known), n=3, cutoff=0.5)
        if not close:
            return f"no job {ref!r} (neither an id nor a name of yours); `loom list` shows them"
        hints = ", ".join(
            name if name == known[name] else f"{name} ({known[name]})" for name in close
        )
        return f"no job {ref!r}; did you mean {hints}?"

    def wait(
        self,
        job: str | dict[str, Any],
        *,
        timeout: float | None = None,
        poll_s: float = 1.0,
        states: Collection[str] = FINAL_STATES,
    ) -> dict[str, Any]:
        """Block until the job (an id, a name, or a job record) has ended, or is in one of
        `states`; its record then (`state`, with `error_code` and `status_message` once it has
        ended). A job that ends in a state not asked for returns too: it will not change again
        by itself. ClientError if `timeout` seconds pass first.

        It listens to the job's state changes on its event stream (reading the job at each);
        while the stream cannot be had (the platform restarting, say) it asks every `poll_s`."""
        job_id = job["id"] if isinstance(job, dict) else self.find_job(job)["id"]
        wanted = frozenset(states) | FINAL_STATES
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            found = self._job(job_id)
            if found["state"] in wanted:
                return found
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ClientError(f"job {job_id} is still {found['state']} after {timeout:g} s")
            try:
                for state in self._state_changes(job_id, left):
                    if state in wanted or state == "end":
                        break
            except httpx.TimeoutException:
                continue  # the deadline, or a silent stream: look again
            except (httpx.TransportError, ClientError) as exc:
                if isinstance(exc, ClientError) and 0 < exc.status < 500:
                    raise
                time.sleep(poll_s if left is None else max(0.0, min(poll_s, left)))

    def ffdl_loglines(
        self, job_id: str, *, pos: int = 0, pagesize: int = 10, since: str | None = None
    ) -> list[dict[str, Any]]:
        """FfDL's `v1LogLine` records of a job (`getLoglines`)."""
        params = _ffdl_page(pos, pagesize, since)
        found: list[dict[str, Any]] = self._request(
            "GET", f"{FFDL}/logs/{job_id}/loglines", params=params
        ).json()["models"]
        return found

    def ffdl_emetrics(
        self, job_id: str, *, pos: int = 0, pagesize: int = 10, since: str | None = None
    ) -> list[dict[str, Any]]:
        """FfDL's `v1EMetrics` records of a job (`getEMetrics`)."""
        params = _ffdl_page(pos, pagesize, since)
        found: list[dict[str, Any]] = self._request(
            "GET", f"{FFDL}/logs/{job_id}/emetrics", params=params
        ).json()["models"]
        return found


def _ffdl_page(pos: int, pagesize: int, since: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"pos": pos, "pagesize": pagesize}
    if since:
        params["since_time"] = since
    return params
