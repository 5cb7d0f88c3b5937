"""The only door to the operating system for commands.

Every module that needs to run a program takes a Runner (through the Context).
The real one wraps subprocess; tests use ReplayRunner with recorded outputs, or
the real one where the real tool exists here (venv, pip, uv, gcc, ldconfig).
No other module imports subprocess.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Protocol, Sequence

from installer.errors import RunnerError


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
    ) -> Completed:
        """Run argv; return its result. Raise RunnerError only when it cannot start
        or times out. `mutating` marks commands that change the system (dry runs
        and tests assert none reach the runner). `on_line` gets each line of the
        command's stderr as it is written (progress of long installs); the whole
        stderr is still in the result."""
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
    ) -> Completed:
        args = tuple(str(a) for a in argv)
        self.log.append(args)
        if on_line is not None:
            return self._streamed(args, env, timeout, cwd, input, desc, on_line)
        full_env = None
        if env is not None or self.base_env is not None:
            full_env = dict(self.base_env if self.base_env is not None else os.environ)
            if env is not None:
                full_env.update(env)
        try:
            proc = subprocess.run(
                args,
                env=full_env,
                cwd=cwd,
                input=input,
                stdin=None if input is not None else subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                # A new session: a hung child (a wedged driver) is killed with its group.
                start_new_session=True,
            )
        except FileNotFoundError:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: command not found")
        except PermissionError as exc:
            raise RunnerError(f"cannot run {args[0]}: {exc}", ref="command-not-executable") from exc
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else ""
            return Completed(args, TIMED_OUT, out or "", f"timed out after {timeout}s: {desc or args[0]}")
        return Completed(args, proc.returncode, proc.stdout, proc.stderr)

    def _env(self, env: Optional[Mapping[str, str]]) -> Optional[dict[str, str]]:
        if env is None and self.base_env is None:
            return None
        full = dict(self.base_env if self.base_env is not None else os.environ)
        full.update(env or {})
        return full

    def _streamed(self, args: tuple[str, ...], env: Optional[Mapping[str, str]], timeout: Optional[float],
                  cwd: Optional[str], input: Optional[str], desc: str,
                  on_line: Callable[[str], None]) -> Completed:
        """run() with stderr read line by line as it comes (stdout collected by a thread)."""
        try:
            proc = subprocess.Popen(
                args, env=self._env(env), cwd=cwd, text=True, errors="replace",
                stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
            )
        except FileNotFoundError:
            return Completed(args, NOT_FOUND, "", f"{args[0]}: command not found")
        except PermissionError as exc:
            raise RunnerError(f"cannot run {args[0]}: {exc}", ref="command-not-executable") from exc
        out: list[str] = []
        err: list[str] = []
        assert proc.stdout is not None and proc.stderr is not None
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        if input is not None and proc.stdin is not None:
            proc.stdin.write(input)
            proc.stdin.close()
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _kill_group(proc)

        timer = threading.Timer(timeout, expire) if timeout else None
        if timer is not None:
            timer.start()
        try:
            for line in proc.stderr:
                err.append(line)
                on_line(line.rstrip("\n"))
            proc.wait()
        finally:
            if timer is not None:
                timer.cancel()
        reader.join()
        if expired.is_set():
            return Completed(args, TIMED_OUT, "".join(out), f"timed out after {timeout}s: {desc or args[0]}")
        return Completed(args, proc.returncode, "".join(out), "".join(err))


def _kill_group(proc: "subprocess.Popen[str]") -> None:
    """A command past its time: its whole process group goes (a wedged child's children too)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


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
