"""The exception tree of Loom.

    LoomError                    root of every error Loom raises on purpose
    ├── InvalidInput             the caller sent something wrong (HTTP 400)
    │   ├── ManifestError        C101: the manifest is invalid; names the field and the value
    │   └── ArchiveError         C102: the model definition archive is corrupt or unsafe
    ├── PayloadTooLarge          an upload exceeds the configured limit (HTTP 413)
    ├── TooManyRequests          over a rate limit or a cap; `retry_after` seconds (HTTP 429)
    ├── NotFound                 no such object, or not yours (HTTP 404)
    ├── Unauthorized             no or bad credentials (HTTP 401)
    ├── Forbidden                authenticated but not allowed (HTTP 403)
    ├── Conflict                 the object is in a state that does not allow it (HTTP 409)
    │   └── AlreadyExists        a name that must be unique is taken
    ├── ConfigError              a setting is unusable: the server refuses to start
    └── PlatformError            something on the platform's side failed
        ├── LaunchError          a launcher could not start or reach learners
        ├── StorageError         a data store or the artifact store failed
        └── SecretKeyError       the keys that seal stored credentials are missing or wrong

User-code failures are not exceptions here: a learner's non-zero exit is a job outcome (C201).
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """FfDL's error codes, kept with their meaning; C* are the client's, S* the platform's."""

    INVALID_MANIFEST = "C101"
    INVALID_ZIP = "C102"
    ENVIRONMENT_FAILED = "C103"  # Loom's: the job's environment could not be built
    LEARNER_FAILED = "C201"
    MEMORY_EXCEEDED = "C202"  # Loom's: a learner went over its manifest `memory`
    STORAGE_EXCEEDED = "C203"  # Loom's: a learner wrote more than its manifest `storage`
    INSUFFICIENT_RESOURCES = "S100"
    INTERNAL = "S101"
    LEARNER_LOST = "S200"
    LOAD_MODEL = "S301"
    LOAD_DATA = "S302"
    STORE_RESULTS = "S303"


class LoomError(Exception):
    """Root of Loom's errors; `code` is an FfDL error code where one applies."""

    code: ErrorCode | None = None

    def __init__(self, message: str, *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


# PostgreSQL's text holds no NUL: what a request must not carry, said the same way everywhere.
NUL_WHY = "contains a NUL character (\\0), which Loom cannot store; remove it"


class InvalidInput(LoomError):
    """The caller sent something wrong; `field`, when known, names what."""

    def __init__(self, message: str, *, field: str = "", code: ErrorCode | None = None) -> None:
        super().__init__(message, code=code)
        self.field = field


class ManifestError(InvalidInput):
    """The manifest is invalid; `field` is the dotted path of the first bad field."""

    code = ErrorCode.INVALID_MANIFEST

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message, field=field)


class ArchiveError(InvalidInput):
    """The model definition archive is corrupt, empty or unsafe."""

    code = ErrorCode.INVALID_ZIP


class PayloadTooLarge(LoomError):
    """An upload exceeds the configured limit."""


class TooManyRequests(LoomError):
    """Over a rate limit (`retry_after`: seconds until a retry can succeed) or a count cap
    (`retry_after` None: it succeeds once the caller has fewer of the things counted)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class NotFound(LoomError):
    """No such object, or one the caller may not see."""


class Unauthorized(LoomError):
    """Missing or invalid credentials."""


class Forbidden(LoomError):
    """The caller is known but not allowed to do this."""


class Conflict(LoomError):
    """The object's current state does not allow the request."""


class AlreadyExists(Conflict):
    """A name that must be unique (a project's, a registered model's) is taken already."""


class ConfigError(LoomError):
    """A setting is unusable; the message says which, why, and what would do."""


class PlatformError(LoomError):
    """A failure on the platform's side, not the user's."""

    code = ErrorCode.INTERNAL


class LaunchError(PlatformError):
    """A launcher could not start, stop or reach learners."""


class StorageError(PlatformError):
    """A data store or the artifact store failed."""


class SecretKeyError(PlatformError):
    """The keys that seal stored credentials are missing, malformed, or do not open them."""
