"""A custom predictor (KServe's `kserve.Model` API) served by Loom, beside Loom's own ONNX
Runtime path and beside KServe's own model server running the same class, in one run.

The predictor is `examples/custom-predictor/predictor.py`: it does what Loom's ONNX runtime does
for the digits CNN (the model of examples/digits-pytorch, trained once and cached as
bench/serving.py caches it) — decode the V2 request, run ONNX Runtime with one thread, answer the
logits — through KServe's preprocess/predict/postprocess. Three servers, each one process on
core 0, take the same V2 REST load from `wrk` on core 1 (1-sample requests, real test images):

  - Loom, ONNX runtime: `python -m loom.serving` on the model folder (model.onnx);
  - Loom, custom predictor: `python -m loom.serving` on predictor.py + model.onnx, in the
    environment a deployment's replica gets (KServe's package, built once, cached);
  - KServe's ModelServer 0.21.0 (`python predictor.py`, its `__main__`), in its own venv
    (`.venvs/kserve`, made here with uv on first use), one worker.

Every answer is checked against ONNX Runtime's own logits before the load. The aims: the custom
predictor at ≥ 2× KServe's requests/s and ≥ 50% of Loom's ONNX path.

    python bench/custom_serving.py [--duration 5] [--concurrency 1,16,64] [--no-pin]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from peers import table

import serving as base  # bench/serving.py: the model, the requests, wrk

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "custom-predictor" / "predictor.py"
KSERVE_VENV = ROOT / ".venvs" / "kserve"
KSERVE = "kserve==0.21.0"
AIM_KSERVE, AIM_ONNX = 2.0, 0.5


def kserve_python() -> Path:
    """KServe's own server's venv: its package and ONNX Runtime, at the platform's version."""
    python = KSERVE_VENV / "bin" / "python"
    if not python.exists():
        print("making .venvs/kserve (once) ...", file=sys.stderr, flush=True)
        uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
        subprocess.run([uv, "venv", "-q", str(KSERVE_VENV), "--python", sys.executable],
                       check=True)  # fmt: skip
        import onnxruntime

        subprocess.run([uv, "pip", "install", "-q", "--python", str(python), KSERVE,
                        f"onnxruntime=={onnxruntime.__version__}"], check=True)  # fmt: skip
    return python


def replica_python() -> Path:
    """The environment Loom builds for a kserve.Model replica (the tests' cache)."""
    from tests.serving.environments import python_for

    return python_for("kserve")


def folders(work: Path, model: Path) -> tuple[Path, Path]:
    """The ONNX model alone, and the predictor beside it."""
    onnx, custom = work / "onnx", work / "custom"
    for folder in (onnx, custom):
        folder.mkdir()
        shutil.copy(model / "model.onnx", folder / "model.onnx")
    shutil.copy(model / "signature.json", onnx / "signature.json")
    shutil.copy(EXAMPLE, custom / "predictor.py")
    return onnx, custom


def servers(onnx: Path, custom: Path, pin: base.Pinning) -> list[tuple[str, Any]]:
    prefix = pin.prefix(pin.server)
    loom_replica = str(replica_python())
    kserve = str(kserve_python())

    def loom_onnx(port: int, _folder: Path) -> list[str]:
        return [*prefix, sys.executable, "-m", "loom.serving", str(onnx), "--name", base.NAME,
                "--port", str(port), "--grpc-port", "off"]  # fmt: skip

    def loom_custom(port: int, _folder: Path) -> list[str]:
        return [*prefix, loom_replica, "-m", "loom.serving", str(custom), "--name", base.NAME,
                "--port", str(port), "--grpc-port", "off"]  # fmt: skip

    def kserve_server(port: int, folder: Path) -> list[str]:
        shutil.copy(custom / "model.onnx", folder / "model.onnx")
        return [*prefix, "env", f"MODEL_NAME={base.NAME}", f"MODEL_DIR={folder}", kserve,
                str(EXAMPLE), "--http_port", str(port), "--grpc_port", str(base.free_port()),
                "--workers", "1"]  # fmt: skip

    return [
        ("Loom, ONNX runtime", base.process_server("Loom ONNX", False, "loom", loom_onnx)),
        ("Loom, custom predictor", base.process_server("Loom custom", False, "loom", loom_custom)),
        ("KServe ModelServer", base.process_server("KServe", False, "peer", kserve_server)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    levels = [int(c) for c in args.concurrency.split(",")]
    cores = os.cpu_count() or 1
    pin = base.Pinning(None, None) if args.no_pin or cores < 2 else base.Pinning("0", "1")
    wrk = base.ensure_wrk()
    model = base.digits_model()
    images = base.test_images()
    name = base.input_name(model, images)
    bodies = base.request_bodies(name, images, 1, 200)
    expected = base.session(model).run(None, {name: images[:1]})[0]
    work = Path(os.environ.get("TMPDIR", "/tmp")) / f"loom-bench-custom-{os.getpid()}"
    work.mkdir()
    try:
        onnx, custom = folders(work, model)
        script = base.lua_script(work, 1, bodies)
        results: dict[str, dict[int, base.Load]] = {}
        for label, server in servers(onnx, custom, pin):
            url = server.start()
            try:
                base.verify(base.first_infer(url, bodies[0], server.check, timeout=300), expected)
                base.run_wrk(wrk, pin, url, script, levels[-1], 1)  # warm up
                results[label] = {c: base.run_wrk(wrk, pin, url, script, c, args.duration)
                                  for c in levels}  # fmt: skip
            finally:
                server.stop()
        print(report(results, levels, args.duration, pin))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(
    results: dict[str, dict[int, base.Load]], levels: list[int], seconds: float, pin: base.Pinning
) -> str:
    rows = []
    for label, loads in results.items():
        for c in levels:
            load = loads[c]
            rows.append([label, str(c), f"{load.rps:,.0f}", f"{load.p50_ms:.2f}",
                         f"{load.p99_ms:.2f}", str(load.errors)])  # fmt: skip
    where = "servers on core 0, wrk on core 1" if pin.server else "unpinned"
    lines = [table(f"V2 REST, 1-sample requests, {seconds:g} s per level ({where})",
                   ["server", "conns", "req/s", "p50 ms", "p99 ms", "errors"], rows)]  # fmt: skip
    custom, onnx, kserve = (results[k] for k in ("Loom, custom predictor", "Loom, ONNX runtime",
                                                 "KServe ModelServer"))  # fmt: skip
    lines.append("")
    for c in levels:
        over_kserve = custom[c].rps / kserve[c].rps
        of_onnx = custom[c].rps / onnx[c].rps
        lines.append(
            f"{c:>3} conns: custom predictor = {over_kserve:.2f}x KServe "
            f"(aim >= {AIM_KSERVE:g}x: {'met' if over_kserve >= AIM_KSERVE else 'missed'}), "
            f"{of_onnx:.0%} of Loom's ONNX path "
            f"(aim >= {AIM_ONNX:.0%}: {'met' if of_onnx >= AIM_ONNX else 'missed'}); "
            f"p99 {custom[c].p99_ms:.2f} ms vs {kserve[c].p99_ms:.2f} / {onnx[c].p99_ms:.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
