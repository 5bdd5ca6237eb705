"""The same 2-process DDP training through Loom and through torchrun, in one run.

The digits example (`examples/digits-pytorch/train.py`, gloo on CPU) with 2 ranks: wall time
from submission (or from starting torchrun) to the end, and to both ranks running (each rank's
first line), median of N runs, alternating the two.

    python bench/ddp.py [--runs 3] [--epochs 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ingest import start_loom
from peers import table

from loom.client.archive import zip_folder

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "digits-pytorch"


def torchrun(epochs: int) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(prefix="torchrun-"))
    env = {**os.environ, "CHECKPOINT_DIR": str(work / "ckpt"), "RESULT_DIR": str(work / "out")}
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               str(EXAMPLE / "train.py"), "--epochs", str(epochs)]  # fmt: skip
    began = time.perf_counter()
    child = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert child.stdout is not None
    ranks: dict[str, float] = {}
    for line in child.stdout:
        for rank in ("0", "1"):
            if line.startswith(f"rank {rank}/") and rank not in ranks:
                ranks[rank] = time.perf_counter() - began
    code = child.wait()
    assert code == 0, f"torchrun exited with {code}"
    return max(ranks.values()), time.perf_counter() - began


def loom(client: object, home: Path, epochs: int) -> tuple[float, float]:
    from loom.client import LoomClient

    assert isinstance(client, LoomClient)
    manifest = (EXAMPLE / "manifest.yml").read_text().replace("--epochs 15", f"--epochs {epochs}")
    code = zip_folder(EXAMPLE)
    began = time.perf_counter()
    job_id = client.submit(manifest, code)
    ranks: dict[int, float] = {}
    for kind, data in client.follow(job_id):
        if kind == "line" and data["learner"] not in ranks:
            ranks[data["learner"]] = time.perf_counter() - began
    done = time.perf_counter() - began
    assert client.job(job_id)["state"] == "COMPLETED"
    return max(ranks.values()), done


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=40)
    args = parser.parse_args()
    server, client, home = start_loom()
    results: dict[str, list[tuple[float, float]]] = {"torchrun": [], "loom": []}
    try:
        loom(client, home, 2)  # warm-up: the platform's first job pays for its imports
        for _ in range(args.runs):
            results["torchrun"].append(torchrun(args.epochs))
            results["loom"].append(loom(client, home, args.epochs))
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=30)
    median = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
              for k, v in results.items()}  # fmt: skip
    rows = [
        ["torchrun --nproc_per_node=2", f"{median['torchrun'][0]:.2f}",
         f"{median['torchrun'][1]:.2f}", "1.000"],
        ["Loom, 2 learners (local launcher)", f"{median['loom'][0]:.2f}",
         f"{median['loom'][1]:.2f}", f"{median['loom'][1] / median['torchrun'][1]:.3f}"],
    ]  # fmt: skip
    header = ["system", "start→both ranks running (s)", "start→done (s)", "wall-time ratio"]
    title = f"2-rank DDP, digits CNN, {args.epochs} epochs (median of {args.runs})"
    print(table(title, header, rows))


if __name__ == "__main__":
    main()
