"""The only door to the operating system for commands.

Every module that needs to run a program takes a Runner (through the Context).
The real one wraps subprocess; tests use ReplayRunner with recorded outputs, or
the real one where the real tool exists here (venv, pip, uv, gcc, ldconfig).
No other module imports subprocess.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional, Protocol, Sequence

from tfgpu_install.errors import RunnerError

if TYPE_CHECKING:
    import subprocess
    import threading
    from re import Pattern

# subprocess, threading, signal, shutil and re are imported where a program is run: every command
# builds a runner (the Context's), and install's no-op fast path answers without running one.


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class Runner(Protocol):
    def run(
        self,
        argv: Sequence[str],
        *,
        desc: str = "",
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        mutating: bool = False,
        on_line: Optional[Callable[[str], None]] = None,
        terminal: bool = False,
    ) -> Completed:
        """Run argv; return its result. Raise RunnerError only when it cannot start
        or times out. `mutating` marks commands that change the system (dry runs
        and tests assert none reach the runner). `on_line` gets each line of the
        command's stderr as it is written (progress of long installs); the whole
        stderr is still in the result. `terminal` (with on_line): stderr is a pseudo-terminal,
        for a program that shows its progress only on one (uv's per-file bytes); on_line then
        gets each frame it draws, as text, and the result's stderr what stayed on the screen."""
        ...

    def which(self, name: str) -> Optional[str]:
        """Absolute path of an executable on the runner's PATH, or None."""
        ...


# Exit code used in Completed when the program does not exist (as a shell does).
NOT_FOUND = 127
TIMED_OUT = 124


class SubprocessRunner:
    """The real runner. `path` is the PATH it searches (from the Context)."""

    def __init__(self, path: Optional[str] = None, base_env: Optional[Mapping[str, str]] = None) -> None:
        self.path = path
        self.base_env = dict(base_env) if base_env is not None else None
        self.log: list[tuple[str, ...]] = []

    def which(self, name: str) -> Optional[str]:
        import shutil

        return shutil.which(name, path=self.path)

    def run(
        self,
        argv: Sequence[str],
        *,
        desc: str = "",
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        mutating: bool = False,
        on_line: Optional[Callable[[str], None]] = None,
        terminal: bool = False,
    ) -> Completed:
        args = tuple(str(a) for a in argv)
        self.log.append(args)
        if on_line is not None:
            return self._streamed(args, env, timeout, cwd, input, desc, on_line, terminal)
        import subprocess

        full_env = None
        if env is not None or self.base_env is not None:
            full_env = dict(self.base_env if self.base_env is not None else os.environ)
            if env is not None:
                full_env.update(env)
        try:
            # A new session: on timeout the child is killed with its whole group (a wedged driver call
            # may sit in a helper the child started).
            proc = subprocess.Popen(
                args,
                env=full_env,
                cwd=cwd,
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
                start_new_session=True,
            )
        except FileNotFoundError:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: command not found")
        except PermissionError as exc:
            raise RunnerError(f"cannot run {args[0]}: {exc}", ref="command-not-executable") from exc
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            return self._stop(proc, args, f"timed out after {timeout}s: {desc or args[0]}")
        except BaseException:  # Ctrl-C: leave no child of ours behind
            self._stop(proc, args, "interrupted")
            raise
        return Completed(args, proc.returncode, out, err)

    # Seconds to wait after SIGTERM, then after SIGKILL. Bounded: a child stuck in the kernel
    # (uninterruptible sleep in a hung driver) survives SIGKILL, and we must not wait on it forever.
    term_grace: float = 2.0
    kill_grace: float = 5.0

    def _stop(self, proc: "subprocess.Popen[str]", args: tuple[str, ...], why: str) -> Completed:
        """End the child's process group (SIGTERM, then SIGKILL), each wait bounded; say what would not end."""
        import signal
        import subprocess

        notes = [why]
        for sig, grace in ((signal.SIGTERM, self.term_grace), (signal.SIGKILL, self.kill_grace)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass  # the group is gone already
            try:
                out, err = proc.communicate(timeout=grace)
                return Completed(args, TIMED_OUT, out or "", "\n".join(x for x in (err, *notes) if x))
            except subprocess.TimeoutExpired:
                continue
        out, err = self._partial_output(proc)
        if proc.poll() is None:
            notes.append(f"pid {proc.pid} survived SIGKILL: it is stuck in the kernel (uninterruptible sleep, "
                         "usually a hung driver); it was left behind: check `dmesg`, a reboot may be needed")
        else:
            notes.append(f"pid {proc.pid} ended, but a process that left its group still holds its output "
                         "pipes: stopped reading them")
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        return Completed(args, TIMED_OUT, out, "\n".join(x for x in (err, *notes) if x))

    @staticmethod
    def _partial_output(proc: "subprocess.Popen[str]") -> tuple[str, str]:
        """What communicate() had read before giving up (CPython keeps it between calls, as bytes or str)."""
        got = getattr(proc, "_fileobj2output", None) or {}
        parts = []
        for pipe in (proc.stdout, proc.stderr):
            chunks = got.get(pipe, []) if pipe is not None else []
            data = b"".join(c if isinstance(c, bytes) else c.encode() for c in chunks)
            parts.append(data.decode(errors="replace"))
        return parts[0], parts[1]

    def _env(self, env: Optional[Mapping[str, str]]) -> Optional[dict[str, str]]:
        if env is None and self.base_env is None:
            return None
        full = dict(self.base_env if self.base_env is not None else os.environ)
        full.update(env or {})
        return full

    def _streamed(self, args: tuple[str, ...], env: Optional[Mapping[str, str]], timeout: Optional[float],
                  cwd: Optional[str], input: Optional[str], desc: str,
                  on_line: Callable[[str], None], terminal: bool = False) -> Completed:
        """run() with stderr handed to `on_line` line by line as it comes. Both pipes are read by
        threads, so every wait stays bounded: the child's own (timeout), then the readers' (a
        detached grandchild may hold the pipes open long after the child is gone)."""
        import threading

        proc, master = _launch_streamed(args, self._env(env), cwd, input, terminal)
        if proc is None:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: command not found")
        out: list[str] = []
        err: list[str] = []
        callback_errors: list[str] = []

        def pump_out() -> None:
            assert proc.stdout is not None
            out.append(proc.stdout.read())

        def hand_over(line: str) -> None:
            try:
                on_line(line)
            except Exception as exc:  # noqa: BLE001 (progress is a courtesy: it never fails the command)
                callback_errors.append(repr(exc))  # kept: the first one is noted in the result's stderr

        def pump_err() -> None:
            if master is not None:
                return _pump_terminal(master, err, hand_over)
            assert proc.stderr is not None
            for line in proc.stderr:
                err.append(line)
                hand_over(line.rstrip("\n"))

        # A blocking waitpid on its own thread: Popen.wait(timeout) polls with sleeps of up to
        # 50 ms, which every streamed install paid after its child had already exited.
        exited = threading.Event()

        def reap() -> None:
            proc.wait()
            exited.set()

        readers = [threading.Thread(target=pump_out, daemon=True), threading.Thread(target=pump_err, daemon=True)]
        for t in [*readers, threading.Thread(target=reap, daemon=True)]:
            t.start()
        try:
            if input is not None and proc.stdin is not None:
                proc.stdin.write(input)
                proc.stdin.close()
            if not exited.wait(timeout):
                notes = self._end_group(proc, f"timed out after {timeout}s: {desc or args[0]}", exited)
                for t in readers:
                    t.join(self.term_grace)
                return Completed(args, TIMED_OUT, "".join(out), "\n".join(x for x in ("".join(err), *notes) if x))
        except BaseException:  # Ctrl-C: leave no child of ours behind
            self._end_group(proc, "interrupted", exited)
            raise
        for t in readers:
            t.join(self.term_grace)
        note = f"\n(tfgpu-install: the progress display failed: {callback_errors[0]})" if callback_errors else ""
        return Completed(args, proc.returncode, "".join(out), "".join(err) + note)

    def _end_group(self, proc: "subprocess.Popen[str]", why: str, exited: threading.Event) -> list[str]:
        """SIGTERM, then SIGKILL to the child's group, each wait bounded; notes on what would not end.
        `exited` is set by the thread that reaps the child."""
        import signal

        for sig, grace in ((signal.SIGTERM, self.term_grace), (signal.SIGKILL, self.kill_grace)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            if exited.wait(grace):
                return [why]
        return [why, f"pid {proc.pid} survived SIGKILL: it is stuck in the kernel (uninterruptible sleep, usually a "
                     "hung driver); it was left behind: check `dmesg`, a reboot may be needed"]


def _open_pty() -> Optional[tuple[int, int]]:
    """(master, slave) of a new pseudo-terminal, 200 columns wide (a program fits its progress to the
    width), with no CR added before each LF; None where the system has none."""
    try:
        import fcntl
        import pty
        import struct
        import termios

        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        return master, slave
    except (ImportError, OSError):
        return None


def _launch_streamed(args: tuple[str, ...], env: Optional[Mapping[str, str]], cwd: Optional[str],
                     input: Optional[str], terminal: bool) -> "tuple[Optional[subprocess.Popen[str]], Optional[int]]":
    """The child of a streamed run, in a session of its own, and (terminal) the master of the pseudo-terminal
    its stderr is; (None, None) when the program does not exist."""
    import subprocess

    fds = _open_pty() if terminal else None
    try:
        proc = subprocess.Popen(
            args, env=env if fds is None else _drawing_env(env), cwd=cwd, text=True, errors="replace",
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=fds[1] if fds else subprocess.PIPE, start_new_session=True,
        )
    except FileNotFoundError:
        _close_fds(fds)
        return None, None
    except PermissionError as exc:
        _close_fds(fds)
        raise RunnerError(f"cannot run {args[0]}: {exc}", ref="command-not-executable") from exc
    if fds is None:
        return proc, None
    os.close(fds[1])  # the child holds the slave; the master reads the end once every holder closed it
    return proc, fds[0]


def _drawing_env(env: Optional[Mapping[str, str]]) -> dict[str, str]:
    """The child's environment on a terminal that can draw (TERM=dumb or none gets no progress bars)."""
    out = dict(env if env is not None else os.environ)
    if out.get("TERM", "dumb") in ("", "dumb"):
        out["TERM"] = "xterm"
    return out


def _pump_terminal(fd: int, err: list[str], hand_over: Callable[[str], None]) -> None:
    """Read a pseudo-terminal's master to its end: each frame drawn to hand_over, each finished line to err."""
    screen = TerminalText()
    try:
        for chunk in _read_fd(fd):
            frames, lines = screen.feed(chunk)
            err.extend(lines)
            for frame in frames:
                hand_over(frame)
        frames, lines = screen.close()
        err.extend(lines)
        for frame in frames:
            hand_over(frame)
    finally:
        os.close(fd)


def _close_fds(fds: Optional[tuple[int, int]]) -> None:
    for fd in fds or ():
        try:
            os.close(fd)
        except OSError:
            pass


def _read_fd(fd: int) -> "Iterator[str]":
    """What a pseudo-terminal's master reads, decoded, until the last writer closes it (Linux: EIO)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        if not data:
            tail = decoder.decode(b"", final=True)
            if tail:
                yield tail
            return
        yield decoder.decode(data)


# What a program draws on a terminal: CSI sequences (colours, cursor moves, "erase line") and the
# separators of one frame from the next (CR, LF, cursor up/down, erase line).
_CSI = r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]"
_FRAME_SEP = r"\r|\n|\x1b\[\d*[ABK]|\x1b\[2K"


def _pattern(regex: str) -> "Pattern[str]":
    import re  # compiled once and cached by re itself

    return re.compile(regex)


class TerminalText:
    """Text out of what a program draws on a terminal. feed(text) -> (frames, lines): every stretch of text
    between two redraws, stripped of control sequences (for progress), and each line that ended with a
    newline as it was left on the screen (the last text drawn on it: redraws replace what was there)."""

    def __init__(self) -> None:
        self._pending = ""
        self._shown = ""  # the last non-empty text drawn since the last newline

    def feed(self, text: str) -> tuple[list[str], list[str]]:
        self._pending += text
        frames: list[str] = []
        lines: list[str] = []
        while True:
            m = _pattern(_FRAME_SEP).search(self._pending)
            if m is None:
                break
            segment = _plain(self._pending[:m.start()])
            self._pending = self._pending[m.end():]
            if segment.strip():
                frames.append(segment)
                self._shown = segment
            if m.group() == "\n":
                lines.append(self._shown + "\n")
                self._shown = ""
        return frames, lines

    def close(self) -> tuple[list[str], list[str]]:
        """The end of the output: what was drawn last without a newline after it."""
        rest, self._pending = _plain(self._pending), ""
        shown = rest if rest.strip() else self._shown
        self._shown = ""
        return ([rest] if rest.strip() else []), ([shown + "\n"] if shown.strip() else [])


def _plain(text: str) -> str:
    return _pattern(_CSI).sub("", text).rstrip()


@dataclass
class ReplayRunner:
    """A runner fed with recorded outputs. Any command it was not given fails the test.

    `responses` maps an argv tuple to a Completed (or a callable returning one).
    `executables` is what `which` finds. `calls` records every argv run.
    """

    responses: dict[tuple[str, ...], "Completed | Callable[[tuple[str, ...]], Completed]"] = field(
        default_factory=dict
    )
    executables: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    mutating_calls: list[tuple[str, ...]] = field(default_factory=list)

    def add(self, argv: Sequence[str], stdout: str = "", returncode: int = 0, stderr: str = "") -> None:
        key = tuple(argv)
        self.responses[key] = Completed(key, returncode, stdout, stderr)
        # What a recorded command names is, by construction, installed.
        self.executables.setdefault(key[0].rsplit("/", 1)[-1], key[0] if "/" in key[0] else f"/usr/bin/{key[0]}")

    def which(self, name: str) -> Optional[str]:
        return self.executables.get(name)

    def run(
        self,
        argv: Sequence[str],
        *,
        desc: str = "",
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        cwd: Optional[str] = None,
        input: Optional[str] = None,
        mutating: bool = False,
        on_line: Optional[Callable[[str], None]] = None,
        terminal: bool = False,
    ) -> Completed:
        key = tuple(str(a) for a in argv)
        self.calls.append(key)
        if mutating:
            self.mutating_calls.append(key)
        if key not in self.responses:
            raise AssertionError(f"ReplayRunner: unexpected command {key!r} ({desc})")
        resp = self.responses[key]
        done = resp(key) if callable(resp) else resp
        if on_line is not None:  # as the real runner does, line by line, after the fact
            for line in done.stderr.splitlines():
                on_line(line)
        return done
