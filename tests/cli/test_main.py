"""The `loom` command's lazy registration: a command loads its own module only, and the
whole command (help, tests) still has every command."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loom.cli import main

# what `list` and `logs` have no use for, and that cost most of a command's start
HEAVY = ("loom.domain.manifest", "yaml", "loom.cli.pipelines", "loom.cli.charts", "httpx._main")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["list"], "list"),
        (["--url", "http://x", "logs", "job-1", "-f"], "logs"),
        (["--token=abc", "deployments", "list"], "deployments"),
        (["--help"], None),
        ([], None),
        (["lsit"], None),
        (["--context", "list", "show", "j"], "show"),
    ],
)
def test_command_named_skips_the_top_level_options(argv: list[str], named: str | None) -> None:
    """The command's name is found past the top-level options and their values; help, no
    command and an unknown one ask for every command."""
    assert main.command_named(argv) == named


def test_the_whole_command_has_every_command() -> None:
    """`app` (built on first use) registers each command of the table."""
    from typer.main import get_command

    group = get_command(main.app)
    assert sorted(group.commands) == sorted(main.COMMANDS)  # type: ignore[attr-defined]


def test_one_command_loads_only_what_it_needs() -> None:
    """Building `loom list` or `loom logs` imports neither the manifest's schema, YAML, the
    pipelines' DSL, the charts, nor httpx's own command line."""
    probe = (
        "import json, sys; from loom.cli.main import build; build(['list', 'logs']);"
        f"print(json.dumps([m for m in {list(HEAVY)!r} if sys.modules.get(m) is not None]))"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert json.loads(found.stdout) == []


def test_version_needs_no_command_built(capsys: pytest.CaptureFixture[str]) -> None:
    """`loom --version` answers without parsing anything else."""
    import loom

    saved = sys.argv
    sys.argv = ["loom", "--version"]
    try:
        main.main()
    finally:
        sys.argv = saved
    assert capsys.readouterr().out == f"loom {loom.__version__}\n"
