"""Progress of a package install, read from what uv or pip print on stderr.

On a terminal (the runner gives uv a pseudo-terminal when progress is shown) uv draws a bar per
download with its bytes so far, redrawn as they arrive; each frame reaches us as text:

    ⠙ Preparing packages... (0/3)    numpy   ------------------------------ 1.86 MiB/15.58 MiB

so each download's row moves with its bytes. Neither tool draws bars when its stderr is not a terminal
(a pipe), but both name each download and its size:

    uv:   "Resolved 15 packages in 1.2s" / "Downloading tensorflow (589.2MiB)" / " Downloaded tensorflow"
          / "Installed 15 packages in 2s"
    pip:  "Collecting numpy==1.26.4" / "  Downloading numpy-1.26.4-...whl (18.2 MB)" / "Installing collected
          packages: ..." / "Successfully installed ..."

Sizes are what the tools print (decimal for pip, binary for uv). What cannot be parsed is ignored:
progress is a courtesy, never a reason to fail.
"""

from __future__ import annotations

import re
import time
from typing import Callable, Optional

from tfgpu_install.report import human_bytes
from tfgpu_install.transfer_rate import TransferRate

ProgressFn = Callable[[str, float, Optional[float]], None]

_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024**2, "gib": 1024**3}
_UV_DOWNLOADING = re.compile(r"^\s*Downloading (\S+) \(([\d.]+)\s*([KMG]iB|B)\)\s*$")  # uv: binary units
_UV_DOWNLOADED = re.compile(r"^\s*Downloaded (\S+)\s*$")
_UV_RESOLVED = re.compile(r"^\s*Resolved (\d+) packages?")
# uv on a terminal: "<name> <bar> <done>/<total>" for each active download, several in one frame
_UV_BAR = re.compile(r"(?:^|\s)([A-Za-z0-9][\w.+-]*)\s+[-━─]{5,}\s+([\d.]+)\s?([KMGT]?i?B)/([\d.]+)\s?([KMGT]?i?B)")
_PIP_DOWNLOADING = re.compile(r"^\s*Downloading (\S+?)(?:-[\d.]+[^ ]*)? \(([\d.]+)\s*([kMG]?B)\)\s*$", re.I)
_PIP_COLLECTING = re.compile(r"^\s*Collecting (\S+)")
# uv's "Prepared" comes once every download is in (the bars of small files may vanish between redraws)
_DONE = re.compile(r"^\s*(Prepared \d+ packages?|Installed \d+ packages?|Successfully installed)")


def size_bytes(number: str, unit: str) -> float:
    return float(number) * _UNITS.get(unit.lower(), 1)


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes} min {secs} s"


class InstallProgress:
    """Feed it stderr lines; it reports "downloading N/M packages" with bytes done and total."""

    def __init__(self, report: ProgressFn, label: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.report = report
        self.label = label
        self.clock = clock
        self.started = clock()
        self.packages: Optional[int] = None  # resolved (uv) or collected (pip)
        self.sizes: dict[str, float] = {}  # download -> bytes
        self.done: set[str] = set()
        self._pip_current: Optional[str] = None
        self.rate = TransferRate()  # smoothed, from the first bytes on (transfer_rate.py)
        self.partial: dict[str, float] = {}  # download -> bytes so far, where uv draws its bar

    def start(self) -> None:
        self._emit()

    def feed(self, line: str) -> None:
        bars = _UV_BAR.findall(line)
        if bars:
            return self._bars(bars)
        m = _UV_RESOLVED.match(line)
        if m:
            self.packages = int(m.group(1))
            return self._emit()
        m = _UV_DOWNLOADING.match(line)
        if m:
            self.sizes[m.group(1)] = size_bytes(m.group(2), m.group(3))
            self._download(m.group(1), finished=False)
            return self._emit()
        m = _UV_DOWNLOADED.match(line)
        if m:
            self.done.add(m.group(1))
            self._download(m.group(1), finished=True)
            return self._emit()
        m = _PIP_COLLECTING.match(line)
        if m:
            self.packages = (self.packages or 0) + 1
            if self._pip_current is not None:  # pip downloads one after another
                self.done.add(self._pip_current)
                self._download(self._pip_current, finished=True)
                self._pip_current = None
            return self._emit()
        m = _PIP_DOWNLOADING.match(line)
        if m:
            self._pip_current = m.group(1)
            self.sizes[m.group(1)] = size_bytes(m.group(2), m.group(3))
            self._download(m.group(1), finished=False)
            return self._emit()
        if _DONE.match(line):
            for name in self.sizes:
                if name not in self.done:
                    self._download(name, finished=True)
            self.done.update(self.sizes)
            self._emit()

    def _bars(self, bars: list[tuple[str, str, str, str, str]]) -> None:
        """A frame of uv's bars: each download's bytes so far (a row that moves with them)."""
        moved = False
        for name, got, got_unit, size, size_unit in bars:
            total = size_bytes(size, size_unit)
            now = min(size_bytes(got, got_unit), total)
            if name in self.done or (self.partial.get(name) == now and self.sizes.get(name) == total):
                continue
            self.sizes[name] = total
            self.partial[name] = now
            if now >= total:
                self.done.add(name)
            self._download(name, finished=now >= total)
            moved = True
        if moved:
            self._emit()

    def _download(self, name: str, finished: bool) -> None:
        """One row per download while it is active: its size, its bytes so far where uv draws them (else
        a download's bytes move at its end: without a terminal the tools say only its start and end), and
        (the sink measures) rate and time left."""
        size = self.sizes.get(name)
        if size is None:
            return
        self.report(f"download {name}: {human_bytes(size)}", size if finished else self.partial.get(name, 0.0), size)

    def bytes_done(self) -> float:
        return sum(size if name in self.done else self.partial.get(name, 0.0) for name, size in self.sizes.items())

    def describe(self) -> str:
        total = sum(self.sizes.values())
        parts = [self.label]
        if self.sizes:
            done = self.bytes_done()
            rate, left = self.rate.rate(), self.rate.left(done, total)
            speed = f", {human_bytes(rate)}/s" if rate else ""
            eta = f", about {_duration(left)} left" if left is not None else ""
            parts.append(f"{len(self.done & set(self.sizes))}/{len(self.sizes)} downloads, "
                         f"{human_bytes(done)} of {human_bytes(total)}{speed}{eta}")
        elif self.packages:
            parts.append(f"{self.packages} packages")
        return ": ".join(parts)

    def _emit(self) -> None:
        self.rate.add(self.clock(), self.bytes_done())
        total = sum(self.sizes.values())
        self.report(self.describe(), self.bytes_done(), total or None)
