"""A graph's gateway: its endpoint answers through the graph's router (`graph_router`), which
calls the steps' deployments through their own gateways — each one's internal socket,
`FOLDER/internal/gateway.sock`, in a folder only the platform's user can enter. No token is
needed there and none is carried: the caller's credentials stop at the graph's gateway, as at
any gateway, and a graph only names deployments of its own owner (checked when it is made).

The graph's request goes to each step in the protocol the caller spoke: `/v1/models/G:predict`
(and `POST /`, as KServe's graphs take it) to each deployment's `:predict`,
`/v2/models/G/infer` to its `infer`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from loom.serving.http1 import Message, MessageReader, encode_request

INTERNAL = "internal"  # a gateway's own folder for the internal socket (mode 0700)
SOCKET = f"{INTERNAL}/gateway.sock"
LINKS = "members"  # a graph's links to its members' internal folders, by deployment name
MAX_ANSWER = 64 * 2**20


def internal_socket(folder: Path) -> str:
    """The internal socket's path, relative to the gateway's folder (its working directory),
    its folder made private first and emptied of an earlier gateway's socket."""
    internal = folder / INTERNAL
    internal.mkdir(mode=0o700, exist_ok=True)
    internal.chmod(0o700)
    (folder / SOCKET).unlink(missing_ok=True)
    return SOCKET


def link_members(folder: Path, members: dict[str, str]) -> None:
    """`members/<name>` → each member's internal folder: short relative socket paths however
    deep the platform's home is (a socket's path is at most 108 bytes)."""
    links = folder / LINKS
    links.mkdir(mode=0o700, exist_ok=True)
    for old in links.iterdir():
        old.unlink()
    for name, member in members.items():
        os.symlink(Path(member) / INTERNAL, links / name)


def member_path(target: str, member: str) -> bytes | None:
    """The path a step's deployment is called on for the graph's request `target`."""
    path = target.split("?", 1)[0]
    if path == "/" or (path.startswith("/v1/models/") and path.endswith(":predict")):
        return f"/v1/models/{member}:predict".encode()
    if path.startswith("/v1/models/") and path.endswith(":explain"):
        return f"/v1/models/{member}:explain".encode()
    if path.startswith("/v2/models/") and path.endswith("/infer"):
        return f"/v2/models/{member}/infer".encode()
    return None


async def call_member(
    member: str, path: bytes, body: bytes, headers: list[tuple[bytes, bytes]]
) -> tuple[int, bytes]:
    """One call of a member deployment through its gateway's internal socket."""
    try:
        reader, writer = await asyncio.open_unix_connection(
            f"{LINKS}/{member}/gateway.sock", limit=2**20
        )
    except OSError:
        return 502, b'{"error": "deployment ' + member.encode() + b' is not running"}'
    try:
        sent = [(k, v) for k, v in headers if k not in (b"content-type", b"host")]
        request = Message([b"POST", path], [*sent, (b"content-type", b"application/json"),
                                            (b"host", b"graph")], body)  # fmt: skip
        writer.write(encode_request(request))
        await writer.drain()
        answer = await MessageReader(reader, max_body=MAX_ANSWER).next()
        if answer is None:
            return 502, b'{"error": "deployment ' + member.encode() + b' closed the call"}'
        return answer.status, answer.body
    finally:
        with contextlib.suppress(Exception):
            writer.close()
