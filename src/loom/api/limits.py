"""A request body limit that holds for chunked uploads too: 413 once the limit is passed.

Uploads (multipart) may be large; any other body (a learner's batch too) is JSON that the
framework parses, so it gets the smaller `json_bytes`. A learner's upload of its
checkpoints or results (a PUT under /v1/learner/) gets `learner_upload_bytes`; a PUT under one of
`upload_prefixes` (a dialect's file uploads, such as MLflow's artifacts) is an upload too."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from loom.domain.errors import PayloadTooLarge


class BodyLimit:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        json_bytes: int | None = None,
        learner_upload_bytes: int | None = None,
        upload_prefixes: tuple[str, ...] = (),
    ) -> None:
        self.app = app
        self.upload_prefixes = upload_prefixes
        self.max_bytes = max_bytes
        self.json_bytes = max_bytes if json_bytes is None else json_bytes
        self.learner_upload_bytes = learner_upload_bytes or max_bytes

    def _limit(self, scope: Scope, headers: dict[bytes, bytes]) -> int:
        upload = headers.get(b"content-type", b"").startswith(b"multipart/") or (
            scope.get("method") == "PUT" and scope["path"].startswith(self.upload_prefixes)
        )
        if scope["path"].startswith("/v1/learner/") and scope.get("method") == "PUT":
            return self.learner_upload_bytes
        if upload:
            return self.max_bytes
        # A learner's batch too: its shipper keeps batches to a few MiB (one transaction each).
        return self.json_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        limit = self._limit(scope, headers)
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await self._reject(send, limit)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit:
                raise PayloadTooLarge(self._message(limit))
            return message

        await self.app(scope, counted, send)

    @staticmethod
    def _message(limit: int) -> str:
        return f"request body is larger than the limit of {limit // 2**20} MiB"

    async def _reject(self, send: Send, limit: int) -> None:
        body = json.dumps({"error": self._message(limit)}).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
