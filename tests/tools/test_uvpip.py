"""What the Makefile's installs compile: all that a sandboxed learner or replica imports (it sees
the venv read-only), not packages' test suites nor the tests' own tools."""

from __future__ import annotations

import sys
from pathlib import Path

from tools.uvpip import compile_site_packages


def test_bytecode_for_what_learners_import_not_for_the_tests_tools(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    python = tmp_path / "bin" / "python"
    python.symlink_to(sys.executable)
    site = tmp_path / "lib" / f"python3.{sys.version_info.minor}" / "site-packages"
    for module in (
        "numpy/core.py",
        "numpy/tests/test_core.py",
        "torch/testing/_internal/helpers.py",
        "kubernetes/client/models.py",
        "moto/server.py",
        "playwright/api.py",
        "broken/new_syntax.py",
    ):
        (site / module).parent.mkdir(parents=True, exist_ok=True)
        (site / module).write_text("def f[T](x): pass\n" if "broken" in module else "x = 1\n")

    compile_site_packages(python)  # a file that does not compile is left, silently

    def compiled(folder: str) -> bool:
        return any((site / folder / "__pycache__").glob("*.pyc"))

    assert compiled("numpy") and compiled("torch/testing/_internal")
    assert not compiled("numpy/tests")
    assert not any(compiled(name) for name in ("kubernetes/client", "moto", "playwright"))
    assert not compiled("broken")
