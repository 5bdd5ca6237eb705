"""The conditions of an inference graph's steps, in the GJSON path syntax KServe's router
evaluates: a condition holds when its path finds something in the JSON document.

The subset read here, refused with the reason otherwise (never guessed at):
- keys and array indexes joined by dots (`predictions.0`, a dot in a key escaped `a\\.b`);
- `#`, an array's length, and `#.key`, that key of every element;
- queries on an array's elements: `#(key op value)` (the first that matches) and
  `#(key op value)#` (every one), with `==`, `!=`, `<`, `<=`, `>`, `>=`, `%` (a `*`/`?`
  pattern) and `!%`, a JSON value on the right (number, "string", true, false, null); the key
  may be a path itself or empty (`#(>0.5)`: the element), and `#(key)` asks that it exists.

Pure: no I/O, no third-party code.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Any

OPERATORS = ("==", "!=", "<=", ">=", "!%", "<", ">", "%")
_MISSING = object()


class BadCondition(ValueError):
    """A condition this router cannot evaluate; the message says which part."""


@dataclass(frozen=True)
class Query:
    path: list[Any]
    operator: str | None
    value: Any
    every: bool


def parse(condition: str) -> list[Any]:
    """The condition as steps: a key (str), an index (int), `#`, or a `Query`."""
    if not condition or len(condition) > 500:
        raise BadCondition("a condition is a GJSON path of 1 to 500 characters")
    steps: list[Any] = []
    for part in _split(condition):
        steps.append(_step(part))
    return steps


def exists(document: Any, condition: str | list[Any]) -> bool:
    """Whether the path finds something in `document` (GJSON's `Exists()`)."""
    steps = parse(condition) if isinstance(condition, str) else condition
    return _walk(document, steps) is not _MISSING


def _split(text: str) -> list[str]:
    """The path's parts at unescaped dots outside a query's parentheses."""
    parts, current, depth, escaped = [], "", 0, False
    for char in text:
        if escaped:
            current += char
            escaped = False
        elif char == "\\":
            current += char
            escaped = True
        elif char == "(":
            depth += 1
            current += char
        elif char == ")":
            depth -= 1
            current += char
        elif char == "." and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    if depth != 0:
        raise BadCondition(f"unbalanced parentheses in {text!r}")
    parts.append(current)
    if any(part == "" for part in parts):
        raise BadCondition(f"an empty part in {text!r}")
    return parts


def _step(part: str) -> Any:
    if part == "#":
        return "#"
    if part.startswith("#("):
        every = part.endswith(")#")
        inner = part[2 : -2 if every else -1]
        if not part.endswith(")") and not every:
            raise BadCondition(f"a query is #(…) or #(…)#, got {part!r}")
        return _query(inner, every)
    if part.startswith("@") or any(c in part for c in '*?|!{}[]=<>%"'):
        raise BadCondition(f"{part!r}: wildcards, modifiers and multipaths are not supported")
    key = part.replace("\\.", ".").replace("\\\\", "\\")
    return int(key) if key.isdecimal() else key


def _query(text: str, every: bool) -> Query:
    for operator in OPERATORS:
        at = _find_operator(text, operator)
        if at >= 0:
            left, right = text[:at].strip(), text[at + len(operator) :].strip()
            return Query(parse(left) if left else [], operator, _literal(right), every)
    return Query(parse(text.strip()), None, None, every)


def _find_operator(text: str, operator: str) -> int:
    """Where `operator` stands outside a quoted string, or -1."""
    quoted = False
    for at in range(len(text)):
        if text[at] == '"' and (at == 0 or text[at - 1] != "\\"):
            quoted = not quoted
        if not quoted and text.startswith(operator, at):
            return at
    return -1


def _literal(text: str) -> Any:
    if re.fullmatch(r"-?\d+(\.\d+)?([eE][-+]?\d+)?", text) or text in ("true", "false", "null"):
        return json.loads(text)
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return json.loads(text)
    raise BadCondition(f"{text!r}: the right side of a query is a JSON number, string or literal")


def _walk(value: Any, steps: list[Any]) -> Any:
    for index, step in enumerate(steps):
        if step == "#":
            if not isinstance(value, list):
                return _MISSING
            rest = steps[index + 1 :]
            if not rest:
                return len(value)
            found = [v for v in (_walk(item, rest) for item in value) if v is not _MISSING]
            return found if found else _MISSING
        if isinstance(step, Query):
            value = _select(value, step)
        elif isinstance(step, int) and isinstance(value, list):
            value = value[step] if step < len(value) else _MISSING
        elif isinstance(value, dict):
            value = value.get(str(step), _MISSING)
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value


def _select(value: Any, query: Query) -> Any:
    if not isinstance(value, list):
        return _MISSING
    matched = [item for item in value if _matches(item, query)]
    if query.every:
        return matched if matched else _MISSING
    return matched[0] if matched else _MISSING


def _matches(item: Any, query: Query) -> bool:
    found = _walk(item, query.path) if query.path else item
    if found is _MISSING:
        return False
    if query.operator is None:
        return True
    want = query.value
    if query.operator in ("%", "!%"):
        hit = isinstance(found, str) and fnmatch.fnmatchcase(found, str(want))
        return hit if query.operator == "%" else not hit
    if query.operator == "==":
        return bool(found == want)
    if query.operator == "!=":
        return bool(found != want)
    return _compare(found, want, query.operator)


def _compare(left: Any, right: Any, operator: str) -> bool:
    numbers = (int, float)
    same = (
        isinstance(left, numbers) and isinstance(right, numbers) and not isinstance(left, bool)
    ) or (isinstance(left, str) and isinstance(right, str))
    if not same:
        return False
    if operator == "<":
        return bool(left < right)
    if operator == "<=":
        return bool(left <= right)
    if operator == ">":
        return bool(left > right)
    return bool(left >= right)
