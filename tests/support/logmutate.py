"""Mutations of a real log, as pastes arrive: headline cut, hard-wrapped by a terminal, Windows
paths, a logger's prefix on every line, ANSI colours, and earlier noise/warnings before the error.
Each is a pure function text -> text; MUTATIONS names them for parametrised tests."""

from __future__ import annotations

import re
from typing import Callable

_PATH = re.compile(r"(?<![\w.:/])/((?:[\w.+@&-]+/)+[\w.+@&-]*)")


def cut_headline(text: str) -> str:
    """Drop the first non-empty line (the paste started one line late) when more remain."""
    lines = text.split("\n")
    body = [i for i, line in enumerate(lines) if line.strip()]
    if len(body) < 3:
        return text
    del lines[body[0]]
    return "\n".join(lines)


def wrap(text: str, width: int = 80) -> str:
    """Hard-wrap every line at `width` columns, as a terminal copy does (characters kept)."""
    out = []
    for line in text.split("\n"):
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return "\n".join(out)


def windows_paths(text: str) -> str:
    """/home/u/env/lib/x.py -> C:\\home\\u\\env\\lib\\x.py"""
    return _PATH.sub(lambda m: "C:\\" + m.group(1).replace("/", "\\"), text)


def logger_prefix(text: str) -> str:
    """Every line behind a timestamp and logger name, as a job runner or service log writes."""
    return "\n".join(f"2025-03-14 09:26:53,589 ERROR [worker-3] {line}" if line else line
                     for line in text.split("\n"))


def ansi(text: str) -> str:
    """Colours: error-looking lines red, the rest dim; words in bold; a reset at each end."""
    out = []
    for line in text.split("\n"):
        if re.search(r"Error|error|failed|not found|Abort|panic|F tensorflow", line):
            out.append("\x1b[1;31m" + line.replace(": ", ":\x1b[0m\x1b[31m ", 1) + "\x1b[0m")
        elif line:
            out.append("\x1b[2m" + line + "\x1b[0m")
        else:
            out.append(line)
    return "\n".join(out)


NOISE = (
    "2025-03-14 09:26:50.120000: I tensorflow/core/platform/cpu_feature_guard.cc:182] This TensorFlow binary is "
    "optimized to use available CPU instructions in performance-critical operations.\n"
    "2025-03-14 09:26:50.980000: W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not "
    "find TensorRT\n"
    "2025-03-14 09:26:51.000000: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register "
    "cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered\n"
    "2025-03-14 09:26:51.200000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] Created device "
    "/job:localhost/replica:0/task:0/device:GPU:0 with 9600 MB memory\n"
)


def noise_before(text: str) -> str:
    """Known-harmless TensorFlow start-up lines before the real failure."""
    return NOISE + text


MUTATIONS: dict[str, Callable[[str], str]] = {
    "cut-headline": cut_headline,
    "wrapped": wrap,
    "windows-paths": windows_paths,
    "logger-prefix": logger_prefix,
    "ansi": ansi,
    "noise-before": noise_before,
}
