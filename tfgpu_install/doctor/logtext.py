"""A pasted log as doctor reads it: colours removed, terminal-wrapped lines joined, the line that
stopped the program found, and the error-looking lines no rule explained. Pure functions on text.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Optional

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


_LONG_LINE = re.compile(r"^.{%d,}$" % MIN_WRAP, re.MULTILINE)


def wrap_width(text: str) -> Optional[int]:
    """The terminal width a paste was hard-wrapped at: the longest line length that at least two
    lines share exactly (a wrapped line fills the width), or that one line has when it is a common
    terminal width; None when nothing looks wrapped. Only lines of MIN_WRAP+ characters are looked at."""
    longs = [m.group(0) for m in _LONG_LINE.finditer(text)]
    widths = Counter(len(line) for line in longs if not line.rstrip().endswith(_TABLE_EDGE))
    if not widths:
        return None
    longest = max(widths)
    if widths[longest] < 2 and longest not in TERMINAL_WIDTHS:
        return None
    # Rows a terminal cut are different texts; one line repeated (a progress bar, a log loop) is not a wrap.
    sample = [line for line in longs if len(line) == longest][:1000]
    return longest if len(set(sample)) * 2 > len(sample) else None


# A logical line a terminal wrapped rarely spans more rows; lines of one length in a long log are not all one line.
MAX_JOIN = 16


def unwrap(text: str) -> Optional[Unwrapped]:
    """Join each line of exactly the wrap width with the next one (the terminal cut it there), at most
    MAX_JOIN rows into one line. None when the text shows no wrapping. Linear in the text."""
    width = wrap_width(text)
    if width is None:
        return None
    lines = text.split("\n")
    out: list[list[str]] = []
    origin: list[int] = []
    carry = False
    for no, line in enumerate(lines, 1):
        if carry and len(out[-1]) < MAX_JOIN:
            out[-1].append(line)
        else:
            out.append([line])
            origin.append(no)
        carry = len(line) == width
    return Unwrapped(text="\n".join("".join(parts) for parts in out), origin=tuple(origin))


# What stops a program: a Python exception line, a glog fatal line, a Go panic, an abort.
_STOP = re.compile(
    r"(?:^|[\s:>_])(?:[A-Za-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception)|Exception)(?::|\s*$)"
    r"|^\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\s+Traceback \(most recent call last\)"  # IPython's header
    r"|(?:^|\]\s*|:\s)Check failed: "  # a glog CHECK: the process aborts on it (the F prefix may be cut off)
    r"|(?:^|\s)F\d{4} \d\d:\d\d:\d\d"
    r"|(?:^|\]\s|:\s|\s)F (?:tensorflow|external|third_party)/\S+\]"
    r"|panic: "
    r"|^\s*(?:\S.*\s)?(?:Aborted|Illegal instruction|Segmentation fault)(?: \(core dumped\))?\s*$"
    r"|^\s*error: [a-z][a-z-]+\s*$"
    r"|Process finished with exit code -?[1-9]\d*",  # an IDE's (PyCharm) account of a crash: no other output
    re.MULTILINE,
)
_CAUSE_LINE = re.compile(r"^\s*(?:During handling of the above exception|The above exception was the direct cause)")
STOP_SPAN = 10  # an exception's message may run on for a few lines


_STOP_NEEDLES = ("Error", "Exception", "panic: ", "Aborted", "Illegal instruction", "Segmentation fault", "error: ",
                 "F tensorflow/", "F external/", "F third_party/", "Process finished with exit code", "Check failed: ")


def _backward(text: str, needles: tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of the lines holding a needle, last first. Each needle's text is
    searched once from the end (str.rfind), so the whole walk is linear in the text."""
    def find(n: str, end: int) -> int:
        pos = text.rfind(n, 0, end)
        return pos + 1 if pos != -1 and n.startswith("\n") else pos  # "\nF": the line the F starts

    end, line_no, line_start = len(text), text.count("\n") + 1, len(text)
    last = {n: find(n, end) for n in needles}
    while True:
        for n, pos in last.items():
            if pos >= end:
                last[n] = find(n, end)
        best = max(last.values(), default=-1)
        if best < 0:
            return
        start = text.rfind("\n", 0, best) + 1
        stop = text.find("\n", best)
        line_no -= text.count("\n", start, line_start)
        line_start = start
        yield line_no, text[start : stop if stop != -1 else len(text)]
        end = start


