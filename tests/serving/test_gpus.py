"""GPUs for serving: replicas pinned to GPUs, their models run there, and a clear error where
that cannot be. The tests marked `gpu` run where a GPU is (they were run on an H100/H200 lent
to a session); the others prove, on any machine, the pinning and the refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from loom.serving import devices
from loom.serving.confined import confine, gpu_env
from loom.serving.replicas import pin_gpus
from tests.conftest import Server, make_zip, manifest, register, wait_for_state
from tests.serving.test_deployments import wait_for
from tests.serving.test_rest import ModelServer, digits_models

FINAL = {"COMPLETED", "FAILED", "HALTED"}
HAS_GPU = devices.gpu_present()


def cuda_ready() -> bool:
    if not HAS_GPU:
        return False
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


needs_gpu = pytest.mark.skipif(not cuda_ready(), reason="no GPU (and CUDA PyTorch) here")
without_gpu = pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")


def test_replicas_spread_over_gpus_then_share_them() -> None:
    assert pin_gpus([0, 1, 2], [], 1) == [0]
    assert pin_gpus([0, 1, 2], [[0]], 1) == [1]
    assert pin_gpus([0, 1, 2], [[0], [1]], 1) == [2]
    assert pin_gpus([0, 1, 2], [[0], [1], [2]], 1) == [0]  # each has one: they share
    assert pin_gpus([0, 1, 2, 3], [[0, 1]], 2) == [2, 3]
    assert pin_gpus([2, 3], [[7]], 1) == [2]  # a GPU outside the list counts for nothing
    assert pin_gpus([0, 1], [[0]], 0) == []
    with pytest.raises(ValueError, match="wants 2 GPU"):
        pin_gpus([0], [], 2)


def test_a_replica_sees_only_its_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinned, it sees its own GPUs; a CPU replica sees none, whatever the platform sees."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    pinned = confine(None, tmp_path, "r", ["true"], tmp_path, [2])
    assert pinned.env["CUDA_VISIBLE_DEVICES"] == "2"
    cpu = confine(None, tmp_path, "r", ["true"], tmp_path, [])
    assert cpu.env["CUDA_VISIBLE_DEVICES"] == ""
    assert gpu_env([]) == {"CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void"}
    assert gpu_env([0, 3])["CUDA_VISIBLE_DEVICES"] == "0,3"


def test_hidden_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.hidden() and not devices.gpu_present()
    assert devices.onnx_providers("auto") == ["CPUExecutionProvider"]
    assert devices.torch_device("auto") == "cpu"
    with pytest.raises(devices.NoDevice, match="PyTorch here sees none"):
        devices.torch_device("cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert not devices.hidden()


@without_gpu
def test_a_model_told_to_run_on_a_gpu_it_lacks_says_why(tmp_path: Path) -> None:
    """No quiet fall back to the CPU: the server exits and says why."""
    digits_models(tmp_path / "model")
    assert devices.onnx_providers("cpu") == ["CPUExecutionProvider"]
    assert devices.onnx_providers("auto") == ["CPUExecutionProvider"]
    assert not devices.torchscript_first("auto")  # ONNX serves on the CPU, as before
    done = subprocess.run(
        [sys.executable, "-m", "loom.serving", str(tmp_path / "model"), "--device", "cuda",
         "--port", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "cannot serve 'model' on cuda: told to run on a GPU" in done.stderr
    assert "Traceback" not in done.stderr


@without_gpu
@pytest.mark.integration
def test_a_deployment_asking_for_gpus_the_platform_lacks(tmp_path: Path, model_zip: bytes) -> None:
    """Asked of a platform without GPUs: 400 naming the field. On a platform told it has two
    (LOOM_SERVING_GPUS), two replicas are pinned one to each, start with `--device cuda`, and,
    with no GPU really there, the deployment fails with the replica's reason."""
    bare = Server(tmp_path / "bare", LOOM_SERVING_GPUS="").start()
    try:
        with bare.client() as client:
            register(client, model_zip)
            response = httpx.post(
                f"{bare.url}/v1/deployments",
                json={"name": "g", "model": "digits", "gpus_per_replica": 1},
                headers={"Authorization": f"Bearer {bare.admin_token}"},
            )
            assert response.status_code == 400, response.text
            assert response.json()["field"] == "gpus_per_replica"
            assert "no GPU" in response.json()["error"]
            assert client.deployments() == []
    finally:
        bare.stop()
    told = Server(tmp_path / "told", LOOM_SERVING_GPUS="0,1").start()
    try:
        with told.client() as client:
            register(client, model_zip)
            client.deploy("g", "digits", min_replicas=2, gpus_per_replica=1)
            found = client.deployment("g")
            assert found["gpus_per_replica"] == 1
            spec = json.loads(next(told.home.glob("deployments/*/spec.json")).read_text())
            assert spec["gpu_ids"] == [0, 1] and spec["gpus_per_replica"] == 1
            failing = wait_for(client, "g", lambda d: d["state"] == "failing", timeout=90)
            assert "told to run on a GPU" in failing["message"]
            with pytest.raises(Exception, match="gpus_per_replica"):
                client.update_deployment("g", gpus_per_replica=3)
            client.delete_deployment("g")
    finally:
        told.stop()


def digits(count: int = 32) -> np.ndarray[Any, Any]:
    from sklearn.datasets import load_digits

    return (load_digits().images[:count] / 16.0).astype(np.float32)[:, None]


def v2(images: np.ndarray[Any, Any]) -> dict[str, Any]:
    return {
        "inputs": [
            {"name": "image", "shape": list(images.shape), "datatype": "FP32",
             "data": images.ravel().tolist()}
        ]
    }  # fmt: skip


