"""Opaque cursors for keyset paging of lists: the sort key of the last item of a page."""

from __future__ import annotations

import base64
import binascii
import json
import math
import re

from loom.domain.errors import InvalidInput

_JOB_ID = re.compile(r"[A-Za-z0-9_.-]{1,40}")


def encode_cursor(submitted_at: float, job_id: str) -> str:
    raw = json.dumps([submitted_at, job_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """The `(submitted_at, id)` a cursor from `encode_cursor` holds; InvalidInput otherwise."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        submitted_at, job_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise InvalidInput(
            "cursor: not a cursor this server gave out; pass a page's `next_cursor` unchanged"
        ) from None
    if not isinstance(submitted_at, int | float) or isinstance(submitted_at, bool):
        raise InvalidInput("cursor: not a cursor this server gave out (bad time)")
    if not isinstance(job_id, str) or not _JOB_ID.fullmatch(job_id):
        raise InvalidInput("cursor: not a cursor this server gave out (bad id)")
    if not math.isfinite(submitted_at):
        raise InvalidInput("cursor: not a cursor this server gave out (bad time)")
    return float(submitted_at), job_id
