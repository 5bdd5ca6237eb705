"""`loom apply`'s generic machinery on a real platform: documents in, objects stored, read back
and deleted; a refused document names itself and its field and leaves nothing applied."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from loom.client import ClientError, LoomClient

pytestmark = pytest.mark.integration

CONFIG = """
apiVersion: v1
kind: ConfigMap
metadata: {name: templates, namespace: kubeflow}
data: {a.yaml: "hello"}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {AWS_ACCESS_KEY_ID: key-id, AWS_SECRET_ACCESS_KEY: s3cr3t}
"""


def test_objects_are_applied_unchanged_then_configured_and_deleted(tenant: LoomClient) -> None:
    """A ConfigMap and a Secret are created, applied again unchanged, changed, read back (the
    secret's values never), listed, and deleted from their file."""
    first = tenant.apply(CONFIG)
    assert [(o["kind"], o["action"]) for o in first] == [
        ("ConfigMap", "created"),
        ("Secret", "created"),
    ]
    assert first[0]["notes"][0]["field"] == "metadata.namespace"
    assert [o["action"] for o in tenant.apply(CONFIG)] == ["unchanged", "unchanged"]
    changed = tenant.apply(CONFIG.replace("hello", "bye"))
    assert [o["action"] for o in changed] == ["configured", "unchanged"]
    shown = tenant.object("cm", "templates")
    assert shown["data"] == {"a.yaml": "bye"} and shown["metadata"]["generation"] == 2
    secret = tenant.object("secrets", "creds")
    assert "s3cr3t" not in str(secret) and secret["stringData"]["AWS_SECRET_ACCESS_KEY"] == "***"
    assert [o["metadata"]["name"] for o in tenant.objects("configmap")] == ["templates"]
    assert {k["kind"] for k in tenant.kinds()} >= {"ConfigMap", "Secret", "ServiceAccount"}
    gone = tenant.delete_documents(CONFIG)
    assert [o["action"] for o in gone] == ["deleted", "deleted"]
    assert tenant.objects("configmaps") == []


def test_a_refused_document_names_itself_and_applies_nothing(tenant: LoomClient) -> None:
    """The second document's bad name is refused with the document and field named; the first,
    valid one, is not applied either; an unknown kind and version are refused by name."""
    bad = CONFIG.replace("name: creds", "name: Not_A_Name")
    with pytest.raises(ClientError) as refused:
        tenant.apply(bad)
    assert refused.value.status == 400
    assert "document 2 (Secret Not_A_Name)" in refused.value.message
    assert "metadata.name" in refused.value.message
    assert tenant.objects("configmaps") == []
    with pytest.raises(ClientError, match="kind 'Frobnicator'"):
        tenant.apply("apiVersion: v1\nkind: Frobnicator\nmetadata: {name: x}\n")
    with pytest.raises(ClientError, match="served at apiVersion v1, not 'v2'"):
        tenant.apply("apiVersion: v2\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(ClientError, match="no kind 'gizmos'"):
        tenant.objects("gizmos")


def test_the_cli_applies_gets_and_deletes_like_kubectl(
    tenant: LoomClient, shared_server: Any, tmp_path: Path
) -> None:
    """`loom apply -f FILE CODE` says what each object became and what was noted, `loom get`
    lists and shows them (`-o json`), `loom delete -f FILE` deletes them."""
    objects = tmp_path / "objects.yaml"
    objects.write_text(CONFIG + JOB)
    code = tmp_path / "code"
    code.mkdir()
    (code / "hello.py").write_text("print('hello')\n")
    token = tenant._http.headers["Authorization"].removeprefix("Bearer ")

    def loom(*args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "LOOM_URL": shared_server.url, "LOOM_TOKEN": token, "COLUMNS": "120"}
        command = [sys.executable, "-m", "loom", *args]
        return subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, check=False
        )

    applied = loom("apply", "-f", str(objects), str(code))
    assert applied.returncode == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "configmap/templates created",
        "secret/creds created",
        "tfjob.kubeflow.org/hello created",
    ]
    assert "metadata.namespace" in applied.stderr and "ignored" in applied.stderr
    listed = json.loads(loom("get", "tfjobs", "-o", "json").stdout)
    assert listed["kind"] == "List" and listed["items"][0]["metadata"]["name"] == "hello"
    table = loom("get", "tfjob").stdout
    assert "hello" in table and "TFJob" in table
    shown = yaml.safe_load(loom("get", "tfjob", "hello", "-o", "yaml").stdout)
    assert shown["status"]["conditions"][0]["type"] == "Created"
    deleted = loom("delete", "-f", str(objects))
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.split() == [
        *("configmap/templates", "deleted", "secret/creds", "deleted"),
        *("tfjob.kubeflow.org/hello", "deleted"),
    ]
    missing = loom("get", "tfjob", "hello")
    assert missing.returncode == 1 and "no TFJob 'hello'" in missing.stderr


JOB = """---
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {name: hello}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: 1
      template:
        spec:
          containers:
          - name: tensorflow
            image: python:3.11
            command: [python3, /app/hello.py]
            resources: {limits: {cpu: 250m, memory: 256Mi}}
"""