def cpu_logits(folder: Path, images: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    import torch

    model = torch.jit.load(str(folder / "model.pt"), map_location="cpu")  # type: ignore[no-untyped-call]
    with torch.no_grad():
        result: np.ndarray[Any, Any] = model(torch.from_numpy(images)).numpy()
    return result


@needs_gpu
def test_loom_serve_runs_the_model_on_the_gpu(tmp_path: Path) -> None:
    """`loom serve --device cuda`: the model runs on the GPU (its first line names it) and
    answers as it does on the CPU."""
    folder = tmp_path / "model"
    digits_models(folder)
    images = digits()
    server = ModelServer(folder, "digits", "--device", "cuda")
    try:
        answer = httpx.post(f"{server.url}/v2/models/digits/infer", json=v2(images)).json()
    finally:
        server.stop()
    logits = np.array(answer["outputs"][0]["data"], dtype=np.float32).reshape(len(images), 10)
    np.testing.assert_allclose(logits, cpu_logits(folder, images), rtol=1e-3, atol=1e-3)


@needs_gpu
def test_a_torch_save_module_runs_on_the_gpu(tmp_path: Path) -> None:
    """A module saved whole with torch.save (its class in net.py beside it: a format that runs
    its author's code) runs on the GPU it is given and answers as on the CPU."""
    import torch

    from tests.serving.test_code_formats import NET

    folder = tmp_path / "module"
    folder.mkdir()
    (folder / "net.py").write_text(NET)
    sys.path.insert(0, str(folder))
    try:
        from net import Digits  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(folder))
    module = Digits().eval()
    torch.save(module, folder / "model.pt")
    sys.modules.pop("net", None)
    (folder / "signature.json").write_text(json.dumps({
        "inputs": [{"name": "image", "datatype": "float32", "shape": [-1, 8, 8]}],
        "outputs": [{"name": "logits", "datatype": "float32", "shape": [-1, 10]}]}))  # fmt: skip
    images = digits()[:, 0]
    body = {"inputs": [{"name": "image", "shape": list(images.shape), "datatype": "FP32",
                        "data": images.ravel().tolist()}]}  # fmt: skip
    server = ModelServer(folder, "module", "--device", "cuda")
    try:
        answer = httpx.post(f"{server.url}/v2/models/module/infer", json=body).json()
    finally:
        said = server.stop()
    logits = np.array(answer["outputs"][0]["data"], dtype=np.float32).reshape(len(images), 10)
    with torch.no_grad():
        want = module(torch.from_numpy(images)).numpy()
    np.testing.assert_allclose(logits, want, rtol=1e-3, atol=1e-3)
    assert "Traceback" not in said


@needs_gpu
def test_a_job_and_a_deployment_on_the_gpu(tmp_path: Path, model_zip: bytes) -> None:
    """A job of one GPU sees it (and only it) and runs NCCL on it; a deployment's two replicas
    are pinned to the machine's GPU, run the model there, and answer as the CPU does."""
    server = Server(tmp_path / "home", LOOM_REPLICA_MEMORY="16GiB").start()
    script = (
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('nccl')\n"
        "x = torch.ones(4, device='cuda') * (dist.get_rank() + 1)\n"
        "dist.all_reduce(x)\n"
        "print('visible', os.environ['CUDA_VISIBLE_DEVICES'], torch.cuda.device_count(),\n"
        "      torch.cuda.get_device_name(0), 'nccl', float(x.sum()), flush=True)\n"
        "dist.destroy_process_group()\n"
    )
    try:
        with server.client() as client:
            text = manifest("python g.py", gpus=1, memory="16GiB", cpus=2).replace(
                "name: python", "name: pytorch"
            )
            job_id = client.submit(text, make_zip({"g.py": script}))
            job = wait_for_state(client, job_id, FINAL, timeout=300)
            lines = [x["line"] for x in client.logs(job_id)]
            if job["state"] != "COMPLETED":
                print(server.log.read_text()[-6000:])
            why = (job["status_message"], job.get("learner_status"), lines[-20:])
            assert job["state"] == "COMPLETED", why
            [seen] = [line for line in lines if line.startswith("visible")]
            print(seen)
            assert seen.startswith("visible 0 1 NVIDIA") and seen.endswith("nccl 4.0")

            register(client, model_zip)
            client.deploy("gpu", "digits", min_replicas=2, gpus_per_replica=1)
            found = wait_for(client, "gpu", lambda d: d["replicas"]["ready"] == 2, timeout=300)
            assert [r["gpus"] for r in found["replica_list"]] == [[0], [0]]
            images = digits()
            answer = httpx.post(
                found["urls"]["v2_infer"],
                json=v2(images),
                headers={"Authorization": f"Bearer {server.admin_token}"},
            ).json()
            logs = "".join(p.read_text() for p in server.home.glob("deployments/*/replica-*.log"))
            print(logs)
            assert "on cuda:0 (NVIDIA" in logs
            folder = tmp_path / "m"
            client.download_model("digits", "latest", tmp_path / "m.zip")
            import zipfile

            zipfile.ZipFile(tmp_path / "m.zip").extractall(folder)
            model = next(folder.rglob("model.pt")).parent
            logits = np.array(answer["outputs"][0]["data"], dtype=np.float32).reshape(-1, 10)
            np.testing.assert_allclose(logits, cpu_logits(model, images), rtol=1e-3, atol=1e-3)
            apps = subprocess.run(
                ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"],
                capture_output=True, text=True, check=False,
            ).stdout  # fmt: skip
            print(apps)
            client.delete_deployment("gpu")
    finally:
        server.stop()
