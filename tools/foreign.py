"""Foreign clients and servers in virtual environments of their own, under `.venvs/<name>` in the
repository (git-ignored), made once and reused: the tests and benchmarks of a dialect run the real
thing (MLflow's client, MLflow's server as the oracle) without installing it into Loom's venv.

    python -m tools.foreign            # make every one of them (what `make test` runs first)
    python -m tools.foreign mlflow-server

Packages come from wherever this machine's pip finds them (its configuration is honoured).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools import uvpip

ROOT = Path(__file__).resolve().parent.parent
VENVS = ROOT / ".venvs"
MLFLOW = "3.17.2"
# name → the packages pinned into it
FOREIGN: dict[str, list[str]] = {
    # psycopg2: MLflow's server on PostgreSQL (bench/mlflow.py)
    "mlflow-server": [f"mlflow=={MLFLOW}", "psycopg2-binary==2.9.11"],
    "mlflow-client": [
        f"mlflow-skinny=={MLFLOW}",
        "scikit-learn==1.9.1",
        "pandas==3.1.1",
        "skops==0.16.0",
    ],
}


def python(name: str) -> Path:
    """The interpreter of a foreign venv, made and filled on first use."""
    venv = VENVS / name
    interpreter = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = " ".join(FOREIGN[name])
    if stamp.exists() and stamp.read_text() == wanted:
        return interpreter
    if not interpreter.exists():  # no pip inside: uv fills it from outside (7 CPU-s saved)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    print(f"installing {wanted} into {venv} (once) ...", file=sys.stderr, flush=True)
    uvpip.install(interpreter, FOREIGN[name])
    stamp.write_text(wanted)
    return interpreter


if __name__ == "__main__":
    for wanted in sys.argv[1:] or list(FOREIGN):
        print(python(wanted))
