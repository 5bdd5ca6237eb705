"""KFP's pipeline IR, read the way Loom needs it (pure): which documents are KFP's, typed
parameter values, durations and Kubernetes quantities, the `pip install` preamble of a
lightweight Python component, and the CEL of a task's trigger condition.

Each refusal is a `ManifestError` naming the IR's field (`components.comp-x.…`,
`root.dag.tasks.train.retryPolicy.backoffDuration`) and why.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from loom.domain import quantities
from loom.domain.errors import ManifestError

T = TypeVar("T")
PARAMETER_TYPES = (
    *("NUMBER_INTEGER", "NUMBER_DOUBLE", "STRING", "BOOLEAN", "LIST", "STRUCT"),
    "TASK_FINAL_STATUS",
)
# Fields of a compiled pipeline that say nothing Loom must act on.
INFORMATIONAL = ("pipelineInfo", "sdkVersion", "schemaVersion")


def fail(where: str, message: str) -> ManifestError:
    return ManifestError(f"{where}: {message}", field=where)


def recognises(documents: Sequence[Any]) -> bool:
    """A compiled pipeline (`pipelineInfo` and `root`), or a PipelineJob (`pipelineSpec`)."""
    first = documents[0] if documents else None
    if not isinstance(first, dict):
        return False
    return ("root" in first and "pipelineInfo" in first) or isinstance(
        first.get("pipelineSpec"), dict
    )


def split(documents: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The pipeline spec, its platform spec (`{}` if none) and a PipelineJob's runtime
    parameter values (`{}` if none), from the documents `kfp.compiler` or a PipelineJob wrote."""
    first = documents[0]
    if isinstance(first.get("pipelineSpec"), dict):  # a PipelineJob
        runtime = first.get("runtimeConfig") or {}
        values = runtime.get("parameterValues") or runtime.get("parameters") or {}
        given = first.get("platformSpec") or {}
        return first["pipelineSpec"], given, dict(values) if isinstance(values, dict) else {}
    platform: dict[str, Any] = {}
    for index, document in enumerate(documents[1:], start=1):
        if not isinstance(document, dict) or "platforms" not in document:
            raise ManifestError(
                f"document {index + 1}: a compiled pipeline's second document is its platform "
                "spec (`platforms:`)"
            )
        platform = document
    return first, platform, {}


APPLIED_GROUP = "pipelines.kubeflow.org"


def as_applied(documents: list[Any]) -> list[Any]:
    """A compiled pipeline given to `loom apply` (its file has no kind) as the one object
    apply takes: a PipelineRun of it, named by the pipeline; other documents as they are."""
    if not documents or not isinstance(documents[0], dict) or "kind" in documents[0]:
        return documents
    if not recognises(documents):
        return documents
    spec, platform, values = split(documents)
    given = str((spec.get("pipelineInfo") or {}).get("name") or "pipeline").lower()
    name = re.sub(r"[^a-z0-9.-]+", "-", given).strip("-.")[:253] or "pipeline"
    found: dict[str, Any] = {"pipelineSpec": spec}
    if platform:
        found["platformSpec"] = platform
    if values:
        found["parameters"] = values
    return [
        {
            "apiVersion": f"{APPLIED_GROUP}/v2beta1",
            "kind": "PipelineRun",
            "metadata": {"name": name},
            "spec": found,
        }
    ]


# -- values ------------------------------------------------------------------------------------
def coerce(value: Any, kind: str, where: str) -> Any:
    """A parameter's value as its type says (`-p n=3` and the IR's `5.0` for an int are 5)."""
    if value is None:
        return None
    try:
        return _COERCE[kind](value)
    except KeyError:
        raise fail(where, f"unknown parameter type {kind!r}") from None
    except (TypeError, ValueError) as exc:
        raise fail(where, f"a {kind} is expected, got {value!r} ({exc})") from None


