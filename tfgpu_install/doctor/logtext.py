"""A pasted log as doctor reads it: colours removed, terminal-wrapped lines joined, the line that
stopped the program found, and the error-looking lines no rule explained. Pure functions on text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Optional

# CSI sequences (colours, cursor moves) and OSC titles; a bare ESC left over is dropped too.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b")
MIN_WRAP = 60  # narrower "wraps" are ordinary short lines
_TABLE_EDGE = ("|", "+")  # nvidia-smi tables: lines of one width that are not wrapped
TERMINAL_WIDTHS = (80, 100, 120, 132, 160, 200)  # one cut line at these widths is a wrap too


def clean(text: str) -> str:
    """Text without ANSI escapes and with \\r\\n / \\r line ends as \\n (line count unchanged)."""
    text = _ANSI.sub("", text)
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class Unwrapped:
    text: str
    origin: tuple[int, ...]  # joined line i (0-based) starts at original line origin[i] (1-based)


def wrap_width(lines: list[str]) -> Optional[int]:
    """The terminal width a paste was hard-wrapped at: the longest line length that at least two
    lines share exactly (a wrapped line fills the width), or that one line has when it is a common
    terminal width; None when nothing looks wrapped."""
    widths = Counter(len(line) for line in lines if len(line) >= MIN_WRAP and not line.rstrip().endswith(_TABLE_EDGE))
    if not widths:
        return None
    longest = max(widths)
    return longest if widths[longest] >= 2 or longest in TERMINAL_WIDTHS else None


def unwrap(text: str) -> Optional[Unwrapped]:
    """Join each line of exactly the wrap width with the next one (the terminal cut it there).
    None when the text shows no wrapping."""
    lines = text.split("\n")
    width = wrap_width(lines)
    if width is None:
        return None
    out: list[str] = []
    origin: list[int] = []
    carry = False
    for no, line in enumerate(lines, 1):
        if carry:
            out[-1] += line
        else:
            out.append(line)
            origin.append(no)
        carry = len(line) == width
    return Unwrapped(text="\n".join(out), origin=tuple(origin))


# What stops a program: a Python exception line, a glog fatal line, a Go panic, an abort.
_STOP = re.compile(
    r"(?:^|[\s:>_])(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception)|Exception)(?::|\s*$)"
    r"|(?:^|\s)F\d{4} \d\d:\d\d:\d\d"
    r"|(?:^|\]\s|:\s|\s)F (?:tensorflow|external|third_party)/\S+\]"
    r"|panic: "
    r"|^\s*(?:\S.*\s)?(?:Aborted|Illegal instruction|Segmentation fault)(?: \(core dumped\))?\s*$"
    r"|^\s*error: [a-z][a-z-]+\s*$",
    re.MULTILINE,
)
_CAUSE_LINE = re.compile(r"^\s*(?:During handling of the above exception|The above exception was the direct cause)")
STOP_SPAN = 10  # an exception's message may run on for a few lines


def stop_region(text: str) -> Optional[tuple[int, int]]:
    """(first, last) 1-based lines of what stopped the program: the last exception / fatal line
    and the message lines under it (to a blank line or the next traceback), None when none."""
    last = None
    for m in _STOP.finditer(text):
        last = m
    if last is None:
        return None
    first = text.count("\n", 0, last.start()) + 1
    if text[last.start()] == "\n":
        first += 1
    lines = text.split("\n")
    end = first
    while end < len(lines) and end - first < STOP_SPAN:
        nxt = lines[end]  # line end + 1 (1-based)
        if not nxt.strip() and end > first or _CAUSE_LINE.match(nxt) or nxt.lstrip().startswith("Traceback"):
            break
        end += 1
    return first, end


_ERRORISH = re.compile(
    r"\b(?:[A-Z]\w*(?:Error|Exception)\b|error|ERROR|failed|FAILED|fatal|FATAL|not found|cannot|Cannot|could not|Could not"
    r"|Segmentation fault|Aborted|core dumped)"
    r"|^\s*[EF]\d{4} |\s[EF] (?:tensorflow|external)/"
)
MAX_UNEXPLAINED = 8


def unexplained(text: str, explained: set[int]) -> tuple[str, ...]:
    """The error-looking lines ("L12: ...") that no matched rule quoted: what doctor could not
    explain. Bounded; the last ones (nearest to what stopped the program) are kept."""
    out = []
    for no, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if s and no not in explained and _ERRORISH.search(line):
            out.append(f"L{no}: {s[:300]}")
    return tuple(out[-MAX_UNEXPLAINED:])
