"""Reading a snapshot's YAML: the one line-tracking reader (guard/yamltree.py: a Node tree with
line numbers, hostile input refused) with a snapshot's bounds and wording.

Snapshots come from users, other machines and hand edits, so reading one must never crash
(exit 1) or run away: aliases and anchors, non-standard tags, nesting depth, node count, scalar
size and file size are refused or bounded there, and every mapping, sequence and scalar keeps its
line, so snapshot/schema.py can say "<file>:<line>: packages[3].hashes: expected a list of
strings, found a number".
"""

from __future__ import annotations

from typing import Any, NoReturn

from tfgpu_install.errors import BadInputError
from tfgpu_install.guard import yamltree
from tfgpu_install.guard.yamltree import Mapping as Mapping
from tfgpu_install.guard.yamltree import Node as Node
from tfgpu_install.guard.yamltree import Scalar as Scalar

# Generous for real snapshots (a TF env records a few hundred library files, a few KB of
# activation), small enough that a hostile file is refused in milliseconds.
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 24
MAX_NODES = 2_000_000
MAX_SCALAR = 1024 * 1024
LIMITS = yamltree.Limits(MAX_BYTES, MAX_DEPTH, MAX_NODES, MAX_SCALAR)
DOC = "a snapshot"
HINT = "the snapshot was edited by hand or is damaged; fix that line, or export the snapshot again"


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


def parse(text: str, where: str) -> Node:
    """The document as a Node tree; BAD_INPUT (with the line) for malformed or hostile YAML."""
    try:
        root = yamltree.parse(text, DOC, LIMITS)
    except yamltree.Refused as no:
        if not no.syntax:
            bad(where, no.line, no.what, no.hint or HINT)
        if no.line:
            bad(where, no.line, f"not valid YAML: {no.what}",
                "the snapshot file is damaged (cut short?); export it again or restore an older one")
        bad(where, 0, f"not valid YAML: {no.what}", "the snapshot file is damaged; export it again")
    if root is None:
        bad(where, 1, "empty: not a snapshot document", "pass a file written by `tfgpu-install snapshot export`")
    return root


def node_of(data: Any) -> Node:
    """A plain value (parsed JSON, a test's dict) as a Node tree without lines, bounded the same way."""
    try:
        return yamltree.node_of(data, LIMITS, DOC)
    except yamltree.Refused as no:
        raise BadInputError(no.what, HINT, ref="bad-snapshot") from None
