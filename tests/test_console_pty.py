"""Progress as a user sees it: in a real pseudo-terminal (util-linux `script`), rich's live rows show
each active download with its bytes, rate and time left and the step's elapsed time; through a pipe
the same run is plain lines; under --json nothing."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.promised import require_tool
from tfgpu_install.console import Progress

pytestmark = pytest.mark.e2e  # a real pty and a child that feeds progress with real pauses (seconds each)

REPO = Path(__file__).resolve().parents[1]
# uv's own lines and, as it draws them on a terminal (tests/fixtures/uv), its frames with each download's
# bytes so far, fed with pauses so the rates are measured over real time (about 6 s of bytes: past the
# smoothed rate's warm-up); the assertions never depend on how long anything took.
FEED = """
import sys, time
from tfgpu_install.console import Progress
from tfgpu_install.steps.install_progress import InstallProgress
p = Progress(enabled=True)
p("provisioning: packages.install: install 2 requirements", 1, 5)
shown = InstallProgress(p, "installing 2 requirements with uv")
shown.feed("Resolved 2 packages in 295ms")
BAR = "------------------------------"
for i in range(1, 13):
    time.sleep(0.5)
    shown.feed(f"\u2819 Preparing packages... (0/2)   numpy   {BAR} {i * 1.3:.2f} MiB/16.10 MiB   "
               f"scipy   {BAR} {i * 2.5:.2f} MiB/33.70 MiB")
time.sleep(0.5)
shown.feed(f"\u2819 Preparing packages... (1/2)   numpy   {BAR} 16.10 MiB/16.10 MiB   "
           f"scipy   {BAR} 33.70 MiB/33.70 MiB")
shown.feed("Installed 2 packages in 282ms")
p("provisioning: verify.run: verify", 2, 5)
time.sleep(1.3)
p("provisioning: done", 5, 5)
p.close()
print("rich" if p.rich else "plain")
"""


def _run(argv: list[str], **extra: str) -> str:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(REPO), "TERM": "xterm-256color",
           "HOME": os.environ.get("HOME", "/tmp"), **extra}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def test_rich_rows_in_a_real_pty_show_bytes_rate_and_time_left(tmp_path: Path) -> None:
    require_tool("script", "util-linux's script gives the tool a terminal")
    feed = tmp_path / "feed.py"
    feed.write_text(FEED)
    command = f"stty cols 100 rows 30; {shlex.quote(sys.executable)} {shlex.quote(str(feed))}"
    raw = _run(["script", "-qfec", command, "/dev/null"])
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)  # the screen's text without its control sequences
    assert "rich" in text
    assert "download numpy: 16.1 MiB" in text and "download scipy: 33.7 MiB" in text
    assert re.search(r"\d+\.\d MiB/(16\.1|33\.7|49\.8) MiB \d+\.\d MiB/s ETA \d", text), text[-3000:]
    assert "provisioning: verify.run: verify" in text and re.search(r"\d:\d\d:\d\d", text)  # its elapsed time


def test_a_pipe_gets_plain_lines_with_the_step_times() -> None:
    out = _run([sys.executable, "-c", FEED])
    assert "plain" in out and "\x1b[" not in out
    assert "  ... download numpy: 16.1 MiB: 1.3 MiB of 16.1 MiB" in out  # its bytes as they came
    assert re.search(r"  \.\.\. download scipy: 33\.7 MiB: 33\.7 MiB of 33\.7 MiB \([\d.]+ MiB/s\)", out), out
    assert re.search(r"  \.\.\. installing 2 requirements with uv: 2/2 downloads, 49\.8 MiB of 49\.8 MiB, "
                     r"[\d.]+ MiB/s\n", out), out
    assert re.search(r"  \.\.\. provisioning: verify\.run: verify: took \d+\.\d s", out), out


def test_disabled_progress_writes_nothing(tmp_path: Path) -> None:
    stream = (tmp_path / "out").open("w")
    p = Progress(enabled=False, stream=stream)
    p("provisioning: env.create: x", 0, 3)
    p("download numpy: 16.1 MiB", 0, 16e6)
    p.close()
    stream.close()
    assert (tmp_path / "out").read_text() == ""
