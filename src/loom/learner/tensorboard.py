"""Scalar summaries from TensorBoard event files, read without TensorFlow.

An event file is a sequence of TFRecords (length, CRC, an `Event` protocol buffer, CRC); the
few fields needed here (step, summary values with a tag and a float) are decoded by hand.
Each folder's events form a group named after the folder; all scalars of one step make one
point, emitted once a later step appears (or the learner has ended).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import TYPE_CHECKING

from loom.sandbox.files import open_nofollow

if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

_DOUBLE = struct.Struct("<d")
_FLOAT = struct.Struct("<f")
_HEADER = struct.Struct("<Q")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protocol buffer message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported wire type {wire}")
        yield number, wire, value


def _tensor_scalar(buf: bytes) -> float | None:
    """The value of a rank-0 float tensor; None for anything else (histograms, PR curves)."""
    dtype, content = 1, b""
    for number, _wire, value in fields(buf):
        if number == 1:
            dtype = value
        elif number == 2 and any(n == 2 for n, _, _ in fields(value)):
            return None  # the shape has dimensions: not a scalar
        elif number == 4:
            content = value
        elif number == 5:  # float_val, packed or not
            return float(_FLOAT.unpack(value[:4])[0])
        elif number == 6:  # double_val
            return float(_DOUBLE.unpack(value[:8])[0])
    if content and dtype == 1:
        return float(_FLOAT.unpack(content[:4])[0])
    if content and dtype == 2:
        return float(_DOUBLE.unpack(content[:8])[0])
    return None


def _plugin_name(metadata: bytes) -> str | None:
    """SummaryMetadata.plugin_data.plugin_name: which TensorBoard plugin owns the value."""
    for number, _, value in fields(metadata):
        if number == 1:
            for inner, _, name in fields(value):
                if inner == 1:
                    return bytes(name).decode("utf-8", "replace")
    return None


def scalars(event: bytes) -> tuple[int, dict[str, float]]:
    """The step of an `Event` and its scalar summaries by tag."""
    step, found = 0, {}
    for number, _, value in fields(event):
        if number == 2:
            step = value - (1 << 64) if value >= 1 << 63 else value  # int64, two's complement
        elif number == 5:  # summary
            for vnum, _, raw in fields(value):
                if vnum != 1:
                    continue
                tag, scalar, plugin = "", None, "scalars"
                for f, _, v in fields(raw):
                    if f == 1:
                        tag = v.decode("utf-8", "replace")
                    elif f == 2:
                        scalar = float(_FLOAT.unpack(v)[0])
                    elif f == 8:
                        scalar = _tensor_scalar(v)
                    elif f == 9:
                        plugin = _plugin_name(v) or plugin
                if tag and scalar is not None and plugin == "scalars":
                    found[tag] = scalar
    return step, found


class _EventFile:
    def __init__(self, path: Path, group: str) -> None:
        self.path = path
        self.group = group
        self.offset = 0
        self.step: int | None = None
        self.values: dict[str, float] = {}

    def records(self) -> Iterator[bytes]:
        """Complete records after the last one read; a half-written one waits for next time."""
        with open_nofollow(self.path) as source:
            source.seek(self.offset)
            data = source.read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = _HEADER.unpack_from(data, pos)
            end = pos + 12 + length + 4
            if end > len(data):
                break
            yield data[pos + 12 : pos + 12 + length]
            pos = end
        self.offset += pos

    def poll(self, final: bool) -> list[dict[str, Any]]:
        points = []
        for record in self.records():
            try:
                step, found = scalars(record)
            except (ValueError, IndexError, struct.error):
                continue
            if not found:
                continue
            if self.step is not None and step != self.step and self.values:
                points.append(self._point())
            self.step = step
            self.values.update(found)
        if final and self.values:
            points.append(self._point())
        return points

    def _point(self) -> dict[str, Any]:
        point = {
            "group": self.group,
            "step": self.step,
            "etimes": {"step": self.step},
            "values": self.values,
        }
        self.values = {}
        return point


class TensorBoardCollector:
    """Every `*tfevents*` file under the roots, found as it appears."""

    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self.files: dict[Path, _EventFile] = {}
        self._discover()
        for events in self.files.values():  # an earlier attempt's events are not read again
            events.offset = events.path.stat().st_size

    def _discover(self) -> None:
        for root in self.roots:
            for folder, _dirs, names in os.walk(root):
                for name in names:
                    path = Path(folder) / name
                    if "tfevents" in name and path not in self.files and not path.is_symlink():
                        relative = Path(folder).relative_to(root)
                        group = relative.name or "default"
                        self.files[path] = _EventFile(path, group)

    def poll(self, final: bool = False) -> list[dict[str, Any]]:
        self._discover()
        points = []
        for events in self.files.values():
            try:
                points += events.poll(final)
            except OSError:
                continue
        return points
