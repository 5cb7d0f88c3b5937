"""YAML reading for the knowledge files: plain data that remembers its line numbers.

The text goes through the tool's one line-tracking reader (guard/yamltree.py: libyaml's event
stream where PyYAML has it; aliases, anchors and foreign tags refused; bounded). Every mapping
loads as an `LDict` (a dict with `.line` and `.key_lines`) and every sequence as an `LList` (a
list with `.line` and `.item_lines`), so a validation error can name `profiles/matrix.yaml:123`.

`Checker` walks that data with a path ("releases[4].cuda") and raises BadInputError
"<file>:<line>: <path>: <what is wrong>" with a hint.
"""

from __future__ import annotations

import datetime
import difflib
import re
from pathlib import Path
from typing import Any, Iterable, NoReturn, Optional

from tfgpu_install.errors import BadInputError
from tfgpu_install.guard import yamltree


class LDict(dict):  # type: ignore[type-arg]
    line: int = 0
    key_lines: dict[str, int]


class LList(list):  # type: ignore[type-arg]
    line: int = 0
    item_lines: list[int]


# A knowledge file (matrix.yaml is the largest: a few hundred KB) fits well inside these.
LIMITS = yamltree.Limits(max_bytes=64 * 1024 * 1024, max_depth=32, max_nodes=2_000_000, max_scalar=1024 * 1024)


def _plain(node: yamltree.Node) -> Any:
    """The reader's Node tree as plain data whose mappings and sequences keep their lines."""
    value = node.value
    if isinstance(value, yamltree.Mapping):
        data = LDict()
        data.line = node.line
        data.key_lines = {}
        for text, child in value.items():
            key, line = value.keys_as_read[text]
            data[key] = _plain(child)
            data.key_lines[str(key)] = line
        if value.duplicate is not None:  # PyYAML would silently keep the last one; a data file must not
            data.dup = (value.keys_as_read[value.duplicate[0]][0], value.duplicate[1])  # type: ignore[attr-defined]
        return data
    if isinstance(value, list):
        items = LList(_plain(n) for n in value)
        items.line = node.line
        items.item_lines = [n.line for n in value]
        return items
    return value


