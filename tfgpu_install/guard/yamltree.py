"""The one line-tracking YAML reader: a Node tree in which every mapping, sequence and scalar
keeps the line it starts on, with hostile input refused. Snapshots (snapshot/reader.py) and the
knowledge files (knowledge/yaml_reader.py) both read through it; each words its own errors.

This walks PyYAML's event stream (libyaml's parser when available) instead of letting the
composer build the document:
  - aliases and anchors are refused where they appear (a 15 KB "billion laughs" file would
    otherwise expand to millions of nodes before any check could run);
  - nesting depth, node count, scalar size and text size are bounded (`Limits`);
  - explicit tags other than YAML's standard ones are refused;
  - a duplicate key is remembered on its mapping (`Mapping.duplicate`), for the reader to refuse.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any, Optional, Union

Scalar = Union[str, int, float, bool, None]
_STANDARD_TAGS = {f"tag:yaml.org,2002:{t}" for t in
                  ("str", "int", "float", "bool", "null", "timestamp", "map", "seq")}
_STR = "tag:yaml.org,2002:str"


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_depth: int
    max_nodes: int
    max_scalar: int


@dataclass
class Node:
    """One YAML node and the line it starts on (0: not from a file)."""

    line: int
    value: Any  # Mapping (str -> Node) | list[Node] | Scalar


class Mapping(dict):  # type: ignore[type-arg]
    """str -> Node, remembering each key's line and value as written and the first duplicate key."""

    duplicate: Optional[tuple[str, int]] = None

    def __init__(self) -> None:
        super().__init__()
        self.keys_as_read: dict[str, tuple[Scalar, int]] = {}  # text -> (the key's own value, its line)


@dataclass
class Refused(Exception):
    """Why a text is not read: `syntax` (not valid YAML) or a rule above; each reader words it."""

    line: int
    what: str
    hint: str = ""
    syntax: bool = False

    def __str__(self) -> str:
        return f"{self.line}: {self.what}"


@dataclass
class _Walk:
    limits: Limits
    doc: str  # "a snapshot", "a knowledge file": how the refusals name what was read
    stack: list[tuple[Node, Optional[str]]] = field(default_factory=list)  # a mapping's: the key awaiting its value
    root: Optional[Node] = None
    nodes: int = 0


def parse(text: str, doc: str, limits: Limits) -> Optional[Node]:
    """The document as a Node tree (None: the text holds no document); Refused (with the line)
    for malformed or hostile YAML."""
    import yaml

    if len(text) > limits.max_bytes:
        raise Refused(0, f"larger than any {_noun(doc)} ({limits.max_bytes} bytes at most)")
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    walk = _Walk(limits, doc)
    resolver = yaml.resolver.Resolver()
    constructor = yaml.constructor.SafeConstructor()
    try:
        for event in yaml.parse(text, Loader=loader):
            _step(walk, event, resolver, constructor)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise Refused(mark.line + 1 if mark is not None else 0, str(exc.problem or exc.context or "malformed"),
                      syntax=True) from None
    except yaml.YAMLError as exc:
        raise Refused(0, str(exc), syntax=True) from None
    return walk.root


def _step(walk: _Walk, event: Any, resolver: Any, constructor: Any) -> None:
    import yaml

    line = event.start_mark.line + 1 if event.start_mark is not None else 0
    aside = f"write the value out in full ({walk.doc} never needs anchors or aliases)"
    if isinstance(event, yaml.AliasEvent):
        raise Refused(line, f"YAML alias *{event.anchor}: aliases are not allowed in {walk.doc}", aside)
    if isinstance(event, (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent)):
        walk.nodes += 1
        if walk.nodes > walk.limits.max_nodes:
            raise Refused(line, f"more than {walk.limits.max_nodes} values: larger than any {_noun(walk.doc)}")
        if event.anchor is not None:
            raise Refused(line, f"YAML anchor &{event.anchor}: anchors are not allowed in {walk.doc}", aside)
        tag = event.tag
        if tag is not None and tag != "!" and tag not in _STANDARD_TAGS:
            raise Refused(line, f"YAML tag {tag}: only plain data is allowed in {walk.doc}")
    if isinstance(event, yaml.ScalarEvent):
        if len(event.value) > walk.limits.max_scalar:
            raise Refused(line, f"a value of {len(event.value)} characters ({walk.limits.max_scalar} at most)")
        _attach(walk, Node(line, _scalar(event, resolver, constructor, line)))
    elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
        if len(walk.stack) >= walk.limits.max_depth:
            raise Refused(line, f"nested more than {walk.limits.max_depth} levels deep: not {walk.doc}'s shape")
        walk.stack.append((Node(line, Mapping() if isinstance(event, yaml.MappingStartEvent) else []), None))
    elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
        _attach(walk, walk.stack.pop()[0])  # the finished collection goes into its parent (or is the root)


def _noun(doc: str) -> str:
    return doc.split(" ", 1)[-1]


def _attach(walk: _Walk, node: Node) -> None:
    """Put a finished node into the collection on top of the stack (or make it the root)."""
    if not walk.stack:
        walk.root = walk.root or node
        return
    parent, key = walk.stack[-1]
    if isinstance(parent.value, list):
        parent.value.append(node)
    elif key is None:  # this node is a mapping key
        if isinstance(node.value, (dict, list)):
            raise Refused(node.line, "a mapping key must be a plain value")
        name = key_text(node.value)
        walk.stack[-1] = (parent, name)
        if name in parent.value and parent.value.duplicate is None:
            parent.value.duplicate = (name, node.line)
        parent.value.keys_as_read.setdefault(name, (node.value, node.line))
    else:
        parent.value[key] = node
        walk.stack[-1] = (parent, None)


def key_text(value: Scalar) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _scalar(event: Any, resolver: Any, constructor: Any, line: int) -> Scalar:
    import yaml

    tag = event.tag if event.tag not in (None, "!") else resolver.resolve(yaml.ScalarNode, event.value, event.implicit)
    if event.tag == "!" or tag == _STR:
        return str(event.value)  # most values: no constructor needed
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    try:
        value = constructor.construct_object(node)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        raise Refused(line, f"{event.value[:40]!r} is not a valid {tag.rsplit(':', 1)[-1]} ({exc})") from None
    if isinstance(value, (datetime.date, datetime.datetime)):
        return str(event.value)  # an unquoted timestamp: the text as written
    if isinstance(value, bytes):  # pragma: no cover - !!binary is not a standard tag here
        raise Refused(line, "binary data is not allowed")
    return value  # type: ignore[no-any-return]


def node_of(data: Any, limits: Limits, doc: str, depth: int = 0) -> Node:
    """A plain value (parsed JSON, a test's dict) as a Node tree without lines, bounded the same way."""
    if depth > limits.max_depth:
        raise Refused(0, f"nested more than {limits.max_depth} levels deep: not {doc}'s shape")
    if isinstance(data, dict):
        out = Mapping()
        for k, v in data.items():
            text = key_text(k) if isinstance(k, (str, int, float, bool)) or k is None else repr(k)
            out[text] = node_of(v, limits, doc, depth + 1)
        return Node(0, out)
    if isinstance(data, (list, tuple)):
        return Node(0, [node_of(v, limits, doc, depth + 1) for v in data])
    if isinstance(data, (datetime.date, datetime.datetime)):
        return Node(0, data.isoformat())
    if data is None or isinstance(data, (str, int, float, bool)):
        return Node(0, data)
    return Node(0, repr(data))