def _integer(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    number = float(value) if isinstance(value, str) else value
    if not isinstance(number, int | float) or not math.isfinite(number) or number != int(number):
        raise ValueError("not a whole number")
    return int(number)


def _double(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not finite")
    return number


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError("true or false")


def _json(kind: type) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        found = json.loads(value) if isinstance(value, str) else value
        if not isinstance(found, kind):
            raise ValueError(f"not a {kind.__name__}")
        return found

    return read


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


_COERCE: dict[str, Callable[[Any], Any]] = {
    "NUMBER_INTEGER": _integer,
    "NUMBER_DOUBLE": _double,
    "STRING": _text,
    "BOOLEAN": _boolean,
    "LIST": _json(list),
    "STRUCT": _json(dict),
    "TASK_FINAL_STATUS": _json(dict),
}


# -- quantities --------------------------------------------------------------------------------
def seconds(value: Any, where: str) -> float:
    """A protobuf Duration as the IR writes it (`"1s"`, `"0.5s"`, `"3600s"`)."""
    return _read(quantities.duration, value, where)


def memory(value: Any, where: str) -> str:
    """A Kubernetes memory quantity (`512M`, `1Gi`) in Loom's units (`512MB`, `1GiB`)."""
    return _read(quantities.memory, value, where)


def cpus(value: Any, where: str) -> float:
    """A Kubernetes CPU quantity (`500m`, `2`) as a number of CPUs."""
    return _read(quantities.cpus, value, where)


def _read(reader: Callable[[Any], T], value: Any, where: str) -> T:
    try:
        return reader(value)
    except ValueError as exc:
        raise fail(where, str(exc)) from None


# -- the lightweight component's preamble ------------------------------------------------------
_INSTALL = re.compile(r"pip\s+install\s+(.*?)(?:&&|\n|$)", re.S)
_WITH_VALUE = ("--index-url", "--extra-index-url", "--trusted-host", "-i", "--find-links", "-f")


class Preamble:
    """What the SDK's `pip install` preamble asks for: packages with their dependencies,
    packages without (`--no-deps`, as for `kfp` itself), and what Loom does not take from it
    (its own indexes)."""

    def __init__(self) -> None:
        self.pip: list[str] = []
        self.no_deps: list[str] = []
        self.ignored: list[str] = []


def strip_preamble(command: list[Any]) -> tuple[list[str], Preamble | None]:
    """The command without the preamble that installs packages at run time, and what the
    preamble installs; the command as it is (and None) when it has none. The SDK writes
    `sh -c "<install> && \"$0\" \"$@\"" sh -ec "<run the function>" <source>`."""
    words = [str(word) for word in command]
    if len(words) < 4 or words[:2] != ["sh", "-c"] or "pip install" not in words[2]:
        return words, None
    if '"$0" "$@"' not in words[2]:
        return words, None
    found = Preamble()
    for match in _INSTALL.finditer(words[2]):
        _install_line(match.group(1), found)
    return words[3:], found


def _install_line(text: str, found: Preamble) -> None:
    try:
        tokens = shlex.split(text)
    except ValueError:
        found.ignored.append(f"an install line that is not shell words: {text.strip()[:80]}")
        return
    packages: list[str] = []
    no_deps = False
    skip = False
    for token in tokens:
        if skip:
            found.ignored.append(f"the package index {token}")
            skip = False
        elif token in _WITH_VALUE:
            skip = True
        elif token.startswith(tuple(f"{option}=" for option in _WITH_VALUE)):
            found.ignored.append(f"the package index {token.split('=', 1)[1]}")
        elif token == "--no-deps":
            no_deps = True
        elif token.startswith("-"):
            continue  # --quiet, --no-warn-script-location, --upgrade …: how pip talks
        else:
            packages.append(token)
    (found.no_deps if no_deps else found.pip).extend(packages)


# -- conditions and selectors ------------------------------------------------------------------
_CEL_TOKEN = re.compile(
    r"""(?P<string>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")"""
    r"""|(?P<input>inputs\.parameter_values\[\s*(?P<q>['"])(?P<name>[^'"]+)(?P=q)\s*\])"""
    r"""|(?P<cast>\b(?:int|double|string|bool)\s*\()"""
    r"""|(?P<and>&&)|(?P<or>\|\|)|(?P<ne>!=)|(?P<not>!)"""
)


def condition(cel: str, value_of: Callable[[str], str], where: str) -> str:
    """A trigger condition as Loom's `when:`: each `inputs.parameter_values['X']` becomes what
    `value_of` gives for input X (a reference or a literal), `&&`/`||`/`!` become and/or/not,
    and the SDK's casts (`int(…)`) are dropped: Loom compares typed values."""

    def one(match: re.Match[str]) -> str:
        if match.group("string") is not None:
            return match.group("string")
        if match.group("input") is not None:
            return value_of(match.group("name"))
        if match.group("cast") is not None:
            return "("
        if match.group("and") is not None:
            return " and "
        if match.group("or") is not None:
            return " or "
        if match.group("ne") is not None:
            return "!="
        return " not "

    return _CEL_TOKEN.sub(one, cel).strip()


_SELECTOR = re.compile(r"^parseJson\(string_value\)((?:\[\s*\"[^\"]+\"\s*\])+)$")
_KEY = re.compile(r"\[\s*\"([^\"]+)\"\s*\]")


def selector(expression: str, where: str) -> list[str]:
    """The keys a `parameterExpressionSelector` takes from a JSON value (`item.a` of a loop
    over dicts is `parseJson(string_value)["a"]`)."""
    match = _SELECTOR.match(expression.strip())
    if match is None:
        raise fail(
            where, f'{expression!r}: only parseJson(string_value)["key"]… is understood here'
        )
    return _KEY.findall(match.group(1))
