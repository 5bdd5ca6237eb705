"""KFP's list calls over objects in KFP's JSON shape (pure): `filter` (a JSON-encoded Filter
of predicates), `sort_by` ("created_at desc") and paging by `page_token` and `page_size`.

A page token is the offset of the next page: the listings are small (one user's), and a token
that is not one is refused, as is a key or an operation this does not know.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from loom.domain.errors import InvalidInput

DEFAULT_PAGE = 20
MAX_PAGE = 200
_OPERATIONS: dict[str, Callable[[Any, Any], bool]] = {
    "EQUALS": lambda a, b: a == b,
    "NOT_EQUALS": lambda a, b: a != b,
    "GREATER_THAN": lambda a, b: a is not None and a > b,
    "GREATER_THAN_EQUALS": lambda a, b: a is not None and a >= b,
    "LESS_THAN": lambda a, b: a is not None and a < b,
    "LESS_THAN_EQUALS": lambda a, b: a is not None and a <= b,
    "IN": lambda a, b: a in b,
    "IS_SUBSTRING": lambda a, b: isinstance(a, str) and str(b) in a,
}
# The Filter proto's operations by number, as the SDK sends them.
_NUMBERED = {
    1: "EQUALS",
    2: "NOT_EQUALS",
    3: "GREATER_THAN",
    5: "GREATER_THAN_EQUALS",
    6: "LESS_THAN",
    7: "LESS_THAN_EQUALS",
    8: "IN",
    9: "IS_SUBSTRING",
}
# The SDK's own aliases for the keys it filters on.
_KEYS = {"name": "display_name", "run_id": "run_id", "id": "id"}


def page(
    objects: list[dict[str, Any]],
    *,
    filter_json: str | None,
    sort_by: str | None,
    page_token: str | None,
    page_size: int | None,
    keys: tuple[str, ...],
) -> tuple[list[dict[str, Any]], int, str]:
    """The objects that pass the filter, sorted, one page of them: (page, total, next token)."""
    chosen = [o for o in objects if _passes(o, _predicates(filter_json, keys))]
    chosen = _sorted(chosen, sort_by, keys)
    start = _offset(page_token)
    size = page_size or DEFAULT_PAGE
    if not 1 <= size <= MAX_PAGE:
        raise InvalidInput(f"page_size: 1 to {MAX_PAGE}, got {size}", field="page_size")
    end = start + size
    return chosen[start:end], len(chosen), str(end) if end < len(chosen) else ""


def _offset(token: str | None) -> int:
    if not token:
        return 0
    if not token.isdecimal() or len(token) > 9:
        raise InvalidInput(
            f"page_token: {token!r} is not a token this server gave", field="page_token"
        )
    return int(token)


def _predicates(text: str | None, keys: tuple[str, ...]) -> list[tuple[str, str, Any]]:
    if not text:
        return []
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"filter: not JSON: {exc}", field="filter") from None
    predicates = found.get("predicates") if isinstance(found, dict) else None
    if not isinstance(predicates, list):
        raise InvalidInput("filter: a JSON object with `predicates`", field="filter")
    return [_predicate(p, index, keys) for index, p in enumerate(predicates)]


def _predicate(given: Any, index: int, keys: tuple[str, ...]) -> tuple[str, str, Any]:
    where = f"filter.predicates[{index}]"
    if not isinstance(given, dict):
        raise InvalidInput(f"{where}: a predicate is an object", field=where)
    key = _KEYS.get(str(given.get("key")), str(given.get("key")))
    if key not in keys:
        raise InvalidInput(
            f"{where}.key: {given.get('key')!r} is not one of {', '.join(keys)}",
            field=f"{where}.key",
        )
    operation = given.get("operation") or given.get("op") or ""
    operation = (
        _NUMBERED.get(operation, str(operation)) if isinstance(operation, int) else str(operation)
    )
    if operation not in _OPERATIONS:
        raise InvalidInput(
            f"{where}.operation: {operation!r} is not one of {', '.join(_OPERATIONS)}",
            field=f"{where}.operation",
        )
    return key, operation, _value(given, where)


def _value(given: dict[str, Any], where: str) -> Any:
    for name in (
        "string_value",
        "stringValue",
        "int_value",
        "intValue",
        "long_value",
        "longValue",
        "timestamp_value",
        "timestampValue",
        "bool_value",
        "boolValue",
    ):
        if name in given:
            value = given[name]
            return int(value) if ("int" in name.lower() or "long" in name.lower()) else value
    for name in (
        "string_values",
        "stringValues",
        "int_values",
        "intValues",
        "long_values",
        "longValues",
    ):
        if name in given:
            listed = given[name]
            return list(listed.get("values") or []) if isinstance(listed, dict) else list(listed)
    raise InvalidInput(
        f"{where}: a predicate needs a value (string_value, int_value, …)", field=where
    )


def _passes(found: dict[str, Any], predicates: list[tuple[str, str, Any]]) -> bool:
    return all(
        _OPERATIONS[operation](found.get(key), value) for key, operation, value in predicates
    )


def _sorted(
    objects: list[dict[str, Any]], sort_by: str | None, keys: tuple[str, ...]
) -> list[dict[str, Any]]:
    """By `key [desc]` ("created_at desc"); newest first when not said. The objects come
    oldest first: among equal keys (times are to the second) their order decides, reversed
    with the rest."""
    key, descending = "created_at", True
    if sort_by:
        words = sort_by.replace(",", " ").split()
        key = _KEYS.get(words[0], words[0])
        if key not in keys:
            raise InvalidInput(
                f"sort_by: {words[0]!r} is not one of {', '.join(keys)}", field="sort_by"
            )
        descending = len(words) > 1 and words[1].lower() == "desc"
    ranked = sorted(
        enumerate(objects), key=lambda p: (str(p[1].get(key) or ""), p[0]), reverse=descending
    )
    return [found for _, found in ranked]
