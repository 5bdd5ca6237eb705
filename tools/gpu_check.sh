#!/usr/bin/env bash
# The GPU paths, proven on a machine with an NVIDIA GPU and a CUDA build of PyTorch (what a
# session lent a GPU machine runs; CI has none): a job pinned to its GPU running NCCL, a
# deployment's replicas pinned to the GPU, and `loom serve --device cuda`. Wheels the machine
# lacks may wait in .whl/ (and a bubblewrap binary as .whl/bwrap); results go to $OUT or ./out.
set -u
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
nvidia-smi -L
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl 2>&1 | tail -3
fi
if [ -f .whl/bwrap ] && ! command -v bwrap >/dev/null; then
  install -m 755 .whl/bwrap /usr/local/bin/bwrap
fi
# Loom from this checkout, for the platform and for the learners it spawns (a clean environment)
echo "$PWD/src" > "$(python3 -c 'import site; print(site.getsitepackages()[0])')/loom-src.pth"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1  # the tests import tests.*
python3 - <<'PY'
import torch, onnxruntime
from loom.sandbox.probe import probe
print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0))
print("onnxruntime", onnxruntime.__version__, onnxruntime.get_available_providers())
print("sandbox:", probe(60000))
PY
timeout 330 python3 -m pytest -q -s -p no:cacheprovider tests/serving/test_gpus.py \
  2>&1 | tee "$OUT/gpu-tests.log" | tail -60
python3 -c "from tests.serving.test_rest import digits_models; digits_models(__import__('pathlib').Path('/tmp/digits'))"
timeout 60 python3 tools/gpu_serving_timing.py /tmp/digits 2>&1 | tee "$OUT/gpu-timing.log"
