"""The files a deployment's folder holds beside its spec."""

from __future__ import annotations

import threading
from pathlib import Path

from loom.serving.spec import PID, write_pid


def test_the_pid_file_is_replaced_whole(tmp_path: Path) -> None:
    """A reader checking the gateway is alive never finds the pid file empty or half written,
    while a restarted gateway's pid replaces the last one's."""
    write_pid(tmp_path, 1)
    seen: set[str] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.add((tmp_path / PID).read_text())

    reader = threading.Thread(target=read)
    reader.start()
    for pid in range(100_000, 100_300):
        write_pid(tmp_path, pid)
    done.set()
    reader.join()
    assert "" not in seen
    assert all(text.isdigit() for text in seen)
    assert (tmp_path / PID).read_text() == "100299"
    assert sorted(p.name for p in tmp_path.iterdir()) == [PID]
