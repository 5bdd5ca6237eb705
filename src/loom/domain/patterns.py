"""FfDL's regex macros for `regex_extractor`: `%{FLOAT:loss}` is a named group matching a float.

Shared by the manifest's validation and the learner's collector; only `re`, so the learner can
import it cheaply.
"""

from __future__ import annotations

import re

MACROS: dict[str, str] = {
    "FLOAT": r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)",
    "INT": r"[-+]?\d+",
    "INT_ANY": r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)",
    "HEX": r"(?:0[xX])?[0-9a-fA-F]+",
    "TIMESTAMP": (r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
    "GLOG_STAMP": r"[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{6}",
}

_MACRO = re.compile(r"%\{(\w+)(?::(\w+))?\}")
_REFERENCE = re.compile(r"^\$(\w+)$")


class PatternError(ValueError):
    """A regex_extractor pattern that cannot be used; the message says why."""


def expand(pattern: str) -> str:
    """The pattern with every `%{NAME}` / `%{NAME:bind}` macro replaced by its regex."""

    def replace(match: re.Match[str]) -> str:
        name, bind = match.group(1), match.group(2)
        if name not in MACROS:
            known = ", ".join(sorted(MACROS))
            raise PatternError(f"unknown macro %{{{name}}}; known macros: {known}")
        body = MACROS[name]
        return f"(?P<{bind}>{body})" if bind else f"(?:{body})"

    return _MACRO.sub(replace, pattern)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Expand and compile, as FfDL did: multi-line, dot matches newlines."""
    try:
        return re.compile(expand(pattern), re.MULTILINE | re.DOTALL)
    except re.error as exc:
        raise PatternError(f"is not a valid regular expression: {exc}") from exc


def reference(value: str) -> str | None:
    """`$loss` → `loss`; a literal → None."""
    match = _REFERENCE.match(value.strip())
    return match.group(1) if match else None
