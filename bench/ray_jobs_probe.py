"""Runs inside the Ray peer's venv: times a trivial Ray job, submit → first log line → SUCCEEDED.

Prints one JSON line per run: {"first_line": s, "done": s}.
"""

from __future__ import annotations

import json
import sys
import time

from ray.job_submission import JobStatus, JobSubmissionClient


def main() -> None:
    address, runs = sys.argv[1], int(sys.argv[2])
    client = JobSubmissionClient(address)
    for _ in range(runs):
        began = time.perf_counter()
        job = client.submit_job(entrypoint='python -c "print(1)"')
        first = None
        while True:
            if first is None and client.get_job_logs(job).strip():
                first = time.perf_counter() - began
            status = client.get_job_status(job)
            if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
                break
            time.sleep(0.005)
        done = time.perf_counter() - began
        if first is None:
            first = done
        print(json.dumps({"first_line": first, "done": done, "status": str(status)}), flush=True)


if __name__ == "__main__":
    main()