def read_yaml(path: Path, label: str) -> Any:
    """Parse one file through the one line-tracking reader (guard/yamltree.py); malformed or
    hostile YAML -> BadInputError naming file:line."""
    try:
        from tfgpu_install.guard.bounded import read_text

        text = read_text(str(path), "profile")
    except UnicodeDecodeError as exc:
        raise BadInputError(f"{label}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                            hint="save the file as UTF-8") from exc
    except OSError as exc:
        raise BadInputError(
            f"{label}: cannot read ({exc.strerror or exc})",
            hint="check the path; the built-in files live in the installed profiles/ directory",
        ) from exc
    try:
        root = yamltree.parse(text, "a knowledge file", LIMITS)
    except yamltree.Refused as no:
        raise BadInputError(
            f"{label}:{no.line}: malformed YAML: {no.what}" if no.line else f"{label}: malformed YAML: {no.what}",
            hint=no.hint or ("fix the YAML syntax at that line (indentation, quotes, a missing ':')" if no.line
                             else "fix the YAML syntax"),
        ) from None
    return None if root is None else _plain(root)


VERSION2 = re.compile(r"^\d+\.\d+$")  # "12.3", "3.10", "8.6"
VERSION_ANY = re.compile(r"^\d+(\.\d+){0,3}(\.post\d+)?$")  # "9", "12.5.1", "8.9.4.25", "8.6.1.post1"
TF_VERSION = re.compile(r"^\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?$")  # "2.15.1", "2.15.0.post1", "2.22.0rc0"
DRIVER = re.compile(r"^\d+(\.\d+){1,2}$")  # "525.60.13", "331.62"
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class Checker:
    """Typed access to loaded YAML with file:line error messages."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, where: int, path: str, what: str, hint: Optional[str] = None) -> NoReturn:
        raise BadInputError(
            f"{self.label}:{where}: {path}: {what}",
            hint=hint or f"fix {self.label} (each file's header comment documents its schema)",
        )

    def line_of(self, parent: Any, key: Any) -> int:
        if isinstance(parent, LDict):
            return parent.key_lines.get(str(key), parent.line)
        if isinstance(parent, LList) and isinstance(key, int) and key < len(parent.item_lines):
            return parent.item_lines[key]
        return getattr(parent, "line", 0)

    def mapping(
        self,
        value: Any,
        path: str,
        line: int,
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
    ) -> LDict:
        if not isinstance(value, dict):
            self.fail(line, path, f"expected a mapping, got {_kind(value)}")
        allowed = set(required) | set(optional)
        dup = getattr(value, "dup", None)
        if dup is not None:
            self.fail(dup[1], _join(path, dup[0]), "duplicate key", "remove one of the two entries")
        for key in value:
            if key not in allowed:
                close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                hint = f"did you mean `{close[0]}`?" if close else "allowed: " + ", ".join(sorted(allowed))
                self.fail(self.line_of(value, key), _join(path, key), "unknown key", hint)
        for key in required:
            if key not in value or value[key] is None or value[key] == "":
                self.fail(getattr(value, "line", line), _join(path, key), "missing (required)",
                          f"add `{key}:`" + (" with where the row's data came from (URL, wheel file)"
                                             if key == "source" else ""))
        return value  # type: ignore[return-value]

    def seq(self, value: Any, path: str, line: int) -> LList:
        if not isinstance(value, list):
            self.fail(line, path, f"expected a list, got {_kind(value)}")
        return value  # type: ignore[return-value]

    def string(self, parent: Any, key: Any, path: str, *, pattern: Optional[re.Pattern[str]] = None,
               example: str = "", optional: bool = False, choices: Iterable[str] = ()) -> Optional[str]:
        value = parent.get(key) if isinstance(parent, dict) else parent[key]
        line = self.line_of(parent, key)
        if value is None and optional:
            return None
        if isinstance(value, (datetime.date,)) and pattern is DATE:
            return value.isoformat()
        if not isinstance(value, str):
            like = f' like "{example}"' if example else ""
            hint = (f'quote it: "{value}" (YAML reads an unquoted 3.10 as the number 3.1)'
                    if isinstance(value, (float, int)) and not isinstance(value, bool) else None)
            self.fail(line, path, f"expected a {'version ' if pattern else ''}string{like}, got {_kind(value)}"
                      + (f" {value!r}" if isinstance(value, (int, float)) else ""), hint)
        choices = tuple(choices)
        if choices and value not in choices:
            self.fail(line, path, f"expected one of {', '.join(choices)}, got {value!r}")
        if pattern is not None and not pattern.match(value):
            self.fail(line, path, f'expected a version string like "{example}", got {value!r}')
        return value

    def strings(self, parent: Any, key: str, path: str, *, pattern: Optional[re.Pattern[str]] = None,
                example: str = "") -> tuple[str, ...]:
        value = parent.get(key)
        if value is None:
            return ()
        items = self.seq(value, path, self.line_of(parent, key))
        return tuple(
            self.string(items, i, f"{path}[{i}]", pattern=pattern, example=example) or ""
            for i in range(len(items))
        )

    def str_map(self, parent: Any, key: str, path: str, *, pattern: Optional[re.Pattern[str]] = None,
                example: str = "") -> dict[str, str]:
        value = parent.get(key)
        if value is None:
            return {}
        m = self.mapping(value, path, self.line_of(parent, key),
                         optional=[str(k) for k in value] if isinstance(value, dict) else ())
        return {str(k): self.string(m, k, f"{path}.{k}", pattern=pattern, example=example) or "" for k in m}

    def boolean(self, parent: Any, key: str, path: str, default: bool) -> bool:
        value = parent.get(key, default)
        if not isinstance(value, bool):
            self.fail(self.line_of(parent, key), path, f"expected true or false, got {_kind(value)}")
        return value

    def integer(self, parent: Any, key: str, path: str, default: int) -> int:
        value = parent.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.fail(self.line_of(parent, key), path, f"expected a whole number >= 0, got {value!r}")
        return value


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true/false", int: "a number",
            float: "a number"}.get(type(value).__mro__[-2] if type(value) in (LDict, LList) else type(value),
                                  type(value).__name__)
