"""The keys that seal credentials at rest: `LOOM_SECRET_KEYS`, else the file `LOOM_HOME/secret.key`.

Fernet from `cryptography` (AES-CBC with HMAC-SHA256: authenticated), several keys through
MultiFernet: the first seals, every one opens. Rotating puts a new key first, reseals every stored
credential with it (`loom.store.sealed.rotate`), then drops the old ones. Only a key file is
rotated here; keys from the environment are the admin's to change.
"""

from __future__ import annotations

import threading
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from loom.domain.errors import SecretKeyError
from loom.store.private import write_private

ENV = "LOOM_SECRET_KEYS"
_HEADER = (
    "# Loom's secret keys, one a line: the first seals stored credentials, each one opens them.\n"
    "# Keep a copy apart from loom.db: without this file, they cannot be opened.\n"
)
_FORMAT = "a Fernet key is 32 random bytes in URL-safe base64, 44 characters (`loom admin new-key`)"


class SecretKeys:
    """Seals and opens bytes with the current key; opens with any of the keys."""

    def __init__(self, keys: list[bytes], *, file: Path | None = None) -> None:
        self.file = file
        self.rotation = threading.Lock()
        self._use(keys)

    @classmethod
    def ephemeral(cls) -> SecretKeys:
        """A key of its own, in memory only: for a lifecycle built without a platform."""
        return cls([Fernet.generate_key()])

    @property
    def source(self) -> str:
        """Where the keys come from, as an admin would name it."""
        return str(self.file) if self.file is not None else ENV

    @property
    def count(self) -> int:
        return len(self._keys)

    def seal(self, data: bytes) -> str:
        return self._fernet.encrypt(data).decode()

    def open(self, token: str) -> bytes:
        try:
            return self._fernet.decrypt(token.encode())
        except InvalidToken as exc:
            raise SecretKeyError(f"no key in {self.source} opens it") from exc

    def opens(self, token: str) -> bool:
        try:
            self._fernet.decrypt(token.encode())
        except InvalidToken:
            return False
        return True

    def current_opens(self, token: str) -> bool:
        try:
            Fernet(self._keys[0]).decrypt(token.encode())
        except InvalidToken:
            return False
        return True

    def reseal(self, token: str) -> str:
        """The same secret sealed with the current key."""
        try:
            return self._fernet.rotate(token.encode()).decode()
        except InvalidToken as exc:
            raise SecretKeyError(f"no key in {self.source} opens it") from exc

    def add_current(self) -> None:
        """A key file gets a new current key; the old ones stay, to open what they sealed."""
        if self.file is not None:
            self._save([Fernet.generate_key(), *self._keys])

    def drop_old(self) -> None:
        """A key file keeps only its current key."""
        if self.file is not None:
            self._save(self._keys[:1])

    def _save(self, keys: list[bytes]) -> None:
        assert self.file is not None
        write_private(self.file, (_HEADER + b"\n".join(keys).decode() + "\n").encode())
        self._use(keys)

    def _use(self, keys: list[bytes]) -> None:
        self._fernet = MultiFernet([Fernet(k) for k in keys])
        self._keys = keys


def load_keys(env: str | None, file: Path, *, sealed_jobs: int) -> SecretKeys:
    """The keys from `env` if set, else from `file`, created if no job's credentials need it."""
    if env is not None:
        return SecretKeys(_parse(env.replace(",", "\n"), ENV))
    if file.exists():
        return SecretKeys(_parse(_read(file), str(file)), file=file)
    if sealed_jobs:
        raise SecretKeyError(
            f"the key file {file} is missing, and the database holds the sealed credentials of "
            f"{sealed_jobs} job(s): restore the file from a backup, or set {ENV} to the key that "
            "sealed them (a new key would not open them)"
        )
    keys = SecretKeys([Fernet.generate_key()], file=file)
    keys.drop_old()  # writes the file with its one key
    return keys


def _read(file: Path) -> str:
    try:
        return file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SecretKeyError(f"the key file {file} cannot be read: {exc}") from exc


def _parse(text: str, source: str) -> list[bytes]:
    lines = [line.strip() for line in text.splitlines()]
    keys = [line for line in lines if line and not line.startswith("#")]
    if not keys:
        raise SecretKeyError(f"{source} holds no key; {_FORMAT}")
    return [_key(key, f"{source}: key {n}") for n, key in enumerate(keys, 1)]


def _key(text: str, where: str) -> bytes:
    try:
        Fernet(text.encode())
    except ValueError as exc:  # never the key itself in the message
        raise SecretKeyError(f"{where} is not a Fernet key; {_FORMAT}") from exc
    return text.encode()
