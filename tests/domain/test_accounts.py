"""Account rules as pure functions: weak admin tokens, token lifetimes, maximum priority."""

from __future__ import annotations

import secrets

import pytest

from loom.domain.accounts import (
    DAY_S,
    admin_token_problem,
    check_priority,
    token_expiry,
    weak_secret,
)
from loom.domain.errors import InvalidInput, ManifestError


@pytest.mark.parametrize(
    ("secret", "why"),
    [
        ("deploy-token-1234567890", "23 characters"),
        ("a" * 40, "only repeats a 1-character pattern"),
        ("abc" * 12, "only repeats a 3-character pattern"),
        ("0123456789" * 4, "only repeats a 10-character pattern"),
        ("aabbccddaabbccddaabbccddaabbccdd-", "different characters"),
    ],
)
def test_weak_secrets_are_named_with_the_reason(secret: str, why: str) -> None:
    """Short, repetitive or low-variety secrets are weak, and the reason says which."""
    found = weak_secret(secret)
    assert found is not None and why in found


def test_random_secret_is_strong() -> None:
    """A random token_urlsafe(32) is good enough to be the admin token."""
    assert weak_secret(secrets.token_urlsafe(32)) is None
    assert admin_token_problem(secrets.token_urlsafe(32)) is None


def test_problem_sentence_says_how_to_make_a_good_one() -> None:
    """The refusal names the setting, why, and a command that makes a good token."""
    problem = admin_token_problem("short")
    assert problem is not None
    assert "LOOM_ADMIN_TOKEN" in problem and "5 characters" in problem
    assert "secrets.token_urlsafe(32)" in problem


def test_token_expiry_defaults_and_limits() -> None:
    """A token lasts the default, or less if asked; never longer; None means never."""
    assert token_expiry(1000.0, None, None) is None
    assert token_expiry(1000.0, 90, None) == 1000.0 + 90 * DAY_S
    assert token_expiry(1000.0, 90, 7) == 1000.0 + 7 * DAY_S
    assert token_expiry(1000.0, None, 400) == 1000.0 + 400 * DAY_S
    with pytest.raises(InvalidInput) as caught:
        token_expiry(1000.0, 90, 91)
    assert caught.value.field == "ttl_days" and "91" in caught.value.message


def test_priority_above_maximum_is_refused() -> None:
    """A priority above the maximum names the field, the value and the maximum."""
    check_priority(10, 10)
    with pytest.raises(ManifestError) as caught:
        check_priority(11, 10)
    assert caught.value.field == "priority"
    assert "11" in caught.value.message and "maximum priority of 10" in caught.value.message
