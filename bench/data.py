"""Training data download: 200 MB in 2,000 files from an S3-protocol server into DATA_DIR
through Loom (the learner's wrapper, s3fs), beside `aws s3 sync`-style copying with boto3
(10 concurrent transfers, as the AWS CLI does by default), in the same run on this machine.

    python bench/data.py [--files 2000] [--size-kb 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import start_loom
from peers import table

from loom.client.archive import zip_folder


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    moto = Path(sys.executable).parent / "moto_server"
    server = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return server, f"http://127.0.0.1:{port}"


def s3_client(endpoint: str):  # type: ignore[no-untyped-def]
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="bench", aws_secret_access_key="bench")  # fmt: skip


def fill(endpoint: str, bucket: str, files: int, size: int) -> int:
    client = s3_client(endpoint)
    client.create_bucket(Bucket=bucket)
    body = os.urandom(size)

    def put(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"shard-{i // 100:03d}/sample-{i:05d}.bin", Body=body)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, range(files)))
    return files * size


def boto3_sync(endpoint: str, bucket: str, target: Path) -> float:
    """`aws s3 sync`-style: list, then 10 concurrent downloads."""
    client = s3_client(endpoint)
    began = time.perf_counter()
    keys = [
        obj["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for obj in page.get("Contents", [])
    ]

    def get(key: str) -> None:
        local = target / key
        local.parent.mkdir(parents=True, exist_ok=True)
        client.download_file(bucket, key, str(local))

    with ThreadPoolExecutor(10) as pool:
        list(pool.map(get, keys))
    return time.perf_counter() - began


def loom_download(endpoint: str, bucket: str) -> float:
    """Seconds the job spent DOWNLOADING, from its recorded history."""
    server, client, home = start_loom()
    try:
        code = home / "code"
        code.mkdir()
        (code / "README").write_text("reads its data\n")
        manifest = (
            "name: data-bench\ncpus: 1\nmemory: 1GiB\n"
            "framework: {name: python, command: 'du -sh $DATA_DIR'}\n"
            "data_stores:\n  - id: bench\n    type: s3_datastore\n"
            f"    training_data: {{container: {bucket}}}\n"
            f"    connection: {{auth_url: '{endpoint}', user_name: bench, password: bench}}\n"
        )
        job_id = client.submit(manifest, zip_folder(code))
        while (job := client.job(job_id))["state"] not in ("COMPLETED", "FAILED", "HALTED"):
            time.sleep(0.1)
        assert job["state"] == "COMPLETED", job
        at = {e["state"]: datetime.fromisoformat(e["at"]).timestamp() for e in job["history"]}
        return at["PROCESSING"] - at["DOWNLOADING"]
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--size-kb", type=int, default=100)
    args = parser.parse_args()
    moto, endpoint = start_moto()
    try:
        total = fill(endpoint, "dataset", args.files, args.size_kb * 1000)
        target = Path(tempfile.mkdtemp(prefix="sync-"))
        seconds = {"boto3 (aws s3 sync style)": boto3_sync(endpoint, "dataset", target)}
        shutil.rmtree(target, ignore_errors=True)
        seconds["Loom, s3_datastore → DATA_DIR"] = loom_download(endpoint, "dataset")
    finally:
        moto.terminate()
        moto.wait(timeout=30)
    rows = [
        [name, f"{args.files:,}", f"{total / 1e6:.0f}", f"{s:.2f}", f"{total / 1e6 / s:.1f}"]
        for name, s in seconds.items()
    ]
    header = ["system", "files", "MB", "seconds", "MB/s"]
    print(table("download of a dataset from an S3-protocol server (moto)", header, rows))


if __name__ == "__main__":
    main()
