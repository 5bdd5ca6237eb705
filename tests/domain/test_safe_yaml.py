"""User YAML is read with the C parser, without anchors or aliases, and with bounded nesting."""

from __future__ import annotations

import pytest
import yaml

from loom.domain.errors import ManifestError
from loom.domain.manifest import load_manifest
from loom.domain.safe_yaml import MAX_DEPTH, Loader, UnsafeYaml, safe_load

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(9)
)


def test_plain_yaml_loads() -> None:
    """A document without anchors loads as it would with PyYAML's safe loader."""
    text = "name: x\nlist: [1, 2.5, 'three']\nnested: {a: {b: [true, null]}}\n"
    assert safe_load(text) == yaml.safe_load(text)


def test_the_c_parser_is_used_when_pyyaml_has_it() -> None:
    """With libyaml installed, the loader is PyYAML's C loader."""
    if yaml.__with_libyaml__:
        assert Loader is yaml.CSafeLoader


def test_an_alias_bomb_is_refused_with_where() -> None:
    """A billion-laughs document is refused at its first anchor, naming line and column."""
    with pytest.raises(UnsafeYaml, match=r"anchors and aliases .* line 1, column 4"):
        safe_load(LAUGHS)


def test_an_alias_alone_is_refused() -> None:
    """An alias is refused even where its anchor would be harmless."""
    with pytest.raises(UnsafeYaml, match="aliases"):
        safe_load("base: &b {cpus: 1}\njob:\n  <<: *b\n")


def test_deep_nesting_is_refused() -> None:
    """Nesting past the limit is refused before anything is built."""
    deep = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)
    with pytest.raises(UnsafeYaml, match=f"deeper than {MAX_DEPTH}"):
        safe_load(deep)
    very_deep = "[" * 100_000
    with pytest.raises(UnsafeYaml):
        safe_load(very_deep)


def test_manifest_with_aliases_is_c101() -> None:
    """`load_manifest` turns a refused document into a C101 manifest error saying why."""
    with pytest.raises(ManifestError, match="anchors and aliases") as caught:
        load_manifest(LAUGHS)
    assert caught.value.code is not None
    assert caught.value.code.value == "C101"


def test_too_many_nodes_are_refused() -> None:
    """A document of more values than the limit is refused before Python objects are built."""
    assert len(safe_load("[" + "1, " * 100 + "]", max_nodes=101)) == 100
    with pytest.raises(UnsafeYaml, match="more than 100 values"):
        safe_load("[" + "1, " * 100 + "]", max_nodes=100)
