"""A deployment's drift and outlier detector, `python -m loom.serving.detector CONFIG`: a
process of its own, run by the gateway in an environment that holds Alibi Detect (never in
Loom's core install), confined like a replica.

It reads requests from stdin (a JSON header line `{"id", "version", "time", "n"}`, then `n`
bytes of the request's body: V1 `instances`/`inputs` or V2 `inputs`), all that queued in the
pipe at once (embedded and scored in one call per version: under load, hundreds of requests
cost about what one does), turns each into samples
shaped like the version's reference data (`reference.npz`, from `tracking.save_reference`), and
writes what it finds to stdout, one JSON object a line:

- `{"type": "outlier", ...}` for a request with a sample beyond the outlier threshold
  (Alibi Detect's Mahalanobis detector, fitted on half the reference and its threshold set on
  the other half at the configured false-positive rate);
- `{"type": "window", ...}` each time `window` samples of a version were seen: Alibi Detect's
  feature-wise Kolmogorov-Smirnov test (Bonferroni over features) against the reference; for
  images and other inputs of more than one axis, the test runs on a learned embedding (PCA
  fitted on the reference) rather than on raw pixels;
- `{"type": "loading"}` first (the process runs; Alibi Detect, which imports torch and
  transformers, takes seconds of CPU to import), `{"type": "ready"}` once the detectors are
  fitted, `{"type": "problem"}` for what it skips; `{"type": "problem", "fatal": true}` just
  before it exits when it cannot watch anything (no usable reference, or no Alibi Detect), so
  that the gateway says why rather than waiting for it.

The statistics are the library's; this module only shapes data and reports.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

EMBEDDING_DIMS = 16  # components kept when inputs are images (or any tensor of > 1 axis)
READ_BYTES = 4 * 2**20  # the most taken from the pipe at once
MAX_FRAME = 64 * 2**20  # a request body larger than any the gateway takes: a bad frame

Frame = tuple[dict[str, Any], bytes]  # a request's header and body


@dataclass
class Config:
    references: dict[str, str]  # version → path of its reference.npz
    drift: bool = True
    outliers: bool = True
    window: int = 500
    p_value: float = 0.05
    outlier_fpr: float = 0.001


@dataclass
class VersionDetector:
    """One version's reference and what Alibi Detect fitted on it, and its open window."""

    version: str
    reference: np.ndarray
    feature_names: list[str]
    drift: Any = None
    outlier: Any = None
    embed: Any = None  # samples → what the tests see (flattened and projected for images)
    kind: str = "features"
    window: list[np.ndarray] = field(default_factory=list)
    seen: int = 0
    since: float = 0.0
    outliers_in_window: int = 0


def load_reference(path: str) -> tuple[np.ndarray, list[str]]:
    """The reference samples and feature names; never unpickled (allow_pickle is off)."""
    with np.load(path, allow_pickle=False) as data:
        x = np.asarray(data["x"], dtype=np.float32)
        names = [str(n) for n in data["feature_names"]] if "feature_names" in data else []
    if x.ndim == 1:
        x = x[:, None]
    if not names and x.ndim == 2:
        names = [f"feature_{i}" for i in range(x.shape[1])]
    return x, names


def fit(version: str, reference: tuple[np.ndarray, list[str]], config: Config) -> VersionDetector:
    from alibi_detect.cd import KSDrift

    x, names = reference
    found = VersionDetector(version, x, names)
    flat = x.reshape(len(x), -1)
    if x.ndim > 2:  # an image: test a learned embedding, not thousands of pixels
        from sklearn.decomposition import PCA

        dims = min(EMBEDDING_DIMS, flat.shape[1], max(len(flat) - 1, 1))
        pca = PCA(n_components=dims, random_state=0).fit(flat)
        found.embed = lambda s: pca.transform(s.reshape(len(s), -1)).astype(np.float32)
        found.kind = f"embedding (PCA, {dims} components)"
        found.feature_names = [f"component_{i}" for i in range(dims)]
    else:
        found.embed = lambda s: s.reshape(len(s), -1)
    tested = found.embed(x)
    if config.drift:
        found.drift = KSDrift(tested, p_val=config.p_value, correction="bonferroni")
    if config.outliers and len(tested) >= 4:
        from alibi_detect.od._mahalanobis import Mahalanobis

        half = len(tested) // 2
        found.outlier = Mahalanobis(device="cpu")
        found.outlier.fit(tested[:half])
        held_out = tested[half:]  # the library needs fpr above 1/n of the samples it is set on
        fpr = max(config.outlier_fpr, 1.5 / len(held_out))
        found.outlier.infer_threshold(held_out, fpr=fpr)
    return found


