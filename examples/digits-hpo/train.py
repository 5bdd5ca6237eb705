"""The digits CNN with its width, learning rate and epochs as arguments: one trial of
`experiment.yml`'s search (and runnable without Loom).

Each epoch it prints Katib's `name=value` line (`epoch=3 accuracy=0.9511 loss=0.2034`), which
is how the experiment reads its objective, and logs the same through `loom.tracking`; the
trained model goes to $RESULT_DIR/model/ (TorchScript and ONNX with its signature), so every
trial registers a model version and the best one can be deployed.
"""

from __future__ import annotations

import argparse

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

from loom import tracking


def cnn(width: int) -> nn.Module:
    """Two convolutions of `width` and `2 × width` channels, then a small head."""
    return nn.Sequential(
        nn.Conv2d(1, width, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * width * 4 * 4, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


def data(seed: int) -> tuple[torch.Tensor, ...]:
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target, dtype=torch.long)
    split = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    return tuple(split)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--learning-rate", type=float, default=0.005)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    x_train, x_test, y_train, y_test = data(args.seed)
    model = cnn(args.width)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    tracking.log_params(learning_rate=args.learning_rate, width=args.width, epochs=args.epochs)
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(epoch))
        total = 0.0
        for i in range(0, len(order), args.batch_size):
            batch = order[i : i + args.batch_size]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x_train[batch]), y_train[batch])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        test_accuracy = accuracy(model, x_test, y_test)
        train_loss = total / len(order)
        print(f"epoch={epoch} accuracy={test_accuracy:.4f} loss={train_loss:.4f}", flush=True)
        tracking.log_metrics(step=epoch, group="train", loss=train_loss)
    tracking.save_model(model, x_test[:1], input_names=("image",), output_names=("logits",))
    print(f"test accuracy: {accuracy(model, x_test, y_test):.4f}")


if __name__ == "__main__":
    main()
