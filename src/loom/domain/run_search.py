"""MLflow's search grammar, for runs, projects (MLflow's experiments) and registered models:

    metrics.loss < 0.5 and params.lr = '0.1' and tags.team LIKE 'vision%'
    and attributes.status = 'FINISHED' and run_id IN ('a', 'b') and tags.note IS NULL

Comparisons joined by AND (MLflow has no OR), each `[entity.]key operator value`. A key with
characters other than letters, digits, `_` and `.` is quoted with backticks or double quotes
(metrics.`f1 score`). `order_by` items are `[entity.]key [ASC|DESC]`. The parser is pure and
answers `InvalidInput` naming what it could not read; a `Schema` says which entities, keys and
operators each kind of search allows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from loom.domain.errors import InvalidInput

Value = str | float | int | tuple[str, ...] | None

ENTITIES = {
    "metric": "metric",
    "metrics": "metric",
    "param": "param",
    "params": "param",
    "parameter": "param",
    "parameters": "param",
    "tag": "tag",
    "tags": "tag",
    "attribute": "attribute",
    "attributes": "attribute",
    "attr": "attribute",
    "run": "attribute",
    "dataset": "dataset",
    "datasets": "dataset",
}
NUMERIC_OPS = frozenset({"=", "!=", "<", "<=", ">", ">="})
STRING_OPS = frozenset({"=", "!=", "LIKE", "ILIKE"})
NULL_OPS = frozenset({"IS NULL", "IS NOT NULL"})
LIST_OPS = frozenset({"IN", "NOT IN"})


@dataclass(frozen=True)
class Clause:
    """One comparison: `kind` is metric, param, tag or attribute; `value` a string, a number,
    a tuple of strings (IN) or None (IS NULL)."""

    kind: str
    key: str
    op: str
    value: Value


@dataclass(frozen=True)
class OrderKey:
    kind: str
    key: str
    ascending: bool = True


@dataclass(frozen=True)
class Schema:
    """What one kind of search accepts: attribute keys (with their aliases) that are numbers or
    strings, which of them take IN lists, and the entities besides attributes."""

    what: str
    numeric: frozenset[str]
    strings: frozenset[str]
    entities: frozenset[str] = frozenset()
    lists: frozenset[str] = frozenset()
    aliases: Mapping[str, str] | None = None
    orderable: frozenset[str] | None = None

    def attribute(self, key: str) -> str:
        key = (self.aliases or {}).get(key, key)
        if key not in self.numeric | self.strings:
            known = ", ".join(sorted(self.numeric | self.strings))
            raise InvalidInput(
                f"filter: {self.what} have no attribute {key!r}; they have {known}", field="filter"
            )
        return key


RUNS = Schema(
    "runs",
    numeric=frozenset({"start_time", "end_time"}),
    strings=frozenset({"run_id", "run_name", "status", "user_id", "artifact_uri"}),
    entities=frozenset({"metric", "param", "tag", "dataset"}),
    lists=frozenset({"run_id"}),
    aliases={
        "created": "start_time",
        "Created": "start_time",
        "run name": "run_name",
        "Run name": "run_name",
        "Run Name": "run_name",
    },
)
PROJECTS = Schema(
    "experiments",
    numeric=frozenset({"creation_time", "last_update_time"}),
    strings=frozenset({"name", "experiment_id"}),
    entities=frozenset({"tag"}),
    lists=frozenset({"experiment_id"}),
)
MODELS = Schema(
    "registered models",
    numeric=frozenset({"creation_timestamp", "last_updated_timestamp"}),
    strings=frozenset({"name"}),
    entities=frozenset({"tag"}),
    aliases={"timestamp": "creation_timestamp"},
)
VERSIONS = Schema(
    "model versions",
    numeric=frozenset({"version_number", "creation_timestamp", "last_updated_timestamp"}),
    strings=frozenset({"name", "run_id", "source_path", "current_stage"}),
    entities=frozenset({"tag"}),
    lists=frozenset({"run_id"}),
    aliases={"timestamp": "creation_timestamp"},
)
LOGGED_MODELS = Schema(
    "logged models",
    numeric=frozenset({"creation_timestamp", "last_updated_timestamp"}),
    strings=frozenset({"name", "model_id", "model_type", "status", "source_run_id"}),
    entities=frozenset({"metric", "param", "tag"}),
    aliases={"creation_time": "creation_timestamp", "last_updated_time": "last_updated_timestamp"},
)

_TOKEN = re.compile(
    r"""\s*(?:
    (?P<string>'(?:[^']|'')*')
  | (?P<quoted>"(?:[^"]|"")*")
  | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.`"])
  | (?P<op>>=|<=|!=|<>|==|=|<|>)
  | (?P<paren>[(),])
  | (?P<ident>(?:`[^`]*`|"(?:[^"]|"")*"|[\w.:/-])+)
)""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str


