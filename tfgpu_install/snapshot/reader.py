"""The bounded YAML reader for snapshots: a Node tree with line numbers, hostile input refused.

Snapshots come from users, other machines and hand edits, so reading one must never crash
(exit 1) or run away. This walks PyYAML's event stream (libyaml's parser when available)
instead of letting the composer build the document:
  - aliases and anchors are refused where they appear (a 15 KB "billion laughs" file would
    otherwise expand to millions of nodes before any check could run);
  - nesting depth, node count, scalar size and file size are bounded;
  - explicit tags other than YAML's standard ones are refused;
  - every mapping, sequence and scalar keeps its line, so snapshot/schema.py can say
    "<file>:<line>: packages[3].hashes: expected a list of strings, found a number".
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, NoReturn, Optional, Union

from tfgpu_install.errors import BadInputError

# Generous for real snapshots (a TF env records a few hundred library files, a few KB of
# activation), small enough that a hostile file is refused in milliseconds.
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 24
MAX_NODES = 2_000_000
MAX_SCALAR = 1024 * 1024
_STANDARD_TAGS = {f"tag:yaml.org,2002:{t}" for t in
                  ("str", "int", "float", "bool", "null", "timestamp", "map", "seq")}
HINT = "the snapshot was edited by hand or is damaged; fix that line, or export the snapshot again"

Scalar = Union[str, int, float, bool, None]


@dataclass
class Node:
    """One YAML node and the line it starts on (0: not from a file)."""

    line: int
    value: Any  # dict[str, Node] | list[Node] | Scalar


class Mapping(dict):  # type: ignore[type-arg]
    """dict[str, Node] that remembers duplicate keys (refused by the check)."""

    duplicate: Optional[tuple[str, int]] = None


def bad(where: str, line: int, what: str, hint: str = HINT) -> NoReturn:
    raise BadInputError(f"{where}:{line}: {what}" if line else f"{where}: {what}", hint, ref="bad-snapshot")


def decode(data: bytes, where: str) -> str:
    """UTF-8 text, or BAD_INPUT naming the line of the first bad byte."""
    if len(data) > MAX_BYTES:
        bad(where, 0, f"{len(data)} bytes: larger than any snapshot ({MAX_BYTES} bytes at most)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        bad(where, line, f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
             "snapshots are UTF-8 YAML; export the snapshot again")


def _plain(event: Any, where: str, line: int) -> None:
    """A value event without an anchor or a tag beyond YAML's standard ones (BAD_INPUT otherwise)."""
    if event.anchor is not None:
        bad(where, line, f"YAML anchor &{event.anchor}: anchors are not allowed in a snapshot",
             "write the value out in full (a snapshot never needs anchors or aliases)")
    tag = event.tag
    if tag is not None and tag != "!" and tag not in _STANDARD_TAGS:
        bad(where, line, f"YAML tag {tag}: only plain data is allowed in a snapshot")


def parse(text: str, where: str) -> Node:
    """The document as a Node tree; BAD_INPUT (with the line) for malformed or hostile YAML."""
    import yaml

    if len(text) > MAX_BYTES:
        bad(where, 0, f"larger than any snapshot ({MAX_BYTES} bytes at most)")
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    resolver = yaml.resolver.Resolver()
    constructor = yaml.constructor.SafeConstructor()
    stack: list[tuple[Node, Optional[str]]] = []  # open collections; a mapping's: the key awaiting its value
    root: Optional[Node] = None
    nodes = 0
    try:
        for event in yaml.parse(text, Loader=loader):
            line = event.start_mark.line + 1 if event.start_mark is not None else 0
            if isinstance(event, yaml.AliasEvent):
                bad(where, line, f"YAML alias *{event.anchor}: aliases are not allowed in a snapshot",
                     "write the value out in full (a snapshot never needs anchors or aliases)")
            if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                nodes += 1
                if nodes > MAX_NODES:
                    bad(where, line, f"more than {MAX_NODES} values: larger than any snapshot")
                _plain(event, where, line)
            if isinstance(event, yaml.ScalarEvent):
                if len(event.value) > MAX_SCALAR:
                    bad(where, line, f"a value of {len(event.value)} characters ({MAX_SCALAR} at most)")
                root = _attach(stack, Node(line, _scalar(event, resolver, constructor, where, line)), root, where)
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                if len(stack) >= MAX_DEPTH:
                    bad(where, line, f"nested more than {MAX_DEPTH} levels deep: not a snapshot's shape")
                stack.append((Node(line, Mapping() if isinstance(event, yaml.MappingStartEvent) else []), None))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                # The finished collection goes into its parent (or becomes the root).
                root = _attach(stack, stack.pop()[0], root, where)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        bad(where, mark.line + 1 if mark is not None else 0,
             f"not valid YAML: {exc.problem or exc.context or 'malformed'}",
             "the snapshot file is damaged (cut short?); export it again or restore an older one")
    except yaml.YAMLError as exc:
        bad(where, 0, f"not valid YAML: {exc}", "the snapshot file is damaged; export it again")
    if root is None:
        bad(where, 1, "empty: not a snapshot document", "pass a file written by `tfgpu-install snapshot export`")
    return root


def _attach(stack: list[tuple[Node, Optional[str]]], node: Node, root: Optional[Node], where: str) -> Optional[Node]:
    """Put a finished node into the collection on top of the stack (or make it the root)."""
    if not stack:
        return node if root is None else root
    parent, key = stack[-1]
    if isinstance(parent.value, list):
        parent.value.append(node)
    elif key is None:  # this node is a mapping key
        if isinstance(node.value, (dict, list)):
            bad(where, node.line, "a mapping key must be a plain value")
        name = _key_text(node.value)
        stack[-1] = (parent, name)
        if name in parent.value and parent.value.duplicate is None:
            parent.value.duplicate = (name, node.line)
        return root
    else:
        parent.value[key] = node
        stack[-1] = (parent, None)
    return root


def _key_text(value: Scalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _scalar(event: Any, resolver: Any, constructor: Any, where: str, line: int) -> Scalar:
    import yaml

    tag = event.tag if event.tag not in (None, "!") else resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
    if event.tag == "!":
        tag = "tag:yaml.org,2002:str"
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    try:
        value = constructor.construct_object(node)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        bad(where, line, f"{event.value[:40]!r} is not a valid {tag.rsplit(':', 1)[-1]} ({exc})")
    if isinstance(value, (datetime.date, datetime.datetime)):
        # An unquoted timestamp: keep the text the user wrote.
        return str(event.value)
    if isinstance(value, bytes):  # pragma: no cover - !!binary is not in _STANDARD_TAGS
        bad(where, line, "binary data is not allowed in a snapshot")
    return value  # type: ignore[no-any-return]


def node_of(data: Any, depth: int = 0) -> Node:
    """A plain value (parsed JSON, a test's dict) as a Node tree without lines, bounded the same way."""
    if depth > MAX_DEPTH:
        raise BadInputError(f"nested more than {MAX_DEPTH} levels deep: not a snapshot's shape", HINT,
                            ref="bad-snapshot")
    if isinstance(data, dict):
        out = Mapping()
        for k, v in data.items():
            text = _key_text(k) if isinstance(k, (str, int, float, bool)) or k is None else repr(k)
            out[text] = node_of(v, depth + 1)
        return Node(0, out)
    if isinstance(data, (list, tuple)):
        return Node(0, [node_of(v, depth + 1) for v in data])
    if isinstance(data, (datetime.date, datetime.datetime)):
        return Node(0, data.isoformat())
    if data is None or isinstance(data, (str, int, float, bool)):
        return Node(0, data)
    return Node(0, repr(data))
