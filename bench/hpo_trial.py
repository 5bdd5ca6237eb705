"""One trial of the HPO benchmark: a few epochs of CPU work, Katib's `name=value` lines."""

from __future__ import annotations

import argparse
import math
import time


def work(seconds: float) -> None:
    """Keep a core busy, as training would."""
    end = time.perf_counter() + seconds
    x = 0.0
    while time.perf_counter() < end:
        for i in range(1000):
            x += math.sqrt(i)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--width", type=int, required=True)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--epoch-s", type=float, default=0.15)
    args = parser.parse_args()
    ceiling = 0.99 - (math.log10(args.lr) + 2) ** 2 * 0.1 - abs(args.width - 16) / 100
    for epoch in range(1, args.epochs + 1):
        work(args.epoch_s)
        print(f"epoch={epoch} accuracy={ceiling * (1 - 0.5**epoch):.5f}", flush=True)


if __name__ == "__main__":
    main()
