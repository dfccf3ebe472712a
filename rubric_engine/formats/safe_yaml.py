"""Read YAML with limits, so a small hostile file cannot run away (the alias bomb).

A YAML alias (``*name``) repeats a whole anchored subtree. PyYAML builds the repeat as a shared
reference, so *loading* a "billion laughs" file is cheap, but everything that walks the result
afterwards (the line index, pydantic validation, JSON snapshots, hashing) walks every repeat:
a few hundred bytes expand to hundreds of millions of nodes. Recursive aliases (``&a [*a]``)
never end at all, and very deep nesting exhausts Python's recursion limit.

:func:`load_documents` composes each document once, measures it before anything walks it, and
raises :class:`YamlLimitError` (a :class:`yaml.MarkedYAMLError`, so a caller's YAML error
handling reports it with its line) when

* the text is larger than ``max_bytes``;
* a collection nests deeper than :data:`MAX_DEPTH`;
* an alias refers to a collection that contains it (a cycle);
* aliases add more than :data:`MAX_ALIAS_EXPANSION` nodes to what the file spells out.

Files without aliases are limited only by size and depth. The measure follows the "alias
expansion budget" of Go's ``yaml.v3`` and libyaml-based decoders: reuse is fine, amplification
is not.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import yaml

from rubric_engine.formats.jsonl import long_number_problem

#: deepest nesting of mappings/sequences accepted; packs and cases need fewer than 20 levels
MAX_DEPTH = 100
#: nodes that aliases may add beyond the file's own nodes (counted with every repeat expanded)
MAX_ALIAS_EXPANSION = 100_000


class YamlLimitError(yaml.MarkedYAMLError):
    """The YAML text is refused before it is used: too large, too deep, or alias amplification.

    Attributes:
        problem: what is wrong and the fix (a YAML error's usual field).
        problem_mark: where in the text (``.line`` is 0-based), or ``None`` for the whole text.
    """

    def __init__(self, problem: str, mark: yaml.Mark | None = None) -> None:
        super().__init__(problem=problem, problem_mark=mark)

    def __str__(self) -> str:
        return str(self.problem)


class _LimitedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than :data:`MAX_DEPTH` while composing (the
    composer is recursive: without this a deep file ends in RecursionError)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise YamlLimitError(
                    f"nesting deeper than {MAX_DEPTH} levels; flatten the structure",
                    self.peek_event().start_mark,  # type: ignore[no-untyped-call]
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _expanded_size(root: yaml.Node) -> int:
    """Nodes in ``root`` with every alias expanded; memoized by node identity, so the cost is
    linear in the *composed* size whatever the expansion.

    Raises:
        YamlLimitError: an alias inside the collection it refers to (a cycle), expanded
            nesting deeper than :data:`MAX_DEPTH`, or more than :data:`MAX_ALIAS_EXPANSION`
            nodes added by aliases.
    """
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise YamlLimitError(
                "an alias refers to a collection that contains it (a cycle); "
                "YAML data for rubric-eval must be a tree",
                node.start_mark,
            )
        total, depth = 1, 1
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            on_path.add(key)
            children = (
                [part for pair in node.value for part in pair]
                if isinstance(node, yaml.MappingNode)
                else node.value
            )
            total += sum(size(child) for child in children)
            depth += max((depths[id(child)] for child in children), default=0)
            on_path.discard(key)
            if depth > MAX_DEPTH:  # an alias placed deep inside another anchored subtree
                raise YamlLimitError(
                    f"aliases nest this data deeper than {MAX_DEPTH} levels; flatten the structure",
                    node.start_mark,
                )
        sizes[key], depths[key] = total, depth
        return total

    total = size(root)
    spelled = len(sizes)  # each distinct node once: what the file itself contains
    if total - spelled > MAX_ALIAS_EXPANSION:
        raise YamlLimitError(
            f"aliases expand this document to {total:,} nodes ({spelled:,} written); at most "
            f"{MAX_ALIAS_EXPANSION:,} nodes may come from aliases (`*name`). Write the repeated "
            "parts out or use fewer nested aliases",
            root.start_mark,
        )
    return total


def load_documents(text: str, max_bytes: int) -> list[tuple[yaml.Node, Any]]:
    """Compose and construct every document of ``text`` within the limits of this module.

    Args:
        text: the YAML text.
        max_bytes: largest accepted text, in UTF-8 bytes.

    Returns:
        ``(node, data)`` per non-empty document, in file order: the composed node (for line
        numbers) and the plain Python value built from it (the node is parsed once).

    Raises:
        YamlLimitError: a limit was exceeded (with the line when it has one).
        yaml.YAMLError: the text is not valid YAML.
    """
    size = len(text.encode("utf-8"))
    if size > max_bytes:
        raise YamlLimitError(
            f"the file is {size:,} bytes; at most {max_bytes:,} are read. Split it into "
            "smaller files"
        )
    loader = _LimitedLoader(text)
    try:
        out: list[tuple[yaml.Node, Any]] = []
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _expanded_size(node)
            try:
                data = loader.construct_document(node)
            except ValueError:  # int("999…") past sys.get_int_max_str_digits()
                raise YamlLimitError(long_number_problem(), _long_number_mark(node)) from None
            out.append((node, data))
        return out
    finally:
        loader.dispose()


def _long_number_mark(node: yaml.Node) -> yaml.Mark | None:
    """Where the first scalar too long to be an ``int`` is (else the document's start)."""
    limit = sys.get_int_max_str_digits()
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, yaml.ScalarNode):
            if sum(c.isdigit() for c in str(item.value)) > limit:
                return item.start_mark
        elif isinstance(item, yaml.MappingNode):
            stack.extend(part for pair in reversed(item.value) for part in reversed(pair))
        elif isinstance(item, yaml.SequenceNode):
            stack.extend(reversed(item.value))
    return node.start_mark


def duplicate_keys(
    node: yaml.Node, path: tuple[str | int, ...] = ()
) -> list[tuple[int, tuple[str | int, ...], str, int]]:
    """Keys repeated inside one mapping, anywhere under ``node``: YAML keeps the last one
    silently (JSON readers here refuse the same thing).

    Returns:
        ``(line, path of the mapping, key, line of its first use)`` per repeat, lines 1-based,
        in file order.
    """
    found: list[tuple[int, tuple[str | int, ...], str, int]] = []
    if isinstance(node, yaml.MappingNode):
        first: dict[str, int] = {}
        for key_node, value_node in node.value:
            key, line = str(key_node.value), key_node.start_mark.line + 1
            if key in first:
                found.append((line, path, key, first[key]))
            else:
                first[key] = line
            found.extend(duplicate_keys(value_node, (*path, key)))
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found.extend(duplicate_keys(item, (*path, i)))
    return found


def line_of(node: yaml.Node, loc: Sequence[str | int]) -> int:
    """The 1-based line of the field at ``loc`` (mapping keys and list indices) under
    ``node``: its key's line, or an item's; where ``loc`` leaves the tree (a field that is
    missing), the line of the deepest part of it there is."""
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pairs = [(k, v) for k, v in node.value if str(k.value) == str(part)]
            if not pairs:
                break
            key, node = pairs[-1]
            line = key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What a YAML error says is wrong, in words a file's author can act on: PyYAML's
    ``problem`` text, with what to do when the cause is a tab (YAML indents with spaces only,
    and PyYAML says "found character '\\t' that cannot start any token")."""
    problem = str(getattr(exc, "problem", None) or exc)
    if "'\\t'" in problem:
        return f"{problem}: a tab; YAML indents with spaces only, so replace the tab with spaces"
    return problem
