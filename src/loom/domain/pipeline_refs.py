"""`${{ … }}` references in a pipeline's steps, and its `when:` conditions.

A string that is exactly one reference takes the value's type; inside a longer string the value
is written in. `${{ a || b }}` is the first of its alternatives that names a value (not null):
the output of whichever branch of a condition ran. A condition is the references' values written
in as Python literals, then read as a Python expression of which only comparisons,
`and`/`or`/`not`, parentheses and literals are evaluated: no names, calls, attributes or
subscripts.
"""

from __future__ import annotations

import ast
import json
import operator
import re
from collections.abc import Callable, Iterator
from typing import Any

from loom.domain.errors import ManifestError

REFERENCE = re.compile(r"\$\{\{\s*([^{}]*?)\s*\}\}")
ROOTS = ("parameters", "item", "run", "steps")
RUN_KEYS = ("id", "name", "state")  # state: how the run's steps (its exit handler's aside) end
STEP_FACTS = ("state", "message")  # `steps.NAME.state`: how a step ended, and why
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$")

Resolver = Callable[[str], Any]


class UnresolvedReference(ManifestError):
    """A reference that names nothing, or a value that cannot be used where it is."""


def alternatives(inner: str) -> list[str]:
    """The paths of one reference: `a || b` is two."""
    return [part.strip() for part in inner.split("||")]


def references(value: Any) -> Iterator[str]:
    """Every reference path in a value (strings inside mappings and lists, keys excepted; each
    alternative of `a || b` apart)."""
    if isinstance(value, str):
        for inner in REFERENCE.findall(value):
            yield from alternatives(inner)
    elif isinstance(value, dict):
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


def check_path(path: str, where: str) -> list[str]:
    """The parts of a well-formed reference path, or a refusal naming the field."""
    if not _PATH.fullmatch(path):
        raise ManifestError(f"{where}: `${{{{ {path} }}}}` is not a reference", field=where)
    parts = path.split(".")
    if parts[0] not in ROOTS:
        raise ManifestError(
            f"{where}: `${{{{ {path} }}}}`: a reference starts with {', '.join(ROOTS)}",
            field=where,
        )
    if parts[0] == "steps" and not _step_path(parts):
        raise ManifestError(
            f"{where}: `${{{{ {path} }}}}`: a step's values are `steps.NAME.outputs.KEY`, "
            "`steps.NAME.state` and `steps.NAME.message`",
            field=where,
        )
    if parts[0] == "run" and (len(parts) != 2 or parts[1] not in RUN_KEYS):
        raise ManifestError(
            f"{where}: `${{{{ {path} }}}}`: a run has {', '.join(RUN_KEYS)}", field=where
        )
    if parts[0] == "parameters" and len(parts) < 2:
        raise ManifestError(f"{where}: `${{{{ {path} }}}}` names no parameter", field=where)
    return parts


def _step_path(parts: list[str]) -> bool:
    if len(parts) == 3 and parts[2] in STEP_FACTS:
        return True
    return len(parts) >= 3 and parts[2] == "outputs"


def as_text(value: Any) -> str:
    """A value written into a longer string: text as itself, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


def first(inner: str, resolve: Resolver) -> Any:
    """The value of one reference: its first alternative that resolves to a value other than
    null (null if the last one is; the last one's refusal if none resolves)."""
    paths = alternatives(inner)
    for path in paths[:-1]:
        try:
            found = resolve(path)
        except UnresolvedReference:
            continue
        if found is not None:
            return found
    return resolve(paths[-1])


def render(value: Any, resolve: Resolver) -> Any:
    """The value with its references replaced (mappings and lists walked, keys kept)."""
    if isinstance(value, str):
        whole = REFERENCE.fullmatch(value.strip())
        if whole is not None:
            return first(whole.group(1), resolve)
        return REFERENCE.sub(lambda m: as_text(first(m.group(1), resolve)), value)
    if isinstance(value, dict):
        return {key: render(item, resolve) for key, item in value.items()}
    if isinstance(value, list):
        return [render(item, resolve) for item in value]
    return value


def walk(found: Any, parts: list[str], path: str) -> Any:
    """`found` followed along `parts` (keys of mappings, indexes of lists). A key that is not
    an index is followed in each item of a list: a fan-out's `outputs.values.x` is the list of
    each item's `x`."""
    for depth, part in enumerate(parts):
        if isinstance(found, dict) and part in found:
            found = found[part]
        elif isinstance(found, list) and part.isdigit() and int(part) < len(found):
            found = found[int(part)]
        elif isinstance(found, list) and not part.isdigit():
            return [walk(each, parts[depth:], path) for each in found]
        else:
            at = ".".join(parts[: depth + 1])
            have = ", ".join(sorted(map(str, found))) if isinstance(found, dict) else ""
            said = f" (it has: {have})" if have else ""
            raise UnresolvedReference(f"`${{{{ {path} }}}}`: nothing at {at}{said}")
    return found


# -- conditions --------------------------------------------------------------------------------
_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_WORDS = {"true": True, "false": False, "True": True, "False": False, "null": None, "None": None}


def check_condition(expression: str, where: str) -> None:
    """Refuses a condition that is not one (every reference stands for 0 here)."""
    _tree(REFERENCE.sub("0", expression), where)


def condition(expression: str, resolve: Resolver, where: str = "when") -> bool:
    """The condition's truth with the references' values."""
    text = REFERENCE.sub(lambda m: repr(_literal(first(m.group(1), resolve))), expression)
    try:
        return bool(_evaluate(_tree(text, where).body))
    except TypeError as exc:
        raise UnresolvedReference(f"{where}: `{expression}` cannot be evaluated: {exc}") from None


def _literal(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_literal(v) for v in value]
    return str(value)


def _tree(text: str, where: str) -> ast.Expression:
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ManifestError(
            f"{where}: `{text}` is not a condition: {exc.msg}", field=where
        ) from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            what = type(node).__name__
            raise ManifestError(
                f"{where}: `{text}`: {what} is not allowed in a condition (only comparisons, "
                "and, or, not, parentheses and literals)",
                field=where,
            )
        if isinstance(node, ast.Name) and node.id not in _WORDS:
            raise ManifestError(
                f"{where}: `{text}`: `{node.id}` is not a value; write a reference "
                "`${{ … }}` or quote the text",
                field=where,
            )
    return tree


_ALLOWED = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.Compare,
    ast.Constant,
    ast.List,
    ast.Tuple,
    ast.Name,
    ast.Load,
    *_COMPARE,
)


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return _WORDS[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_evaluate(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand)
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(v) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    assert isinstance(node, ast.Compare)
    left = _evaluate(node.left)
    for op, comparator in zip(node.ops, node.comparators, strict=True):
        right = _evaluate(comparator)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True
