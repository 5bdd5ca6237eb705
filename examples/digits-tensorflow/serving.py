"""The digits CNN exported for serving as TF Serving's users expect it: a SavedModel whose
`serving_default` signature takes encoded images (JPEG or PNG bytes, a batch of strings), so
that a client sends `{"instances": [{"b64": "<base64 of the image>"}]}` and gets each image's
`class` (the digit) and `probabilities`.

The serving function decodes each image to one grey channel, resizes it to 8×8 and scales it
as training did (0..1), then runs the model: what the client would otherwise have to do itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tensorflow as tf

SIDE = 8


def decode(encoded: tf.Tensor) -> tf.Tensor:
    """One encoded image (JPEG, PNG, …) as an 8×8 float image in 0..1."""
    image = tf.io.decode_image(encoded, channels=1, expand_animations=False)
    image = tf.image.resize(tf.cast(image, tf.float32) / 255.0, (SIDE, SIDE))
    return tf.reshape(image, (SIDE, SIDE))


def export_image_model(model: Any, folder: Path) -> Path:
    """Write `folder` (a SavedModel): `serving_default` takes `image_bytes` (string [-1]) and
    answers `class` (int64 [-1]) and `probabilities` (float32 [-1, 10])."""

    class Served(tf.Module):
        def __init__(self, model: Any) -> None:
            super().__init__()
            self.model = model

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image_bytes")])
        def serve(self, image_bytes: tf.Tensor) -> dict[str, tf.Tensor]:
            images = tf.map_fn(decode, image_bytes, fn_output_signature=tf.float32)
            probabilities = tf.nn.softmax(self.model(images, training=False))
            return {"class": tf.argmax(probabilities, axis=1), "probabilities": probabilities}

    served = Served(model)
    tf.saved_model.save(served, str(folder), signatures={"serving_default": served.serve})
    return folder
