"""The environment builder with the real `uv`: one build per digest under concurrency, a failed
build leaves nothing behind, and the collector spares what is in use."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from loom.environments import builder, cache
from tests.conftest import package_sources

pytestmark = pytest.mark.integration


def request(root: Path, packages: list[str], digest: str = "d1", **kw: Any) -> builder.Request:
    sources = package_sources()
    extra = sources.get("LOOM_ENVIRONMENTS_EXTRA_INDEX_URLS", "")
    links = sources.get("LOOM_ENVIRONMENTS_FIND_LINKS", "")
    args: dict[str, Any] = {
        "extra_index_urls": [u for u in extra.split(",") if u],
        "find_links": [u for u in links.split(",") if u],
        **kw,
    }
    return builder.Request(digest=digest, root=root, packages=packages, describe="test", **args)


def test_concurrent_learners_build_once_and_share(tmp_path: Path) -> None:
    wanted = request(tmp_path, ["toolz==1.1.0"])
    logs: list[list[str]] = [[], [], []]
    readies: list[builder.Ready] = []

    def one(n: int) -> None:
        readies.append(builder.ensure(wanted, logs[n].append, lambda _: None))

    threads = [threading.Thread(target=one, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert len(readies) == 3
    assert sum(ready.built for ready in readies) == 1
    assert sum(any(" built in " in line for line in log) for log in logs) == 1
    out = subprocess.run(
        [str(readies[0].python), "-c", "import toolz, loom.tracking; print(toolz.__version__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "1.1.0"
    marker = json.loads((wanted.folder / builder.MARKER).read_text())
    assert marker["packages"] == ["toolz==1.1.0"] and marker["bytes"] > 0
    for ready in readies:
        ready.release()


def test_a_failed_build_leaves_no_environment(tmp_path: Path) -> None:
    wanted = request(tmp_path, ["loom-no-such-package-anywhere==1.0"])
    with pytest.raises(builder.BuildFailed) as raised:
        builder.ensure(wanted, lambda _: None, lambda _: None)
    assert "loom-no-such-package-anywhere" in raised.value.message
    assert not wanted.folder.exists()


def test_source_builds_are_refused_unless_allowed(tmp_path: Path) -> None:
    """Building from source runs the package's own code on the platform: wheels only."""
    wanted = request(tmp_path, ["loom-sdist-only==1.0"], find_links=[str(_sdist(tmp_path))])
    with pytest.raises(builder.BuildFailed) as raised:
        builder.ensure(wanted, lambda _: None, lambda _: None)
    assert "build" in raised.value.message.lower()
    assert not (tmp_path / "BUILT").exists()


