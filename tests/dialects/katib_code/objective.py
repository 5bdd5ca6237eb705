"""A trial's stand-in for training: a loss from its hyperparameters, reported the ways Katib's
collectors read (stdout, a TEXT or JSON file, TensorBoard events, a Prometheus endpoint)."""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.03)
parser.add_argument("--momentum", type=float, default=0.6)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--log-path")
parser.add_argument("--logger", default="text")
parser.add_argument("--tf-dir")
parser.add_argument("--checkpoint")
parser.add_argument("--prometheus-port", type=int)
args, _ = parser.parse_known_args()

loss = (args.lr - 0.03) ** 2 + (args.momentum - 0.6) ** 2 + 0.01
accuracy = 1.0 - loss
print("ENV " + json.dumps({k: v for k, v in os.environ.items() if k.startswith("TRIAL_")}))

if args.checkpoint:  # PBT: what the parent left, then this trial's own
    state = Path(args.checkpoint) / "state.json"
    if state.exists():
        print("RESUMED " + state.read_text())
    state.parent.mkdir(parents=True, exist_ok=True)
    state.write_text(json.dumps({"lr": args.lr, "trial": os.environ.get("TRAINING_ID")}))

writer = None
if args.tf_dir:
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(args.tf_dir)

for epoch in range(1, args.epochs + 1):
    value = loss / epoch
    print(f"epoch={epoch} loss={value:.6f} accuracy={1 - value:.6f}")
    if args.log_path:
        Path(args.log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(args.log_path, "a") as log:
            if args.logger == "hypertune":
                record = {"accuracy": str(1 - value), "loss": str(value), "epoch": epoch}
                log.write(json.dumps(record) + "\n")
            else:
                log.write(f"epoch={epoch} accuracy={1 - value:.6f} loss={value:.6f}\n")
    if writer is not None:
        writer.add_scalar("accuracy", 1 - value, epoch)
        writer.add_scalar("loss", value, epoch)
if writer is not None:
    writer.close()

if args.prometheus_port:

    class Metrics(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"# TYPE accuracy gauge\naccuracy {accuracy}\nloss {loss}\n".encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    server = HTTPServer(("127.0.0.1", args.prometheus_port), Metrics)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    time.sleep(2)  # scraped meanwhile (every half second)
    server.shutdown()
