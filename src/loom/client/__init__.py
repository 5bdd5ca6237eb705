"""The Python SDK over HTTP. The CLI and the tests use it; it never imports the platform."""

import sys

# httpx's own command line (`httpx._main`) imports click, pygments and rich's progress bars
# whenever they are installed, and that doubled the `loom` command's start; Loom never runs
# it. A None in sys.modules makes that one import fail, which httpx expects (it then defines
# a `main` that says what is missing).
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from loom.client.http import ClientError, LoomClient

__all__ = ["ClientError", "LoomClient"]