def _sdist(tmp_path: Path) -> Path:
    """A source distribution whose build would leave a mark, were it ever run."""
    import tarfile

    folder = tmp_path / "sdists"
    folder.mkdir()
    source = tmp_path / "src" / "loom_sdist_only-1.0"
    source.mkdir(parents=True)
    (source / "setup.py").write_text(
        f"open({str(tmp_path / 'BUILT')!r}, 'w').write('x')\n"
        "from setuptools import setup\nsetup(name='loom-sdist-only', version='1.0')\n"
    )
    (source / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: loom-sdist-only\nVersion: 1.0\n")
    with tarfile.open(folder / "loom_sdist_only-1.0.tar.gz", "w:gz") as archive:
        archive.add(source, arcname=source.name)
    return folder


def test_collector_removes_old_and_spares_held(tmp_path: Path) -> None:
    old, held = request(tmp_path, ["toolz==1.1.0"], "old"), request(tmp_path, ["toolz"], "held")
    for wanted in (old, held):
        builder.ensure(wanted, lambda _: None, lambda _: None).release()
    in_use = builder.ensure(held, lambda _: None, lambda _: None)
    long_ago = time.time() - 90 * 86400
    for wanted in (old, held):
        os.utime(wanted.folder / cache.LAST_USED, (long_ago, long_ago))
    removed = cache.prune(tmp_path, 10 * 2**30, 30 * 86400.0, builder.MARKER)
    assert removed == ["old"]
    assert not old.folder.exists() and held.folder.exists()
    in_use.release()
    assert cache.prune(tmp_path, 10 * 2**30, 30 * 86400.0, builder.MARKER) == ["held"]


def test_collector_keeps_the_machine_under_its_allowance(tmp_path: Path) -> None:
    first, second = request(tmp_path, ["toolz==1.1.0"], "a"), request(tmp_path, ["toolz"], "b")
    builder.ensure(first, lambda _: None, lambda _: None).release()
    time.sleep(0.05)
    builder.ensure(second, lambda _: None, lambda _: None).release()
    for wanted, hours in ((first, 3), (second, 2)):  # neither used within the last hour
        stamp = time.time() - hours * 3600
        os.utime(wanted.folder / cache.LAST_USED, (stamp, stamp))
    size = json.loads((second.folder / builder.MARKER).read_text())["bytes"]
    assert cache.prune(tmp_path, size + 1, 86400.0, builder.MARKER) == ["a"]  # least recent


def test_a_cancelled_build_stops_the_installer_at_once(tmp_path: Path) -> None:
    """A halted learner does not wait for its installer: here an index that never answers."""
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    wanted = builder.Request(
        digest="hang",
        root=tmp_path,
        packages=["loom-hangs-forever==1.0"],
        index_url=f"http://127.0.0.1:{port}/simple",
    )
    threading.Timer(1.0, wanted.cancel.set).start()
    began = time.monotonic()
    try:
        with pytest.raises(builder.BuildFailed) as raised:
            builder.ensure(wanted, lambda _: None, lambda _: None)
    finally:
        silent.close()
    assert "stopped" in raised.value.message
    assert time.monotonic() - began < 10
    assert not wanted.folder.exists()


def test_nothing_a_package_ships_runs_while_it_is_installed(tmp_path: Path) -> None:
    """A wheel's `.pth` file runs in the jobs that import from the environment (sandboxed),
    never while the platform builds it (with the platform's rights)."""
    ran = tmp_path / "RAN"
    wheels = tmp_path / "wheels"
    plant = f"import os; open({str(ran)!r}, 'w')\n"
    _wheel(wheels, "loom_evil_pth", {"loom_evil.pth": plant, "loom_evil_mod.py": "X = 1\n"})
    wanted = request(tmp_path / "envs", ["loom-evil-pth==1.0"], find_links=[str(wheels)])
    ready = builder.ensure(wanted, lambda _: None, lambda _: None)
    ready.release()
    assert next(wanted.folder.glob("lib/python3*/site-packages/loom_evil.pth")).exists()
    assert not ran.exists()
    compiled = list(wanted.folder.glob("lib/python3*/site-packages/**/__pycache__/*.pyc"))
    assert compiled  # compiled all the same, by the platform's Python without `site`


def test_modules_are_compiled_but_a_packages_own_tests(tmp_path: Path) -> None:
    """What jobs import is compiled at build time (they cannot write bytecode); the test
    suite a package ships is not (half of a build's CPU, for files no job imports)."""
    wheels = tmp_path / "wheels"
    files = {"loom_tested/__init__.py": "", "loom_tested/core.py": "X = 1\n"}
    files |= {"loom_tested/tests/__init__.py": "", "loom_tested/tests/test_core.py": "Y = 2\n"}
    _wheel(wheels, "loom_tested", files)
    wanted = request(tmp_path / "envs", ["loom-tested==1.0"], find_links=[str(wheels)])
    builder.ensure(wanted, lambda _: None, lambda _: None).release()
    package = next(wanted.folder.glob("lib/python3*/site-packages/loom_tested"))
    assert list((package / "__pycache__").glob("core.*.pyc"))
    assert not (package / "tests" / "__pycache__").exists()


def test_every_file_is_readable_by_other_uids(tmp_path: Path) -> None:
    """Whatever mode uv's cache gave a file, the jobs' uids can read the environment."""
    wanted = request(tmp_path, ["toolz==1.1.0"])
    builder.ensure(wanted, lambda _: None, lambda _: None).release()
    for path in wanted.folder.rglob("*"):
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        assert mode & 0o004, path
        if path.is_dir():
            assert mode & 0o001, path


def _wheel(folder: Path, name: str, files: dict[str, str]) -> None:
    """A minimal pure-Python wheel holding `files`, with a valid RECORD."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-1.0.dist-info"
    contents = {
        **files,
        f"{info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n"
        ),
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: loom-tests\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
    }
    record = []
    for path, text in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
        archive.writestr(f"{info}/RECORD", "\n".join(record) + "\n")


def test_what_the_platform_has_at_the_same_version_is_used_from_it(tmp_path: Path) -> None:
    """numpy, asked at the platform's own version, is not copied into the environment (nor
    compiled there): the job imports the platform's. toolz, which the platform lacks, is the
    environment's. A platform that no longer has what an environment relies on gets it built
    again."""
    import numpy

    wanted = request(tmp_path, [f"numpy=={numpy.__version__}", "toolz==1.1.0"])
    ready = builder.ensure(wanted, lambda _: None, lambda _: None)
    ready.release()
    site_packages = next(wanted.folder.glob("lib/python3*/site-packages"))
    assert not list(site_packages.glob("numpy*")), "numpy copied into the environment"
    assert list(site_packages.glob("toolz-1.1.0.dist-info"))
    out = subprocess.run(
        [str(ready.python), "-c", "import numpy, toolz; print(numpy.__file__, toolz.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    numpy_file, toolz_file = out.stdout.split()
    assert numpy_file == numpy.__file__ and toolz_file.startswith(str(site_packages))
    marker_file = wanted.folder / builder.MARKER
    marker = json.loads(marker_file.read_text())
    assert any(Path(p).name.startswith("numpy-") for p in marker["shared"]), marker["shared"]

    marker["shared"].append(str(tmp_path / "gone-1.0.dist-info"))  # the platform changed
    marker_file.write_text(json.dumps(marker))
    again = builder.ensure(wanted, lambda _: None, lambda _: None)
    again.release()
    assert again.built
