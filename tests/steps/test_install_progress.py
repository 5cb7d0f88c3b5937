"""Install progress read from what uv and pip really print when their stderr is a pipe
(captured here from uv 0.9 and pip 23/24 installing from an index)."""

from __future__ import annotations

from typing import Optional

import pytest

from tfgpu_install.steps.install_progress import InstallProgress, size_bytes

UV = """\
Using Python 3.11.7 environment at: uvt
Resolved 2 packages in 295ms
Downloading numpy (16.1MiB)
Downloading scipy (33.7MiB)
 Downloaded numpy
 Downloaded scipy
Prepared 2 packages in 3.89s
Installed 2 packages in 282ms
 + numpy==2.4.6
 + scipy==1.17.1
"""

PIP = """\
Looking in links: /opt/wheels
Collecting six
  Downloading six-1.17.0-py2.py3-none-any.whl (11 kB)
Collecting tomli
  Downloading tomli-2.5.0-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.manylinux_2_28_x86_64.whl (276 kB)
     \u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501\u2501 276.4/276.4 kB 39.5 MB/s eta 0:00:00
Installing collected packages: tomli, six
Successfully installed six-1.17.0 tomli-2.5.0
"""


class Clock:
    def __init__(self, step: float = 1.0) -> None:
        self.now = 100.0
        self.step = step  # seconds between two lines

    def __call__(self) -> float:
        return self.now


def feed(text: str, clock: Clock) -> list[tuple[str, float, Optional[float]]]:
    seen: list[tuple[str, float, Optional[float]]] = []
    shown = InstallProgress(lambda w, d, t: seen.append((w, d, t)), "installing 2 requirements with uv", clock)
    for line in text.splitlines():
        clock.now += clock.step
        shown.feed(line)
    return seen


def _overall(seen: list[tuple[str, float, Optional[float]]]) -> list[tuple[str, float, Optional[float]]]:
    return [s for s in seen if s[0].startswith("installing")]


def test_uv_downloads_counted_with_bytes_total_rate_and_time_left() -> None:
    """numpy's 16.1 MiB arrive 5 s after the previous line: 3.2 MiB/s, scipy's 33.7 MiB about 10 s more."""
    seen = _overall(feed(UV, Clock(step=5.0)))
    total = size_bytes("16.1", "MiB") + size_bytes("33.7", "MiB")
    after_numpy = next(s for s in seen if s[1] == pytest.approx(size_bytes("16.1", "MiB")))
    assert after_numpy[2] == pytest.approx(total)
    assert after_numpy[0] == "installing 2 requirements with uv: 1/2 downloads, 16.1 MiB of 49.8 MiB, 3.2 MiB/s, " \
        "about 10 s left"
    last = seen[-1]
    assert last[1] == pytest.approx(total) and "2/2 downloads" in last[0] and "left" not in last[0]


def test_no_time_left_before_bytes_have_moved_for_a_while() -> None:
    """#43: "1 h 47 min" at the start. The old line divided the bytes by the time since the start (resolving
    included) and said a time left after the first file; with 1 s between lines, one file's bytes over 1 s
    are too little to say: rate and time left wait (this test's old assertion expected both there)."""
    seen = _overall(feed(UV, Clock(step=1.0)))
    after_numpy = next(s for s in seen if s[1] == pytest.approx(size_bytes("16.1", "MiB")))
    assert after_numpy[0] == "installing 2 requirements with uv: 1/2 downloads, 16.1 MiB of 49.8 MiB"


def test_one_row_per_active_download() -> None:
    rows = [s for s in feed(UV, Clock()) if s[0].startswith("download ")]
    numpy = size_bytes("16.1", "MiB")
    assert rows[0] == ("download numpy: 16.1 MiB", 0.0, pytest.approx(numpy))
    assert rows[1][0] == "download scipy: 33.7 MiB" and rows[1][1] == 0.0
    assert ("download numpy: 16.1 MiB", pytest.approx(numpy), pytest.approx(numpy)) in rows[2:]
    assert len(rows) == 4  # each started once and finished once


def test_pip_downloads_counted_as_pip_prints_them() -> None:
    seen = _overall(feed(PIP, Clock()))
    assert seen[-1][1] == pytest.approx(11e3 + 276e3) and seen[-1][2] == pytest.approx(11e3 + 276e3)
    # "Collecting tomli" means six's download is done (pip downloads one after another)
    assert any(d == pytest.approx(11e3) for _, d, _ in seen)


def test_lines_it_does_not_know_change_nothing_and_never_raise() -> None:
    seen = feed("warning: something odd\n\x00\n Downloaded\nDownloading (MiB)\n", Clock())
    assert seen == []


@pytest.mark.parametrize("number,unit,expected", [("11", "kB", 11e3), ("1.5", "GiB", 1.5 * 1024**3),
                                                  ("3", "MB", 3e6), ("7", "B", 7.0)])
def test_sizes_in_the_units_the_tools_print(number: str, unit: str, expected: float) -> None:
    assert size_bytes(number, unit) == pytest.approx(expected)


def test_on_a_terminal_each_downloads_row_moves_with_its_bytes() -> None:
    """#43 item 7: the per-file rows sat at 0 B until each file was done. uv's own drawing on a terminal
    (recorded: numpy 15.58 MiB arriving in steps) moves numpy's row through its bytes."""
    from pathlib import Path

    from tfgpu_install.runner import TerminalText

    raw = (Path(__file__).parents[1] / "fixtures" / "uv" / "install-on-a-terminal.txt").read_bytes().decode()
    frames, _ = TerminalText().feed(raw)
    seen: list[tuple[str, float, Optional[float]]] = []
    clock = Clock(step=0.1)
    shown = InstallProgress(lambda w, d, t: seen.append((w, d, t)), "installing 3 requirements with uv", clock)
    for frame in frames:
        clock.now += clock.step
        shown.feed(frame)
    numpy = [d for w, d, t in seen if w.startswith("download numpy:")]
    total = size_bytes("15.58", "MiB")
    between = [d for d in numpy if 0 < d < total]
    assert len(between) >= 5 and between == sorted(between), numpy  # it moves, and only forward
    assert numpy[-1] == pytest.approx(total)
    overall = [s for s in seen if s[0].startswith("installing")]
    assert "3/3 downloads" in overall[-1][0] and overall[-1][1] == pytest.approx(overall[-1][2])