def _tokens(text: str, where: str) -> list[_Token]:
    found: list[_Token] = []
    at = 0
    while at < len(text):
        if text[at:].strip() == "":
            break
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            rest = text[at:].strip()[:40]
            raise InvalidInput(f"{where}: cannot read {rest!r} in {text!r}", field=where)
        kind = match.lastgroup or ""
        found.append(_Token(kind, match.group(kind)))
        at = match.end()
    return found


def _unquote(text: str) -> str:
    for quote in ("'", '"', "`"):
        if len(text) >= 2 and text[0] == quote and text[-1] == quote:
            return text[1:-1].replace(quote * 2, quote) if quote != "`" else text[1:-1]
    return text


def _split_identifier(text: str) -> tuple[str, str]:
    """`metrics.loss` → ("metrics", "loss"); `tags.mlflow.runName` → ("tags",
    "mlflow.runName"); `status` → ("", "status"). Quotes and backticks are taken off the key."""
    head, dot, rest = text.partition(".")
    if not dot or head.startswith(("`", '"')):
        return "", _unquote(text)
    return _unquote(head), _unquote(rest)


class _Reader:
    def __init__(self, tokens: list[_Token], where: str, text: str) -> None:
        self.tokens, self.at, self.where, self.text = tokens, 0, where, text

    def peek(self) -> _Token | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self) -> _Token:
        token = self.peek()
        if token is None:
            raise self.error("it ends too soon")
        self.at += 1
        return token

    def word(self, *words: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "ident" and token.text.upper() in words:
            self.at += 1
            return True
        return False

    def error(self, why: str) -> InvalidInput:
        return InvalidInput(f"{self.where}: {why}, in {self.text!r}", field=self.where)


def parse_filter(text: str | None, schema: Schema = RUNS) -> list[Clause]:
    """The comparisons of a filter string (none for an empty one)."""
    if text is None or not text.strip():
        return []
    reader = _Reader(_tokens(text, "filter"), "filter", text)
    clauses = [_comparison(reader, schema)]
    while reader.peek() is not None:
        if not reader.word("AND"):
            found = reader.take().text
            why = "MLflow's filters join comparisons with AND only" if found.upper() == "OR" else ""
            raise reader.error(f"expected AND, got {found!r}" + (f" ({why})" if why else ""))
        clauses.append(_comparison(reader, schema))
    return clauses


def _comparison(reader: _Reader, schema: Schema) -> Clause:
    token = reader.take()
    if token.kind not in ("ident", "quoted"):
        raise reader.error(f"expected a name such as metrics.loss, got {token.text!r}")
    kind, key = _identifier(token.text, schema, reader)
    op = _operator(reader)
    if op in NULL_OPS:
        if kind not in ("param", "tag"):
            raise reader.error(f"{op} is for params and tags, not {kind} {key!r}")
        return Clause(kind, key, op, None)
    value = _value(reader, kind, key, op, schema)
    return Clause(kind, key, op, value)


def _identifier(text: str, schema: Schema, reader: _Reader) -> tuple[str, str]:
    entity, key = _split_identifier(text)
    if not entity:
        return "attribute", schema.attribute(key)
    kind = ENTITIES.get(entity)
    if kind is None or (kind != "attribute" and kind not in schema.entities):
        allowed = ", ".join(sorted(schema.entities | {"attributes"}))
        raise reader.error(f"{entity!r} is not something {schema.what} have ({allowed})")
    if kind == "dataset":
        raise reader.error("Loom does not search runs by their datasets")
    if not key:
        raise reader.error(f"{entity}. needs a key after it")
    return kind, (schema.attribute(key) if kind == "attribute" else key)


def _operator(reader: _Reader) -> str:
    token = reader.take()
    if token.kind == "op":
        return {"==": "=", "<>": "!="}.get(token.text, token.text)
    upper = token.text.upper() if token.kind == "ident" else ""
    if upper in ("LIKE", "ILIKE", "IN"):
        return upper
    if upper == "NOT" and reader.word("IN"):
        return "NOT IN"
    if upper == "IS":
        negated = reader.word("NOT")
        if reader.word("NULL"):
            return "IS NOT NULL" if negated else "IS NULL"
    raise reader.error(f"expected a comparison (=, !=, <, LIKE, IN, IS NULL…), got {token.text!r}")


def _value(reader: _Reader, kind: str, key: str, op: str, schema: Schema) -> Value:
    numeric = kind == "metric" or (kind == "attribute" and key in schema.numeric)
    listed = kind == "attribute" and key in schema.lists
    allowed = NUMERIC_OPS if numeric else STRING_OPS | (LIST_OPS if listed else frozenset())
    if op not in allowed:
        raise reader.error(
            f"{op} does not compare {kind} {key!r} (use {', '.join(sorted(allowed))})"
        )
    if op in LIST_OPS:
        return _list(reader)
    token = reader.take()
    if numeric:
        if token.kind != "number":
            raise reader.error(f"{kind} {key!r} compares with a number, got {token.text!r}")
        number = float(token.text)
        return int(number) if kind == "attribute" and number.is_integer() else number
    if token.kind not in ("string", "quoted"):
        raise reader.error(f"{kind} {key!r} compares with a quoted string, got {token.text!r}")
    return _unquote(token.text)


def _list(reader: _Reader) -> tuple[str, ...]:
    if reader.take().text != "(":
        raise reader.error("IN takes a list in parentheses: IN ('a', 'b')")
    items: list[str] = []
    while True:
        token = reader.take()
        if token.kind not in ("string", "quoted"):
            raise reader.error(f"IN lists hold quoted strings, got {token.text!r}")
        items.append(_unquote(token.text))
        closing = reader.take().text
        if closing == ")":
            return tuple(items)
        if closing != ",":
            raise reader.error(f"expected , or ) in an IN list, got {closing!r}")


def _order_error(why: str) -> InvalidInput:
    return InvalidInput(f"order_by: {why}", field="order_by")


def parse_order_by(items: list[str] | None, schema: Schema = RUNS) -> list[OrderKey]:
    """`order_by` items: `[entity.]key [ASC|DESC]`, each key at most once."""
    keys: list[OrderKey] = []
    for item in items or []:
        words = _tokens(item, "order_by")
        if not words or len(words) > 2:
            raise _order_error(f"expected `key [ASC|DESC]`, got {item!r}")
        ascending = True
        if len(words) == 2:
            direction = words[1].text.upper()
            if direction not in ("ASC", "DESC"):
                raise _order_error(f"ASC or DESC, got {words[1].text!r}")
            ascending = direction == "ASC"
        reader = _Reader(words, "order_by", item)
        kind, key = _identifier(words[0].text, schema, reader)
        if schema.orderable is not None and kind == "attribute" and key not in schema.orderable:
            raise _order_error(f"{schema.what} are not ordered by {key!r}")
        if any((k.kind, k.key) == (kind, key) for k in keys):
            raise _order_error(f"{kind} {key!r} twice")
        keys.append(OrderKey(kind, key, ascending))
    return keys


def like(value: str, pattern: str, *, fold: bool = False) -> bool:
    """SQL's LIKE (`%` any run, `_` one character), case-sensitive unless `fold` (ILIKE): for
    what is searched in memory."""
    parts = (".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    flags = re.DOTALL | (re.IGNORECASE if fold else 0)
    return re.fullmatch("".join(parts), value, flags) is not None


def compare(found: str | float | None, op: str, wanted: Value) -> bool:
    """One clause against a value held in memory (None: the entity has no such key)."""
    if op == "IS NULL":
        return found is None
    if op == "IS NOT NULL":
        return found is not None
    if found is None:
        return False
    if op in LIST_OPS:
        inside = isinstance(wanted, tuple) and found in wanted
        return inside if op == "IN" else not inside
    if op in ("LIKE", "ILIKE"):
        return like(str(found), str(wanted), fold=op == "ILIKE")
    checks = {
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
    }
    try:
        return bool(checks[op](found, wanted))
    except TypeError:
        return False
