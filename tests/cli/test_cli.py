"""The `loom` command against a real server, as a user types it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import Seat, Server, eventually, make_zip, manifest, register

pytestmark = pytest.mark.integration


def signed_in(server: Server | Seat) -> dict[str, str]:
    """This process's environment, signing the CLI in to `server`."""
    env = {k: v for k, v in os.environ.items() if k not in ("LOOM_URL", "LOOM_TOKEN")}
    if isinstance(server, Seat):
        home = server.home.parent / f"cli-{server.name}"  # nothing of the platform's
        return env | {"LOOM_URL": server.url, "LOOM_TOKEN": server.token, "LOOM_HOME": str(home)}
    return env | {"LOOM_HOME": str(server.home)}


def loom(
    server: Server | Seat, *args: str, token: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`loom ARGS` as a user types it: on a platform of the test's own, signed in through its
    home (the token and URL the server wrote there); on the shared one, as the seat's user."""
    env = {**signed_in(server), "COLUMNS": "80"}
    if token:
        env["LOOM_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "loom", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_train_follow_list_show_logs_download(seat: Seat, tmp_path: Path) -> None:
    """train --follow streams the output and exits 0; list, show, logs and download agree."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "hello.py").write_text("print('hello from loom')\nprint('bye')\n")
    (code / "manifest.yml").write_text(manifest("python hello.py"))
    result = loom(seat, "train", str(code / "manifest.yml"), str(code), "--follow")
    assert result.returncode == 0, result.stderr
    assert "hello from loom" in result.stdout
    assert "COMPLETED" in result.stdout
    job_id = result.stdout.split("Submitted ")[1].split()[0]

    told = [line.split()[1].rstrip(":") for line in result.stderr.splitlines() if line[:1] == "▸"]
    assert len(told) >= 2 and told[-1] == "COMPLETED", result.stderr  # state changes, told

    listed = loom(seat, "list").stdout
    assert job_id in listed  # whole, at 80 columns
    assert max(len(line) for line in listed.splitlines()) <= 80
    assert job_id in loom(seat, "list", "--name", "TEST").stdout  # a part, in any case
    assert job_id not in loom(seat, "list", "--name", "nothing-like-it").stdout
    shown = json.loads(loom(seat, "show", job_id, "--json").stdout)
    assert shown["state"] == "COMPLETED"
    assert loom(seat, "logs", job_id).stdout.splitlines() == ["hello from loom", "bye"]
    out = tmp_path / "results.zip"
    assert loom(seat, "download", job_id, "--results", "-o", str(out)).returncode == 0
    assert "learner-1/training-log.txt" in zipfile.ZipFile(out).namelist()


def test_output_formats_tail_grep_and_quiet(seat: Seat, tmp_path: Path) -> None:
    """`-o json|yaml` read back whole, `-o wide`, `train -q` prints only the id, and logs
    take --tail, --grep and --since."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "count.py").write_text("for i in range(1, 25001):\n    print(f'line {i}')\n")
    (code / "m.yml").write_text(manifest("python count.py", name="counter"))
    submitted = loom(seat, "train", "-q", str(code / "m.yml"), str(code))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert job_id.startswith("training-") and "\n" not in job_id
    for _ in range(600):
        state = json.loads(loom(seat, "show", job_id, "-o", "json").stdout)["state"]
        if state in ("COMPLETED", "FAILED"):
            break
        time.sleep(0.1)
    assert state == "COMPLETED"

    as_json = json.loads(loom(seat, "list", "-o", "json").stdout)
    assert [j["id"] for j in as_json["jobs"]] == [job_id] and as_json["total"] == 1
    as_yaml = yaml.safe_load(loom(seat, "show", job_id, "-o", "yaml").stdout)
    assert as_yaml["id"] == job_id and as_yaml["name"] == "counter"
    assert "LEARNERS" in loom(seat, "list", "-o", "wide").stdout

    everything = loom(seat, "logs", job_id).stdout.splitlines()
    assert len(everything) == 25_000 and everything[-1] == "line 25000"  # past a 10,000 page
    assert loom(seat, "logs", job_id, "--tail", "3").stdout.splitlines() == [
        "line 24998",
        "line 24999",
        "line 25000",
    ]
    tail = loom(seat, "logs", job_id, "--tail", "12000").stdout.splitlines()
    assert tail[0] == "line 13001" and tail[-1] == "line 25000" and len(tail) == 12_000
    grepped = loom(seat, "logs", job_id, "--grep", r"^line 2499\d$").stdout.splitlines()
    assert grepped == [f"line {n}" for n in range(24990, 25000)]
    assert loom(seat, "logs", job_id, "--since", "2999-01-01T00:00:00Z").stdout == ""
    followed = loom(seat, "logs", job_id, "--tail", "2", "-f").stdout.splitlines()
    assert followed == ["line 24999", "line 25000"]  # a finished job: the tail, then the end
    with seat.client() as client:
        mark = client.logs(job_id, pos=-1, pagesize=3)[0]["id"]  # line 24998
        after = [d["line"] for kind, d in client.follow(job_id, after=mark) if kind == "line"]
    assert after == ["line 24999", "line 25000"]
    bad = loom(seat, "logs", job_id, "--grep", "(")
    assert bad.returncode == 2 and "--grep" in bad.stderr


def test_follow_says_why_a_job_waits(tmp_path: Path) -> None:
    """`train --follow` of a job queued behind a running one prints why it waits, then runs."""
    srv = Server(tmp_path / "home", LOOM_CPUS="1").start()
    try:
        code = tmp_path / "code"
        code.mkdir()
        (code / "a.yml").write_text(manifest("sleep 300", name="first", cpus=1))
        (code / "b.yml").write_text(manifest("echo second", name="second", cpus=1))
        first = loom(srv, "train", "-q", str(code / "a.yml"), str(code)).stdout.strip()
        command = [sys.executable, "-m", "loom", "train", str(code / "b.yml"), str(code), "-f"]
        follower = subprocess.Popen(
            command, env=signed_in(srv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        with srv.client() as client:
            # The first holds the only CPU until the second is seen waiting for it.
            eventually(
                lambda: any(j["queue_reason"] for j in client.jobs(name="second")["jobs"]),
                timeout=60,
            )
            client.halt(first)
        out, err = follower.communicate(timeout=120)
        assert follower.returncode == 0, err
        assert "QUEUED: needs 1 CPU" in " ".join(err.split()), err
        assert "second" in out
    finally:
        srv.stop()


def test_metrics_of_two_jobs_compared(seat: Seat, tmp_path: Path) -> None:
    """`loom metrics A B --log --smooth 0.5` draws each job's train and test loss in one chart,
    after a table of each job's latest values."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "fit.py").write_text(
        "import sys\n"
        "from loom import tracking\n"
        "rate = float(sys.argv[1])\n"
        "for step in range(1, 21):\n"
        "    tracking.log_metrics(step=step, group='train', loss=1 / (rate * step))\n"
        "    tracking.log_metrics(step=step, group='test', loss=1.2 / (rate * step))\n"
    )
    ids = []
    for rate in (1, 3):
        (code / "m.yml").write_text(manifest(f"python fit.py {rate}", name=f"fit-{rate}"))
        submitted = loom(seat, "train", "-q", str(code / "m.yml"), str(code))
        ids.append(submitted.stdout.strip())
    for job_id in ids:
        for _ in range(600):
            if json.loads(loom(seat, "show", job_id, "-o", "json").stdout)["state"] == "COMPLETED":
                break
            time.sleep(0.1)
    drawn = loom(seat, "metrics", *ids, "--log", "--smooth", "0.5")
    assert drawn.returncode == 0, drawn.stderr
    for job_id in ids:
        assert f"{job_id}:train/loss" in drawn.stdout and f"{job_id}:test/loss" in drawn.stdout
    assert "loss (log scale)" in drawn.stdout
    one = loom(seat, "metrics", ids[0], "--metric", "nope")
    assert "no metric 'nope' to chart" in one.stdout


def test_uploads_and_downloads_tell_their_progress(seat: Seat, tmp_path: Path) -> None:
    """The client tells `progress(done, total)` as a large code zip goes up and comes back
    (the CLI draws a bar from it on a terminal)."""
    payload = make_zip({"t.py": "print('ok')", "weights.bin": os.urandom(3 << 20)})
    sent: list[tuple[int, int | None]] = []
    got: list[tuple[int, int | None]] = []
    with seat.client() as client:
        job_id = client.submit(manifest("python t.py"), payload, progress=lambda *a: sent.append(a))
        target = tmp_path / "code.zip"
        client.download(job_id, "definition", target, progress=lambda *a: got.append(a))
    assert sent[-1] == (len(payload), len(payload)) and len(sent) > 3
    assert got[-1][0] == target.stat().st_size > 3 << 20


def test_list_watch_streams_a_document_per_change(seat: Seat) -> None:
    """`loom list --watch -o json` prints one compact document a line, again when the list
    changes; Ctrl-C ends it cleanly."""
    env = signed_in(seat)
    command = [sys.executable, "-m", "loom", "list", "--watch", "-o", "json"]
    watcher = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watcher.stdout is not None
        first = json.loads(watcher.stdout.readline())
        with seat.client() as client:
            job_id = client.submit(manifest("true"), make_zip({"t.py": ""}))
        for _ in range(20):
            seen = json.loads(watcher.stdout.readline())
            if job_id in [j["id"] for j in seen["jobs"]]:
                break
        else:
            raise AssertionError("the new job never showed")
        assert job_id not in [j["id"] for j in first["jobs"]]
    finally:
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(10) == 0


def test_failed_job_exits_non_zero(seat: Seat, tmp_path: Path) -> None:
    """train --follow of a failing job prints FAILED and exits 1."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "m.yml").write_text(manifest("exit 4"))
    result = loom(seat, "train", str(code / "m.yml"), str(code), "-f")
    assert result.returncode == 1
    assert "FAILED" in result.stdout


def test_users_add_then_use_the_token(server: Server) -> None:
    """`loom users add` prints a token that works for that user only."""
    result = loom(server, "users", "add", "dana")
    assert result.returncode == 0, result.stderr
    token = next(line.split()[-1] for line in result.stdout.splitlines() if "token:" in line)
    listing = loom(server, "list", token=token)
    assert listing.returncode == 0
    denied = loom(server, "users", "add", "eve", token=token)
    assert denied.returncode == 1
    assert "admin" in denied.stderr


def test_clear_error_when_the_job_is_unknown(seat: Seat) -> None:
    """An unknown job id is a one-line error, no traceback."""
    result = loom(seat, "show", "training-missing")
    assert result.returncode == 1
    assert "no job" in result.stderr
    assert "Traceback" not in result.stderr


def test_deploy_and_deployments(seat: Seat, model_zip: bytes) -> None:
    """`loom deploy MODEL:VERSION` waits until it serves and prints the endpoint; list, show,
    update and delete act on it; a bad reference is refused with a message."""
    with seat.client() as client:
        register(client, model_zip)
    done = loom(seat, "deploy", "digits:1", "--name", "cli-web", "--min-replicas", "0")
    assert done.returncode == 0, done.stderr
    assert "cli-web: scaled to zero" in done.stdout and "/v2/models/cli-web/infer" in done.stdout
    listed = loom(seat, "deployments", "list")
    assert "cli-web" in listed.stdout and "digits" in listed.stdout
    updated = loom(seat, "deployments", "update", "cli-web", "--max-replicas", "2")
    assert updated.returncode == 0 and "max 2" in updated.stdout
    shown = json.loads(loom(seat, "deployments", "show", "cli-web", "--json").stdout)
    assert shown["max_replicas"] == 2 and shown["model_version"] == 1
    missing = loom(seat, "deploy", "digits@nowhere", "--name", "x")
    assert missing.returncode == 1 and "no version 'nowhere'" in missing.stderr
    assert loom(seat, "deployments", "delete", "cli-web").returncode == 0
    assert "cli-web" not in loom(seat, "deployments", "list").stdout


def test_deployment_keys_and_public(seat: Seat, model_zip: bytes) -> None:
    """`deployments keys create` prints a key once, `list` shows it without its value, `revoke`
    removes it; `deploy --public` and `update --private` switch whether a token is needed."""
    with seat.client() as client:
        register(client, model_zip)
    done = loom(seat, "deploy", "digits", "--name", "cli-open", "--min-replicas", "0", "--public")
    assert done.returncode == 0 and "public: no token needed" in done.stdout, done.stderr
    created = loom(seat, "deployments", "keys", "create", "cli-open", "--name", "ci")
    assert created.returncode == 0, created.stderr
    key = next(line for line in created.stdout.split() if line.startswith("lk_"))
    listed = loom(seat, "deployments", "keys", "list", "cli-open")
    assert "ci" in listed.stdout and "never" in listed.stdout and key not in listed.stdout
    key_id = created.stdout.split()[1]
    assert loom(seat, "deployments", "keys", "revoke", "cli-open", key_id).returncode == 0
    assert key_id not in loom(seat, "deployments", "keys", "list", "cli-open").stdout
    private = loom(seat, "deployments", "update", "cli-open", "--private")
    assert private.returncode == 0 and "needs a token or a key" in private.stdout
    assert loom(seat, "deployments", "delete", "cli-open").returncode == 0


def test_a_bad_manifest_is_told_before_anything_is_sent(tmp_path: Path) -> None:
    """The CLI checks the manifest itself: a misspelt field gets "did you mean", bad YAML its
    file, line and column; no server is needed for either."""
    env = {**os.environ, "LOOM_HOME": str(tmp_path), "LOOM_URL": "http://127.0.0.1:9"}
    typo = tmp_path / "typo.yml"
    typo.write_text("name: x\nlearnrs: 2\nframework: {name: python, command: c}\n")
    broken = tmp_path / "broken.yml"
    broken.write_text("name: x\nframework:\n  name: python\n command: c\n")
    said = []
    for path in (typo, broken):
        run = [sys.executable, "-m", "loom", "train", str(path), str(tmp_path)]
        done = subprocess.run(run, env=env, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2, done.stderr
        said.append(" ".join(done.stderr.split()))
    assert "unknown field `learnrs` (value 2); did you mean `learners`?" in said[0]
    assert f"{broken} is not valid YAML: line 4, column 2: did not find expected key" in said[1]
    assert "cannot reach" not in " ".join(said)


def test_named_contexts(seat: Seat, tmp_path: Path) -> None:
    """`loom context add` keeps a platform and its token by name (0600, token never shown);
    the current context is used when nothing else says; `--context` picks another."""
    config = tmp_path / "config" / "contexts.yaml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOM_")}
    env |= {"LOOM_CONFIG": str(config), "COLUMNS": "80"}

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "loom", *args]
        return subprocess.run(
            command, env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False
        )

    added = run("context", "add", "lab", "--url", seat.url, "--token-stdin", stdin=seat.token)
    assert added.returncode == 0, added.stderr
    assert run("context", "add", "elsewhere", "--url", "http://127.0.0.1:9").returncode == 0
    assert config.stat().st_mode & 0o777 == 0o600
    listed = json.loads(run("context", "list", "-o", "json").stdout)
    assert [(c["name"], c["current"], c["token"]) for c in listed] == [
        ("elsewhere", False, False),
        ("lab", True, True),
    ]
    assert seat.token not in run("context", "list").stdout
    assert run("list").returncode == 0  # the current context: lab
    assert "cannot reach Loom at http://127.0.0.1:9" in run("--context", "elsewhere", "list").stderr
    assert run("context", "use", "elsewhere").returncode == 0
    assert run("context", "current").stdout.strip() == "elsewhere"
    env["LOOM_URL"], env["LOOM_TOKEN"] = seat.url, seat.token
    assert run("list").returncode == 0  # LOOM_URL and LOOM_TOKEN come first
    missing = run("--context", "nope", "list")
    assert (
        missing.returncode == 1 and "no context 'nope' (contexts: elsewhere, lab)" in missing.stderr
    )
    bad = run("context", "add", "x y", "--url", "ftp://x")
    assert bad.returncode == 1 and "context name 'x y'" in bad.stderr


def test_version_and_the_hint_when_no_server_answers(tmp_path: Path) -> None:
    """`loom --version` needs no server; a command with none to reach says how to start one."""
    env = {**os.environ, "LOOM_HOME": str(tmp_path), "LOOM_URL": "http://127.0.0.1:9"}
    env["LOOM_TOKEN"] = "loom_unused"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "loom", *args]
        return subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=60, check=False
        )

    shown = run("--version")
    assert shown.returncode == 0 and shown.stdout.startswith("loom ")
    failed = run("list")
    assert failed.returncode == 1
    assert "cannot reach Loom at http://127.0.0.1:9" in failed.stderr
    assert "start it with `loom server`, or point LOOM_URL" in " ".join(failed.stderr.split())
