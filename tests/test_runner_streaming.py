"""The runner hands a command's stderr over line by line as it is written (install progress)."""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

from tfgpu_install.runner import TIMED_OUT, ReplayRunner, SubprocessRunner


def test_lines_arrive_while_the_command_runs_and_the_result_is_whole(tmp_path: Path) -> None:
    """The command cannot go on past its first line until on_line has answered it (through a FIFO):
    a runner that hands stderr over only at exit leaves it blocked until the timeout, and fails."""
    fifo = tmp_path / "answer"
    os.mkfifo(fifo)
    seen: list[str] = []

    def answer(line: str) -> None:
        seen.append(line)
        if line != "first":
            return
        for _ in range(2000):  # until the command opens its end (it is still running), at most ~20 s
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # ENXIO: no reader (yet, or any more: a command that already ended)
                if exc.errno != errno.ENXIO:
                    raise
                time.sleep(0.01)
                continue
            os.write(fd, b"go\n")
            os.close(fd)
            return
        raise AssertionError("the command never waited for the answer")

    done = SubprocessRunner().run(
        ["sh", "-c", f"echo out; echo first >&2; read reply < {fifo}; echo \"second $reply\" >&2; exit 3"],
        on_line=answer, timeout=20,
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "first\nsecond go\n")
    assert seen == ["first", "second go"]


def test_a_streamed_command_past_its_time_is_killed_with_its_children() -> None:
    done = SubprocessRunner().run(["sh", "-c", "sleep 30 & echo started >&2; wait"], timeout=0.5,
                                  on_line=lambda line: None)
    assert done.returncode == TIMED_OUT and "timed out" in done.stderr


def test_replay_runner_streams_the_recorded_stderr() -> None:
    r = ReplayRunner()
    r.add(["uv", "pip", "install"], stderr="Resolved 2 packages in 1s\nInstalled 2 packages in 1s\n")
    seen: list[str] = []
    r.run(["uv", "pip", "install"], on_line=seen.append)
    assert seen == ["Resolved 2 packages in 1s", "Installed 2 packages in 1s"]


def test_a_detached_grandchild_holding_the_pipe_does_not_hang_a_streamed_run(tmp_path: Path) -> None:
    """The child exits at once; a grandchild in its own session keeps stderr open. run() returns
    while that grandchild still lives: it waited a bounded time, not for the grandchild."""
    pidfile = tmp_path / "grandchild.pid"
    done = SubprocessRunner().run(
        ["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' >/dev/null 2>&2 & "
                     f"while [ ! -s {pidfile} ]; do sleep 0.05; done; echo bye >&2; exit 0"],
        on_line=lambda line: None, timeout=60,
    )
    pid = int(pidfile.read_text())
    try:
        assert done.returncode == 0 and "bye" in done.stderr
        os.kill(pid, 0)  # still running: we did not wait for it
    finally:
        os.kill(pid, signal.SIGKILL)


# --- a pseudo-terminal for stderr (uv draws each download's bytes only on one) -------------------------

UV_ON_A_TERMINAL = Path(__file__).parent / "fixtures" / "uv" / "install-on-a-terminal.txt"


def test_a_terminal_run_gets_a_terminal_and_hands_over_each_frame() -> None:
    """The child sees a terminal on stderr (`test -t 2`) that can draw (TERM not dumb); the frames it
    draws with carriage returns reach on_line one by one, and the result's stderr keeps what stayed on
    the screen. Control: the same command through a pipe sees no terminal."""
    script = ('if [ -t 2 ]; then echo "tty $TERM" >&2; else echo pipe >&2; fi; '
              'printf "\\033[2mdl 1/3\\033[0m\\r\\033[2Kdl 2/3\\r\\033[2Kdl 3/3\\r\\033[2KDone 3\\n" >&2; echo out')
    seen: list[str] = []
    done = SubprocessRunner().run(["sh", "-c", script], on_line=seen.append, timeout=20, terminal=True,
                                  env={"TERM": "dumb"})
    assert done.returncode == 0 and done.stdout == "out\n"
    assert seen == ["tty xterm", "dl 1/3", "dl 2/3", "dl 3/3", "Done 3"]
    assert done.stderr == "tty xterm\nDone 3\n"
    piped: list[str] = []
    SubprocessRunner().run(["sh", "-c", script], on_line=piped.append, timeout=20)
    assert piped[0] == "pipe"


def test_a_terminal_run_past_its_time_is_killed() -> None:
    done = SubprocessRunner().run(["sh", "-c", "sleep 30 & echo started >&2; wait"], timeout=0.5,
                                  on_line=lambda line: None, terminal=True)
    assert done.returncode == TIMED_OUT and "timed out" in done.stderr


def test_uvs_drawing_read_back_as_frames_and_lines() -> None:
    """uv 0.13.9 installing numpy, six and packaging on a terminal (recorded with util-linux script)."""
    from tfgpu_install.runner import TerminalText

    screen = TerminalText()
    frames, lines = screen.feed(UV_ON_A_TERMINAL.read_bytes().decode())  # CRs kept: no read_text()
    more, last = screen.close()
    assert any("numpy" in f and "1.86 MiB/15.58 MiB" in f for f in frames)
    assert not any("\x1b" in f for f in frames + more)
    assert lines + last == ["Using Python 3.11.2 environment at: e3\n", "Resolved 3 packages in 210ms\n",
                            "Prepared 3 packages in 1.37s\n", "Installed 3 packages in 54ms\n", " + numpy==2.1.3\n",
                            " + packaging==24.2\n", " + six==1.17.0\n"]
