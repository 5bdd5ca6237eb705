"""`uv pip install` from wherever this machine's pip installs (its configuration honoured):
the Makefile fills Loom's venv with it, and the foreign clients' venvs are made with it.

    python tools/uvpip.py [--python PATH] [--compile] -- PACKAGE ...   (or -e '.[extras]')

uv resolves and installs in parallel from a shared cache (`~/.cache/uv`), seconds where pip
takes minutes; but uv does not read pip's configuration, where an admin says which mirrors,
wheel folders and constraints this machine uses. This translates it: pip's index, extra indexes
(taking the best version from any of them, as pip does), find-links and constraint files.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

_TIMEOUT_S = 1800


def pip_settings() -> dict[str, list[str]]:
    """pip's configuration (files and PIP_* variables): its key → the words of its value."""
    found = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    settings: dict[str, list[str]] = {}
    for line in found.splitlines():
        key, _, value = line.partition("=")
        name = key.rsplit(".", 1)[-1]  # global.find-links, :env:.find-links → find-links
        settings[name] = value.strip().strip("'\"").split()
    return settings


def sources(settings: dict[str, list[str]]) -> list[str]:
    """uv's options for the indexes, wheel folders and constraints pip's `settings` name."""
    options: list[str] = []
    for url in settings.get("index-url", []):
        options += ["--index-url", url]
    extra = settings.get("extra-index-url", [])
    for url in extra:
        options += ["--extra-index-url", url]
    if extra:  # pip takes the best version from any index; uv, by default, the first with it
        options += ["--index-strategy", "unsafe-best-match"]
    for place in settings.get("find-links", []):
        options += ["--find-links", place]
    for path in settings.get("constraint", []):
        if Path(path).is_file():
            options += ["--constraint", path]
    return options


UV = "uv>=0.13,<0.14"  # as pyproject pins it


def uv() -> str:
    """The uv next to this Python (the `uv` package, installed by pip first if it is not)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        pip = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", UV]
        subprocess.run(pip, check=True, timeout=_TIMEOUT_S)
        from uv import find_uv_bin
    return str(find_uv_bin())


# Left out of the bytecode compiled at install: packages' own test suites, and what only the
# tests' tools and the platform import (a learner or a replica, which see the venv read-only and
# could not cache bytecode, never does): the Kubernetes client (74 MB of generated models), moto,
# mypy, Schemathesis, Hypothesis, Playwright, pip, setuptools. Whoever imports them first
# compiles what it imports, once. Compiling all of Loom's test venv took 112 CPU-s; this, ~60.
NOT_COMPILED = (
    r"/site-packages/(?:(?:kubernetes|kubeflow_trainer_api|moto|mypyc?|schemathesis|hypothesis"
    r"|playwright|pip|setuptools)/|(?:[^/]+/)*tests?/)"
)


def install(python: Path, packages: list[str], *, compile_bytecode: bool = False) -> None:
    """Install `packages` into the environment of `python` (a venv's interpreter); with
    `compile_bytecode`, compiled as pip does (but for NOT_COMPILED): an environment that
    sandboxed processes see read-only (Loom's own, for learners and replicas) could not cache
    it and would compile every module they import, every time."""
    settings = pip_settings()
    env = dict(os.environ)
    if settings.get("cert") and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = settings["cert"][0]  # the CA bundle pip is told to trust
    command = [uv(), "pip", "install", "--no-config", "--python", str(python), "--quiet"]
    command += sources(settings)
    subprocess.run([*command, *packages], check=True, env=env, timeout=_TIMEOUT_S)
    if compile_bytecode:
        compile_site_packages(python)


def compile_site_packages(python: Path) -> None:
    """Bytecode for the venv of `python`, by that Python (`-I -S`: no `.pth` file runs), in
    parallel over the cores; files already compiled are skipped. A file that does not compile on
    this Python (torch ships some for 3.12) is left as source, silently, as uv and pip do."""
    for site in sorted(python.parent.parent.glob("lib/python3*/site-packages")):
        command = [str(python), "-I", "-S", "-m", "compileall", "-qq", "-j", "0"]
        subprocess.run([*command, "-x", NOT_COMPILED, str(site)], check=False, timeout=_TIMEOUT_S)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", type=Path, default=Path(sys.executable))
    parser.add_argument("--compile", action="store_true", help="compile bytecode, as pip does")
    parser.add_argument("packages", nargs="+")
    args = parser.parse_args()
    install(args.python, args.packages, compile_bytecode=args.compile)


if __name__ == "__main__":
    main()
