"""Kubeflow's objects translated to Loom's, as pure functions: a container's command in bash
with the image's paths mapped, mpirun's program, a Katib trial spec, an InferenceService's
pipeline; each refusal naming its field."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from loom.dialects.kubeflow.katib import katib_experiment
from loom.dialects.kubeflow.kserve import S3, inference_service
from loom.dialects.kubeflow.pods import Notes, Paths, bash_word, pod
from loom.dialects.kubeflow.training import strip_mpirun, training_job
from loom.domain.errors import ManifestError


def echoed(words: list[str], paths: Paths, env: dict[str, str]) -> list[str]:
    """What bash makes of the translated words: each argument on its own line."""
    line = " ".join(bash_word(w, paths, "x", Notes()) for w in words)
    out = subprocess.run(
        ["/bin/bash", "-c", f"printf '%s\\n' {line}"],
        env={**env, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.splitlines()


def test_words_keep_their_text_and_map_the_images_paths() -> None:
    """Quotes, spaces and `$` survive; Katib's folders and the code's files are mapped;
    Kubernetes' `$(VAR)` is the learner's variable."""
    paths = Paths(frozenset({"mnist.py"}))
    paths.mount("/katib", "${LOG_DIR}/katib")
    words = [
        "--log-path=/katib/mnist.log",
        "/opt/pytorch-mnist/mnist.py",
        "it's $HOME",
        "--rank=$(RANK)",
        "/usr/bin/python3",
        "${trialParameters.lr}",
    ]
    env = {"LOG_DIR": "/logs", "MODEL_DIR": "/code", "RANK": "3", "HOME": "/h"}
    assert echoed(words, paths, env) == [
        "--log-path=/logs/katib/mnist.log",
        "/code/mnist.py",
        "it's $HOME",
        "--rank=3",
        "/usr/bin/python3",
        "${trialParameters.lr}",
    ]


def test_a_pods_volumes_become_the_learners_folders() -> None:
    """An emptyDir is the learner's own folder, a claim the job's, a ConfigMap's keys files
    brought with the code; a hostPath is refused naming it."""
    template = {
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "command": ["python", "train.py", "--out=/out/a", "--cfg=/etc/cfg/c.yaml"],
                    "volumeMounts": [
                        {"name": "scratch", "mountPath": "/out"},
                        {"name": "cfg", "mountPath": "/etc/cfg"},
                    ],
                }
            ],
            "volumes": [
                {"name": "scratch", "emptyDir": {}},
                {"name": "cfg", "configMap": {"name": "settings"}},
            ],
        }
    }
    paths = Paths()
    found = pod(template, "t", paths, Notes(), config_maps=lambda n: {"c.yaml": "a: 1"})
    assert '"${LOG_DIR}/volumes/scratch/a"' in found.main.command
    assert '"${MODEL_DIR}/.configmaps/settings/c.yaml"' in found.main.command
    assert paths.files == {".configmaps/settings/c.yaml": "a: 1"}
    template["spec"]["volumes"][0] = {"name": "scratch", "hostPath": {"path": "/"}}
    with pytest.raises(ManifestError) as refused:
        pod(template, "t", Paths(), Notes())
    assert refused.value.field == "t.spec.volumes[0].hostPath"


def test_mpirun_gives_way_to_its_program() -> None:
    """mpirun's options (with their values) are dropped; a -np that disagrees with the workers'
    slots is refused."""
    words = ["mpirun", "-np", "2", "--allow-run-as-root", "-x", "PATH", "-mca", "pml", "ob1"]
    assert strip_mpirun([*words, "python", "t.py", "--lr", "1"], "w", 2) == [
        "python",
        "t.py",
        "--lr",
        "1",
    ]
    with pytest.raises(ManifestError, match="the Workers have 3 slots"):
        strip_mpirun([*words, "python", "t.py"], "w", 3)


def test_a_jobs_entrypoint_can_be_named_by_annotation() -> None:
    """An image's own entrypoint (no command) is refused, unless the object names it in its
    loom.dev/entrypoint annotation."""
    document: dict[str, Any] = {
        "kind": "PyTorchJob",
        "metadata": {"name": "p"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "template": {
                        "spec": {"containers": [{"name": "pytorch", "args": ["--epochs=1"]}]}
                    }
                }
            }
        },
    }
    with pytest.raises(ManifestError, match=r"loom\.dev/entrypoint"):
        training_job(document, "p", frozenset())
    document["metadata"]["annotations"] = {"loom.dev/entrypoint": "python3 /opt/mnist/mnist.py"}
    plan = training_job(document, "p", frozenset({"mnist.py"}))
    assert plan.manifest["framework"]["command"] == 'python3 "${MODEL_DIR}/mnist.py" --epochs=1'


KIND_AND_SPACE = "${trialParameters.kind}/${trialParameters.space}"


def test_a_katib_trial_spec_becomes_a_loom_manifest_with_katibs_paths_mapped() -> None:
    """The batch Job's command runs the code's script, its metrics file is the trial's own, the
    collector reads it there, and the known metadata references are values."""
    experiment = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": "e", "namespace": "team"},
        "spec": {
            "metricsCollectorSpec": {
                "source": {"fileSystemPath": {"path": "/katib/m.log", "kind": "File"}},
                "collector": {"kind": "File"},
            },
            "trialTemplate": {
                "primaryContainerName": "main",
                "trialParameters": [
                    {"name": "lr", "reference": "lr"},
                    {"name": "kind", "reference": "${trialSpec.Kind}"},
                    {"name": "space", "reference": "${trialSpec.Namespace}"},
                ],
                "trialSpec": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "main",
                                        "image": "python:3.11",
                                        "command": [
                                            "python3",
                                            "/app/t.py",
                                            "--lr=${trialParameters.lr}",
                                            "--log=/katib/m.log",
                                        ],
                                        "env": [
                                            {
                                                "name": "K",
                                                "value": KIND_AND_SPACE,
                                            }
                                        ],
                                    }
                                ]
                            }
                        }
                    },
                },
            },
        },
    }
    plan = katib_experiment(experiment, frozenset({"t.py"}))
    spec = plan.document["spec"]
    manifest = spec["trialTemplate"]["trialSpec"]
    assert manifest["framework"]["name"] == "python"
    command = manifest["framework"]["command"]
    assert command.startswith("export K=Job/team; python3")
    assert "'--lr=${trialParameters.lr}'" in command and '"${LOG_DIR}/katib/m.log"' in command
    assert spec["trialTemplate"]["trialParameters"] == [{"name": "lr", "reference": "lr"}]
    assert (
        spec["metricsCollectorSpec"]["source"]["fileSystemPath"]["path"] == "${LOG_DIR}/katib/m.log"
    )


def test_an_inference_service_is_a_pipeline_that_fetches_then_serves() -> None:
    """s3:// with its ServiceAccount's credentials becomes a storage job with an S3 store, then
    a deploy step with the service's autoscaling and batcher; loom:// deploys at once."""
    document = {
        "metadata": {"name": "digits"},
        "spec": {
            "predictor": {
                "minReplicas": 0,
                "maxReplicas": 3,
                "scaleTarget": 5,
                "serviceAccountName": "sa",
                "batcher": {"maxBatchSize": 16, "maxLatency": 20},
                "model": {"modelFormat": {"name": "onnx"}, "storageUri": "s3://models/digits"},
            }
        },
    }
    creds = {"sa": S3("http://127.0.0.1:9000", "key", "secret", "us-east-1")}
    plan = inference_service(document, creds.get, "init.py")
    fetch, serve = plan.pipeline["steps"]
    (store,) = fetch["manifest"]["data_stores"]
    assert store["training_data"] == {"container": "models/digits"}
    assert store["connection"]["auth_url"] == "http://127.0.0.1:9000"
    assert fetch["manifest"]["model_name"] == "digits"
    assert serve["model"] == "${{ steps.storage-initializer.outputs.model }}"
    assert (serve["min_replicas"], serve["max_replicas"]) == (0, 3)
    assert serve["scaling"] == {"target_concurrency": 5.0, "batch_size": 16, "batch_wait_ms": 20.0}
    document["spec"]["predictor"]["model"]["storageUri"] = "loom://digits@production"
    (only,) = inference_service(document, creds.get, "init.py").pipeline["steps"]
    assert only["model"] == "digits@production"
