"""A small CNN on scikit-learn's `load_digits`, written for Loom (and runnable without it).

It reads FfDL's environment: checkpoints go to $CHECKPOINT_DIR (and a restarted job continues
from the last one), the trained model to $RESULT_DIR/model/. With WORLD_SIZE > 1 it trains with
DistributedDataParallel over gloo, each rank on its shard of the data.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from loom import tracking


class DigitsCNN(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(
            nn.Flatten(), nn.Linear(2 * width * 4 * 4, 128), nn.ReLU(), nn.Linear(128, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def data(seed: int, path: str | None = None) -> tuple[torch.Tensor, ...]:
    """The train/test split: scikit-learn's digits split by `seed`, or a prepared split (an
    .npz of x_train, x_test, y_train, y_test, as examples/workflow/prepare.py writes)."""
    if path:
        found = np.load(path)
        parts = (found[k] for k in ("x_train", "x_test", "y_train", "y_test"))
        x_train, x_test, y_train, y_test = (torch.from_numpy(p) for p in parts)
        return (
            x_train.float().unsqueeze(1),
            x_test.float().unsqueeze(1),
            y_train.long(),
            y_test.long(),
        )
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.long)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )
    return x_train, x_test, y_train, y_test


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def weights_digest(model: nn.Module) -> str:
    """A short digest of the model's weights, to compare the ranks' copies."""
    digest = hashlib.sha256()
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().numpy().tobytes())
    return digest.hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=32, help="channels of the first layer")
    parser.add_argument("--data", help="a prepared split (.npz) instead of splitting here")
    args = parser.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    x_train, x_test, y_train, y_test = data(args.seed, args.data)
    x_shard, y_shard = x_train[rank::world], y_train[rank::world]

    model: nn.Module = DigitsCNN(args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    checkpoints = Path(os.environ.get("CHECKPOINT_DIR", "checkpoints"))
    checkpoint = checkpoints / "digits.pt"
    start = 0
    if checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["epoch"]
        print(f"rank {rank}: resuming from checkpoint at epoch {start}", flush=True)
    net = nn.parallel.DistributedDataParallel(model) if world > 1 else model

    print(f"rank {rank}/{world}: training on {len(x_shard)} images, testing on {len(x_test)}")
    began = time.perf_counter()
    for epoch in range(start + 1, args.epochs + 1):
        net.train()
        order = torch.randperm(len(x_shard), generator=torch.Generator().manual_seed(epoch))
        total = 0.0
        for i in range(0, len(order), args.batch_size):
            batch = order[i : i + args.batch_size]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(net(x_shard[batch]), y_shard[batch])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        test_acc = accuracy(model, x_test, y_test)
        train_loss = total / len(order)
        print(
            f"rank {rank} epoch {epoch}/{args.epochs} loss={train_loss:.4f} "
            f"test_accuracy={test_acc:.4f}",
            flush=True,
        )
        if rank == 0:
            tracking.log_metrics(step=epoch, group="train", loss=train_loss)
            tracking.log_metrics(step=epoch, group="test", accuracy=test_acc)
        if rank == 0:
            checkpoints.mkdir(parents=True, exist_ok=True)
            state = {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "epoch": epoch,
            }
            torch.save(state, checkpoint)

    test_acc = accuracy(model, x_test, y_test)
    print(f"rank {rank}: trained in {time.perf_counter() - began:.1f}s")
    # Under DDP every rank ends with the same weights (gradients are averaged): the same digest.
    print(f"rank {rank}: weights digest {weights_digest(model)}", flush=True)
    if rank == 0:
        results = Path(os.environ.get("RESULT_DIR", "results")) / "model"
        results.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), results / "digits_cnn.pt")
        # TorchScript and ONNX with their signature: registered as a model version by Loom.
        tracking.save_model(model, x_test[:1], input_names=("image",), output_names=("logits",))
        # A sample of what it trained on, kept with the version: a deployment of it can then be
        # watched for drift (`loom deployments update NAME --monitor`).
        tracking.save_reference(x_train.numpy(), y_train.numpy(), max_rows=1000)
        print(f"test accuracy: {test_acc:.4f}")
        print(f"model saved to {results}")
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
