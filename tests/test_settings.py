"""The one Settings object: the URL learners and the CLI use to reach the API."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from loom.settings import Settings


def test_api_url_is_loopback_when_listening_everywhere() -> None:
    """A server bound to every address is reached on loopback; a public URL wins."""
    assert Settings(host="0.0.0.0", port=9000).api_url == "http://127.0.0.1:9000"
    assert Settings(host="10.1.2.3", port=9000).api_url == "http://10.1.2.3:9000"
    assert Settings(public_url="https://loom.example").api_url == "https://loom.example"


def test_tls_settings() -> None:
    """With a certificate the API URL is https and the pair is absolute; a key alone is an
    error that names both settings."""
    tls = Settings(port=9000, tls_certfile="c.pem", tls_keyfile="k.pem")
    assert tls.api_url == "https://127.0.0.1:9000"
    assert tls.tls is not None and all(path.is_absolute() for path in tls.tls)
    cert, key = Settings(tls_certfile="both.pem").tls or ("", "")
    assert cert == key  # a PEM with both
    with pytest.raises(ValidationError, match="LOOM_TLS_CERTFILE"):
        Settings(tls_keyfile="k.pem")


def test_token_lifetime_reads_never_as_no_expiry(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOM_TOKEN_TTL_DAYS is 90 by default, a number of days if set, and `never` for none."""
    assert Settings().token_ttl_days == 90
    monkeypatch.setenv("LOOM_TOKEN_TTL_DAYS", "7.5")
    assert Settings().token_ttl_days == 7.5
    monkeypatch.setenv("LOOM_TOKEN_TTL_DAYS", "never")
    assert Settings().token_ttl_days is None
    monkeypatch.setenv("LOOM_TOKEN_TTL_DAYS", "0")
    with pytest.raises(ValueError, match="token_ttl_days"):
        Settings()


def test_learner_env_never_passes_platform_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """LOOM_LEARNER_ENV takes plain names; one of the platform's own settings is refused."""
    monkeypatch.setenv("LOOM_LEARNER_ENV", "NCCL_DEBUG,HTTP_PROXY")
    assert Settings().learner_env == ["NCCL_DEBUG", "HTTP_PROXY"]
    monkeypatch.setenv("LOOM_LEARNER_ENV", "NCCL_DEBUG,LOOM_SECRET_KEYS")
    with pytest.raises(ValueError, match="LOOM_SECRET_KEYS"):
        Settings()
