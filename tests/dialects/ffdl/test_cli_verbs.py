"""FfDL's CLI verbs in `loom` (`loom.cli.ffdl`, and Loom's own verbs with FfDL's arguments),
with FfDL's environment (DLAAS_URL, DLAAS_USERNAME, DLAAS_PASSWORD) against a real platform; jobs
found by name, with hints when none matches; the SDK's `wait`."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from loom.cli.main import app
from loom.client import ClientError, LoomClient
from tests.conftest import Server, database_free

pytestmark = [pytest.mark.integration, database_free]

MANIFEST = """\
name: ffdl-cli-job
version: "1.0"
cpus: 0.5
memory: 256MiB
framework:
  name: pytorch
  version: latest
  command: python train.py
"""
TRAIN = """\
import os
from loom.tracking import log_metrics
for step in (1, 2):
    print(f"epoch {step}", flush=True)
    log_metrics(step=step, loss=1.0 / step)
open(os.path.join(os.environ["RESULT_DIR"], "weights.txt"), "w").write("w")
"""


@pytest.fixture
def dlaas(
    shared_server: Server, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[dict[str, str]]:
    """FfDL's CLI environment for a new user, pointed at the platform's FfDL API."""
    name = "ffdl-" + request.node.name[5:25].replace("_", "-")
    with shared_server.client() as admin:
        token = admin.add_user(name)["token"]
    yield {
        "DLAAS_URL": shared_server.url + "/ffdl",
        "DLAAS_USERNAME": name,
        "DLAAS_PASSWORD": token,
        "LOOM_URL": "",
        "LOOM_TOKEN": "",
        "LOOM_HOME": str(tmp_path / "home"),
        "COLUMNS": "80",
    }


def run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def test_ffdls_verbs_with_ffdls_environment(dlaas: dict[str, str], tmp_path: Path) -> None:
    """train, show (by name), loglines, emetrics, download --trainedmodel, list at 80 columns
    and version work as FfDL's CLI did; the SDK's wait returns the final state."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "train.py").write_text(TRAIN)
    (tmp_path / "manifest.yml").write_text(MANIFEST)
    trained = run(dlaas, "train", str(tmp_path / "manifest.yml"), str(tmp_path / "code"), "-q")
    assert trained.exit_code == 0, trained.output
    job_id = trained.stdout.strip()

    url = dlaas["DLAAS_URL"].removesuffix("/ffdl")
    with LoomClient(url, dlaas["DLAAS_PASSWORD"]) as sdk:
        final = sdk.wait("ffdl-cli-job", timeout=120)  # by name, as people remember it
    assert (final["id"], final["state"]) == (job_id, "COMPLETED")

    shown = run(dlaas, "show", "ffdl-cli-job", "--json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["id"] == job_id

    lines = run(dlaas, "loglines", job_id, "--pos", "-1", "--pagesize", "1")
    rindex, millis, text = lines.stdout.strip().split(" ", 2)
    assert (rindex, text) == ("2", "epoch 2") and millis.isdigit(), lines.output

    metrics = run(dlaas, "emetrics", "ffdl-cli-job", "--pagesize", "1")
    assert metrics.stdout.startswith("time: ") and "group-label: train" in metrics.stdout
    assert "values: loss: 1.0" in metrics.stdout, metrics.output

    target = tmp_path / "trained.zip"
    got = run(dlaas, "download", job_id, "--trainedmodel", "--filename", str(target))
    assert got.exit_code == 0, got.output
    with zipfile.ZipFile(target) as archive:
        assert archive.read("weights.txt") == b"w"

    listed = run(dlaas, "list")
    row = next(line for line in listed.stdout.splitlines() if job_id in line)
    assert "COMPLETED" in row and "…" not in row, listed.stdout

    assert run(dlaas, "version").stdout.startswith("loom ")


def test_a_wrong_name_gets_the_nearest_names_and_a_wrong_user_is_refused(
    dlaas: dict[str, str], tmp_path: Path
) -> None:
    """`loom show` of a name no job has names the nearest; DLAAS_USERNAME must be the token's
    user; the SDK's `find_job` says the same."""
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "train.py").write_text("print('hi')\n")
    (tmp_path / "m.yml").write_text(MANIFEST.replace("ffdl-cli-job", "digits-baseline"))
    assert run(dlaas, "train", str(tmp_path / "m.yml"), str(tmp_path / "c")).exit_code == 0

    missed = run(dlaas, "show", "digits-basline")
    assert missed.exit_code == 1
    assert "did you mean digits-baseline" in missed.output, missed.output

    wrong = run({**dlaas, "DLAAS_USERNAME": "mallory"}, "list")
    assert wrong.exit_code == 1 and "DLAAS_USERNAME is 'mallory'" in wrong.output

    with LoomClient(dlaas["DLAAS_URL"].removesuffix("/ffdl"), dlaas["DLAAS_PASSWORD"]) as sdk:
        with pytest.raises(ClientError) as none:
            sdk.find_job("zzzzzz")
        assert none.value.status == 404 and "loom list" in str(none.value)
