"""The client's one error."""

from __future__ import annotations

from loom.domain.errors import LoomError


class ClientError(LoomError):
    """The platform answered with an error, or could not be reached, or the client's own
    configuration (a context) is wrong."""

    def __init__(self, message: str, status: int = 0, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = code
