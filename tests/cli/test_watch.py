"""`--watch` ends on Ctrl-C between requests, never inside one."""

from __future__ import annotations

import os
import signal
import threading
import time

from loom.cli.output import Format, watch


def test_ctrl_c_during_a_request_lets_it_finish_then_ends() -> None:
    """A SIGINT that arrives while a request is in flight does not interrupt it (an interrupted
    request can leave the HTTP pool's lock held, and the exit then hangs): the request ends, the
    watch returns, and the previous SIGINT handler is back."""
    finished: list[int] = []
    before = signal.getsignal(signal.SIGINT)

    def fetch() -> dict[str, int]:
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
        time.sleep(0.3)  # the signal arrives here, mid-request
        finished.append(1)
        return {"n": len(finished)}

    began = time.monotonic()
    watch(Format.JSON, fetch, lambda _data, _wide: "", every_s=30)
    assert finished == [1]
    assert time.monotonic() - began < 5  # not the 30 s wait: Ctrl-C woke it
    assert signal.getsignal(signal.SIGINT) is before