_STOP_LINE_NEEDLES = _STOP_NEEDLES + ("\nF",)


def stop_region(text: str) -> Optional[tuple[int, int]]:
    """(first, last) 1-based lines of what stopped the program: the last exception / fatal line
    and the message lines under it (to a blank line or the next traceback), None when none.
    Read from the end: only lines holding one of a few plain words are tried with the regex."""
    first = next((no for no, line in _backward("\n" + text, _STOP_LINE_NEEDLES) if _STOP.search(line)), None)
    if first is None:
        return None
    first -= 1  # the "\n" put in front (so a first line starting with F is seen)
    lines = text.split("\n", first + STOP_SPAN)[first - 1 :]
    end = 1
    while end < len(lines) and end <= STOP_SPAN:
        nxt = lines[end]
        if not nxt.strip() and end > 1 or _CAUSE_LINE.match(nxt) or nxt.lstrip().startswith("Traceback"):
            break
        end += 1
    return first, first + end - 1


_ERRORISH = re.compile(
    r"\b(?:[A-Z]\w*(?:Error|Exception)\b|error|ERROR|failed|FAILED|fatal|FATAL|not found|cannot|Cannot"
    r"|could not|Could not"
    r"|Segmentation fault|Aborted|core dumped)"
    r"|^\s*[EF]\d{4} |\s[EF] (?:tensorflow|external)/"
)
MAX_UNEXPLAINED = 8


_ERROR_NEEDLES = ("rror", "RROR", "xception", "ailed", "AILED", "atal", "ATAL", "not found", "annot", "ould not",
                  "Segmentation fault", "Aborted", "core dumped", " E ", " F ")


PREFIX_SAMPLE = 64  # kB from each end of a log that a shared line prefix is read from


def shared_prefix(text: str) -> int:
    """How many leading characters every line carries alike, digits aside (a logger's
    "2025-03-14 09:26:53,589 ERROR [worker-3] " on each line), when they hold a time stamp and a level
    word that looks like an error; 0 otherwise. A word every line carries says nothing about any one line.
    Read from the lines of the first and last PREFIX_SAMPLE kB (bounded on a 50 MB log); needs 3 lines."""
    span = PREFIX_SAMPLE * 1000
    head = text[:span].split("\n")
    tail = text[-span:].split("\n") if len(text) > span else []
    lines = [line for line in head[:-1] + tail[1:] + head[-1:] if line.strip()]
    if len(lines) < 3:
        return 0
    prefix = _DIGIT.sub("0", lines[0])
    for line in lines[1:]:
        masked = _DIGIT.sub("0", line[: len(prefix)])
        n = 0
        while n < len(prefix) and n < len(masked) and prefix[n] == masked[n]:
            n += 1
        prefix = prefix[:n]
        if not prefix:
            return 0
    cut = prefix.rfind(" ") + 1  # whole words only
    return cut if cut and prefix.count("0", 0, cut) >= 4 and _LEVEL_WORD.search(prefix[:cut]) else 0


_DIGIT = re.compile(r"\d")
# A logger's level spelled out after its time stamp; a glog "E0614" or a pip "ERROR:" on every line is the
# lines' own word, not a logger's.
_LEVEL_WORD = re.compile(r"\d\D*\b(?:ERROR|FATAL|CRITICAL|Error|error)\b")


def unexplained(text: str, explained: set[int]) -> tuple[str, ...]:
    """The error-looking lines ("L12: ...") that no matched rule quoted: what doctor could not
    explain. Bounded: the last MAX_UNEXPLAINED (nearest to what stopped the program), read from the end.
    A prefix that every line carries (shared_prefix) does not make a line error-looking."""
    out: list[str] = []
    skip = shared_prefix(text)
    for no, line in _backward("\n" + text, _ERROR_NEEDLES + ("\nE", "\nF")):
        no -= 1
        s = line.strip()
        if s and no not in explained and _ERRORISH.search(" " + line[skip:] if skip else line):
            out.append(f"L{no}: {s[:300]}")
            if len(out) == MAX_UNEXPLAINED:
                break
    return tuple(reversed(out))
