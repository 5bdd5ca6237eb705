"""What a parameter or a tag may be (MLflow's limits): checked where training code logs it (the
tracking SDK, which raises) and where the platform stores it (which drops a bad one). Standard
library only: the SDK imports it inside jobs."""

from __future__ import annotations

KINDS = ("param", "tag")
MAX_KEY = 250
MAX_VALUE = {"param": 6000, "tag": 8000}


def problem(kind: str, key: str, value: str) -> str:
    """Why an entry cannot be kept; empty if it can."""
    if kind not in KINDS:
        return f"kind: expected param or tag, got {kind!r}"
    if not key or len(key) > MAX_KEY or "\x00" in key:
        return f"{kind} name {key[:60]!r}: 1 to {MAX_KEY} characters, no NUL"
    if len(value) > MAX_VALUE[kind] or "\x00" in value:
        return f"{kind} {key!r}: a value of at most {MAX_VALUE[kind]} characters, no NUL"
    return ""
