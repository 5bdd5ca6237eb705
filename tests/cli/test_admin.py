"""`loom admin`: the platform's keys from the command line."""

from __future__ import annotations

import subprocess
import sys

from cryptography.fernet import Fernet


def test_new_key_is_a_fernet_key() -> None:
    """`loom admin new-key` prints a key that LOOM_SECRET_KEYS accepts, a new one each time."""
    run = [sys.executable, "-m", "loom", "admin", "new-key"]
    first, second = (subprocess.run(run, capture_output=True, text=True, check=True) for _ in "ab")
    key = first.stdout.strip()
    assert Fernet(key.encode()).decrypt(Fernet(key.encode()).encrypt(b"x")) == b"x"
    assert key != second.stdout.strip()
