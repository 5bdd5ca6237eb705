"""A small Keras CNN on scikit-learn's `load_digits`, written for Loom (and runnable without it).

It reads FfDL's environment: with TF_CONFIG naming several workers it trains with
tf.distribute.MultiWorkerMirroredStrategy, each worker on its shard of the data, gradients summed
over the workers at every step. Worker 0, the chief, reports the metrics and writes the trained
model to $RESULT_DIR/model/: a SavedModel, an ONNX graph and their signature.json (input
"image", float32 [-1, 8, 8], pixels scaled to 0..1; output "logits", float32 [-1, 10]).

The training loop is written out rather than left to `model.fit`: Keras 3's `fit` fails under
MultiWorkerMirroredStrategy with more than one worker (keras-team/keras#20585; as of Keras 3.15).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import keras
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from loom import tracking
from serving import export_image_model


def digits_cnn() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((8, 8), name="image"),
            keras.layers.Reshape((8, 8, 1)),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10, name="logits"),
        ]
    )


def data(seed: int) -> tuple[np.ndarray, ...]:
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=seed, stratify=y
    )
    return x_train, x_test, y_train, y_test


class Report(keras.callbacks.Callback):
    """A line per epoch on every worker; the metrics, from the chief only, to Loom."""

    def __init__(self, task: int, epochs: int, chief: bool) -> None:
        super().__init__()
        self.task, self.epochs, self.chief = task, epochs, chief

    def on_epoch_end(self, epoch: int, logs: dict[str, float] | None = None) -> None:
        logs = logs or {}
        loss, accuracy, test_accuracy = logs["loss"], logs["accuracy"], logs["test_accuracy"]
        print(
            f"worker {self.task} epoch {epoch}/{self.epochs} loss={loss:.4f} "
            f"accuracy={accuracy:.4f} test_accuracy={test_accuracy:.4f}",
            flush=True,
        )
        if self.chief:
            tracking.log_metrics(step=epoch, group="train", loss=loss, accuracy=accuracy)
            tracking.log_metrics(step=epoch, group="test", accuracy=test_accuracy)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=0.002)
    parser.add_argument("--batch-size", type=int, default=64, help="global, over all workers")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    config = json.loads(os.environ.get("TF_CONFIG") or "{}")
    workers = len(config.get("cluster", {}).get("worker", [])) or 1
    task = int(config.get("task", {}).get("index", 0))
    chief = task == 0  # FfDL's TF_CONFIG names no "chief" task: worker 0 is the chief
    # A learner has one core: one thread per op, and a second so that collectives never wait.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(2)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()  # without TF_CONFIG: one worker
    keras.utils.set_random_seed(args.seed)  # the same initial weights on every worker

    x_train, x_test, y_train, y_test = data(args.seed)
    steps = len(x_train) // args.batch_size  # the same on every worker, or they would hang

    def shard(context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch = context.get_per_replica_batch_size(args.batch_size)
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        ds = ds.shard(context.num_input_pipelines, context.input_pipeline_id)
        return ds.shuffle(len(x_train), seed=args.seed).repeat().batch(batch, drop_remainder=True)

    batches = iter(strategy.distribute_datasets_from_function(shard))
    print(
        f"worker {task}/{workers} ({strategy.num_replicas_in_sync} replicas in sync): "
        f"training on {len(x_train[task::workers])} images, "
        f"testing on {len(x_test)}",
        flush=True,
    )

    with strategy.scope():
        model = digits_cnn()
        optimizer = keras.optimizers.Adam(args.learning_rate)
    per_image_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            losses = per_image_loss(y, logits)
            loss = tf.nn.compute_average_loss(losses, global_batch_size=args.batch_size)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)  # sums the gradients over the workers
        right = tf.reduce_sum(tf.cast(tf.argmax(logits, 1) == y, tf.float32))
        return tf.stack([tf.reduce_sum(losses), right, tf.cast(tf.size(y), tf.float32)])

    @tf.function(autograph=False)
    def train_step(batches: tf.distribute.DistributedIterator) -> tf.Tensor:
        totals = strategy.run(step, args=next(batches))
        return strategy.reduce("SUM", totals, axis=None)  # loss, right, images: all workers

    @tf.function(autograph=False)
    def predict(x: tf.Tensor) -> tf.Tensor:  # local: every worker holds the same weights
        return model(x, training=False)

    @tf.function(autograph=False)
    def barrier() -> tf.Tensor:
        return strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)

    report = keras.callbacks.CallbackList([Report(task, args.epochs, chief)], model=model)
    began = time.perf_counter()
    test_accuracy = 0.0
    for epoch in range(1, args.epochs + 1):
        totals = np.zeros(3)
        for _ in range(steps):
            totals += train_step(batches).numpy()
        test_accuracy = float(np.mean(np.argmax(predict(x_test), 1) == y_test))
        logs = {
            "loss": totals[0] / totals[2],
            "accuracy": totals[1] / totals[2],
            "test_accuracy": test_accuracy,
        }
        report.on_epoch_end(epoch, logs)
    print(f"worker {task}: trained in {time.perf_counter() - began:.1f}s", flush=True)

    if chief:  # the chief alone saves: no collective op is involved
        target = tracking.save_keras_model(
            model, x_test[:1], input_names=("image",), output_names=("logits",)
        )
        # The SavedModel takes encoded images (TF Serving's {"b64": …}); model.onnx, tensors
        export_image_model(model, target / "saved_model")
        print(f"test accuracy: {test_accuracy:.4f}")
        print(f"model saved to {target}", flush=True)
    # Leave together: the others wait here for the chief to have saved; a second later (time
    # for the peer to fetch its last piece of the barrier) all exit, skipping TensorFlow's
    # teardown. Left to it, a worker whose peer (or, on the chief, coordination service) went
    # first waits ~10 s for its heartbeats, then logs it as crashed (tensorflow#58434).
    barrier()
    time.sleep(1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