def samples(body: bytes, like: np.ndarray) -> np.ndarray:
    """The request's samples, shaped as the reference's; ValueError if it has none such."""
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError("the request is not a JSON object")
    if "instances" in document:
        data: Any = document["instances"]
    elif isinstance(document.get("inputs"), list) and _v2(document["inputs"]):
        tensor = document["inputs"][0]
        data = np.asarray(tensor["data"], dtype=np.float32).reshape(tensor["shape"])
    elif "inputs" in document:
        data = document["inputs"]
    else:
        raise ValueError("no instances or inputs")
    array = np.asarray(data, dtype=np.float32)
    per_sample = int(np.prod(like.shape[1:]))
    if array.size == 0 or array.size % per_sample:
        raise ValueError(f"inputs of {array.size} values do not make samples of {like.shape[1:]}")
    return array.reshape(-1, *like.shape[1:])


def _v2(inputs: list[Any]) -> bool:
    return bool(inputs) and isinstance(inputs[0], dict) and "data" in inputs[0]


class Detector:
    def __init__(self, config: Config, out: IO[str]) -> None:
        self.config = config
        self.out = out
        self.versions: dict[str, VersionDetector] = {}
        self.problems: dict[str, int] = {}
        self.run = uuid.uuid4().hex[:8]  # window keys: unique across restarts
        self.windows = 0

    def say(self, **record: Any) -> None:
        self.out.write(json.dumps(record, separators=(",", ":")) + "\n")
        self.out.flush()

    def start(self) -> bool:
        """Fit each version's detectors; False (after saying why) when none can be watched.
        The references are read before Alibi Detect is imported: a bad one is told at once."""
        self.say(type="loading")
        references = {}
        for version, path in self.config.references.items():
            try:
                references[version] = load_reference(path)
            except (OSError, KeyError, ValueError, TypeError) as exc:
                self.say(type="problem", version=version, message=f"no reference: {exc}")
        if not references:
            return self.fatal("no version's reference data could be read")
        try:
            import alibi_detect  # noqa: F401  (seconds: torch, transformers, scipy, ...)
        except ImportError as exc:
            return self.fatal(f"Alibi Detect cannot be imported in its environment: {exc}")
        for version, reference in references.items():
            try:
                self.versions[version] = fit(version, reference, self.config)
            except (ValueError, TypeError) as exc:
                self.say(type="problem", version=version, message=f"not fitted: {exc}")
        if not self.versions:
            return self.fatal("no version's detectors could be fitted on its reference data")
        self.say(
            type="ready",
            versions={
                v: {"kind": d.kind, "features": d.feature_names, "reference": len(d.reference)}
                for v, d in self.versions.items()
            },
        )
        return True

    def fatal(self, message: str) -> bool:
        self.say(type="problem", fatal=True, message=message)
        return False

    def observe(self, frames: list[Frame]) -> None:
        """Requests taken from the pipe at once: each version's samples embedded and scored
        for outliers in one call (the library's cost is per call far more than per sample:
        under load a batch holds hundreds of requests), then taken into its window in order."""
        taken: dict[str, list[tuple[dict[str, Any], np.ndarray]]] = {}
        for header, body in frames:
            found = self.versions.get(str(header.get("version")))
            if found is None:
                continue
            try:
                taken.setdefault(found.version, []).append((header, samples(body, found.reference)))
            except (ValueError, TypeError, KeyError, IndexError) as exc:
                self.problem(str(exc))
        for version, items in taken.items():
            self.take(self.versions[version], items)

    def take(self, found: VersionDetector, items: list[tuple[dict[str, Any], np.ndarray]]) -> None:
        tested = found.embed(np.concatenate([x for _, x in items]))
        bounds = np.cumsum([len(x) for _, x in items])[:-1]
        parts = np.split(tested, bounds)
        flags = self.scored(found, tested, bounds) if found.outlier is not None else []
        for i, (header, _) in enumerate(items):
            outlying = flags[i] if flags else None
            if outlying is not None:
                self.flag(found, header, *outlying)
            if found.drift is not None:
                if not found.window:
                    found.since = float(header.get("time") or time.time())
                found.window.append(parts[i])
                found.seen += len(parts[i])
                if found.seen >= self.config.window:
                    self.close_window(found, float(header.get("time") or time.time()))

    def scored(
        self, found: VersionDetector, tested: np.ndarray, bounds: np.ndarray
    ) -> list[tuple[list[int], float, float] | None]:
        """Per request, its outlier samples, their highest score and the threshold; None for
        a request with none."""
        result = found.outlier.predict(tested)["data"]
        threshold = float(result["threshold"])
        flagged = np.split(np.asarray(result["is_outlier"]).astype(bool), bounds)
        scores = np.split(np.asarray(result["instance_score"], dtype=float), bounds)
        return [
            ([int(i) for i in np.flatnonzero(f)], float(s[f].max()), threshold) if f.any() else None
            for f, s in zip(flagged, scores, strict=True)
        ]

    def flag(
        self, found: VersionDetector, header: dict[str, Any], which: list[int], score: float,
        threshold: float,
    ) -> None:  # fmt: skip
        found.outliers_in_window += 1
        self.say(
            type="outlier",
            id=header.get("id"),
            version=found.version,
            time=header.get("time"),
            score=round(score, 6),
            threshold=round(threshold, 6),
            samples=which,
        )

    def close_window(self, found: VersionDetector, until: float) -> None:
        x = np.concatenate(found.window)
        result = found.drift.predict(x, return_p_val=True, return_distance=True)["data"]
        p_values = np.atleast_1d(np.asarray(result["p_val"], dtype=float))
        distances = np.atleast_1d(np.asarray(result["distance"], dtype=float))
        threshold = float(result["threshold"])
        drifted = [n for n, p in zip(found.feature_names, p_values, strict=False) if p < threshold]
        self.windows += 1
        self.say(
            type="window",
            key=f"{self.run}-{self.windows}",
            version=found.version,
            since=found.since,
            until=until,
            drift=bool(result["is_drift"]),
            p_value=float(p_values.min()),
            score=float(distances.max()),
            features=drifted,
            size=len(x),
            outliers=found.outliers_in_window,
            detail={
                "test": "Kolmogorov-Smirnov per feature (alibi-detect KSDrift), Bonferroni",
                "on": found.kind,
                "threshold": threshold,
                "p_values": dict(zip(found.feature_names, p_values.tolist(), strict=False)),
                "distances": dict(zip(found.feature_names, distances.tolist(), strict=False)),
            },
        )
        found.window, found.seen, found.outliers_in_window = [], 0, 0

    def problem(self, message: str) -> None:
        count = self.problems.get(message, 0) + 1
        self.problems[message] = count
        if count in (1, 100, 10_000):  # said, not once per request
            self.say(type="problem", message=message, count=count)


