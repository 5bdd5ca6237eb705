"""Horovod-style data parallelism without Horovod: every rank computes gradients on its shard,
an all-reduce averages them, and every rank takes the same step, so the ranks' models stay equal.

It reads what horovodrun (or mpirun) would give a rank: HOROVOD_RANK / HOROVOD_SIZE (or Open
MPI's OMPI_COMM_WORLD_RANK / _SIZE) and a hostfile; it meets the others at MASTER_ADDR:MASTER_PORT.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from loom import tracking


def rank_and_size() -> tuple[int, int]:
    rank = os.environ.get("HOROVOD_RANK", os.environ.get("OMPI_COMM_WORLD_RANK", "0"))
    size = os.environ.get("HOROVOD_SIZE", os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    return int(rank), int(size)


def allreduce_mean(tensor: torch.Tensor, size: int) -> None:
    """What hvd.allreduce(average=True) does, in place."""
    if size > 1:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        tensor /= size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--learning-rate", type=float, default=0.5)
    args = parser.parse_args()
    rank, size = rank_and_size()
    hostfile = Path(os.environ.get("HOROVOD_HOSTFILE", "/dev/null"))
    hosts = hostfile.read_text().split() if size > 1 else []
    if size > 1:
        dist.init_process_group("gloo", rank=rank, world_size=size)
    print(f"rank {rank}/{size}, hostfile {hosts}", flush=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    digits = load_digits()
    x = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    y = torch.tensor(digits.target)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0)
    x_shard, y_shard = x_train[rank::size], y_train[rank::size]
    model = torch.nn.Linear(64, 10)
    for epoch in range(1, args.epochs + 1):
        model.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x_shard), y_shard)
        loss.backward()
        for parameter in model.parameters():
            assert parameter.grad is not None
            allreduce_mean(parameter.grad, size)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.sub_(args.learning_rate * parameter.grad)
        average = loss.detach().clone()
        allreduce_mean(average, size)
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
        if rank == 0:
            tracking.log_metrics(step=epoch, group="train", loss=float(average))
            tracking.log_metrics(step=epoch, group="test", accuracy=accuracy)
    weights = torch.cat([p.detach().flatten() for p in model.parameters()]).numpy().tobytes()
    print(f"rank {rank}: test accuracy {accuracy:.4f}", flush=True)
    print(f"rank {rank}: weights {hashlib.sha256(weights).hexdigest()[:16]}", flush=True)
    if size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