class Frames:
    """The gateway's frames from a pipe: each read takes every byte already there, so that
    the frames that queued while the last batch was judged are judged together."""

    def __init__(self, source: IO[bytes]) -> None:
        self.fd = source.fileno()
        self.buffer = bytearray()
        self.bad = 0  # frames of the last batch that could not be read (skipped to the next line)

    def batch(self) -> list[Frame] | None:
        """The complete frames there are, waiting for one (or for a bad one, so that it is told
        at once, not when the next good frame comes); None at the end of the input."""
        self.bad = 0
        while True:
            frames = self._complete()
            if frames or self.bad:
                return frames
            chunk = os.read(self.fd, READ_BYTES)
            if not chunk:
                return None
            self.buffer += chunk

    def _complete(self) -> list[Frame]:
        frames, at = [], 0
        while (end := self.buffer.find(b"\n", at)) >= 0:
            try:
                header = json.loads(self.buffer[at:end])
                size = int(header["n"])
                if not 0 <= size <= MAX_FRAME:
                    raise ValueError(size)
            except (ValueError, KeyError, TypeError):
                self.bad += 1
                at = end + 1
                continue
            if len(self.buffer) < end + 1 + size:
                break  # the rest of its body has not come yet
            frames.append((header, bytes(self.buffer[end + 1 : end + 1 + size])))
            at = end + 1 + size
        del self.buffer[:at]
        return frames


def serve(source: IO[bytes], detector: Detector) -> None:
    frames = Frames(source)
    while (batch := frames.batch()) is not None:
        if frames.bad:
            detector.problem("a frame the detector could not read")
        detector.observe(batch)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python -m loom.serving.detector CONFIG_JSON")
    config = Config(**json.loads(sys.argv[1]))
    detector = Detector(config, sys.stdout)
    if not detector.start():
        sys.exit(2)
    yield_cpu()
    serve(sys.stdin.buffer, detector)


def yield_cpu() -> None:
    """Once fitted, every thread of the detector runs on CPU time that serving leaves idle
    (SCHED_IDLE; it started at nice 10, so that importing and fitting finish on a busy
    machine): on a saturated core it lags, and the gateway sends it fewer requests, counted
    as missed, rather than slowing the replicas it watches."""
    for task in os.listdir("/proc/self/task"):
        try:
            os.sched_setscheduler(int(task), os.SCHED_IDLE, os.sched_param(0))
        except OSError:  # a thread that ended meanwhile; or a system without SCHED_IDLE
            continue


if __name__ == "__main__":
    main()
