"""One error family. Core code raises these; only the console layer prints them.

Each error carries a message (what went wrong), a hint (the fix), a kebab-case
reference (stable, greppable, documented) and an exit code from ExitCode.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Optional


class ExitCode(IntEnum):
    """Documented from EXIT_MEANINGS below (docs/reference/exit-codes.md, the README's table and the man
    page are generated from both). Never renumber: scripts depend on them."""

    OK = 0
    FAILURE = 1  # an unexpected internal error (a bug): run with --debug and report it
    USAGE = 2  # bad command line
    NO_GPU = 3  # no usable NVIDIA GPU/driver found (probe/install without --allow-cpu)
    UNSATISFIABLE = 4  # no TensorFlow/CUDA/cuDNN/Python combination fits this machine and profile
    BAD_INPUT = 5  # malformed profile/knowledge YAML, snapshot, nvidia-smi file, archive
    ENVIRONMENT = 6  # target env unusable: path is a file, wrong Python, no permission, disk full
    STEP_FAILED = 7  # a provisioning step failed; the journal allows resume or rollback
    DOWNLOAD = 8  # download failed or checksum mismatch
    VERIFY_FAILED = 9  # verification ran and a layer failed
    LOCKED = 10  # another tfgpu-install holds this environment's lock
    DRIFT = 11  # `check`: the env drifted from its known-good snapshot
    INCOMPATIBLE_HOST = 12  # snapshot restore refused: host does not meet the snapshot's contract
    DIAGNOSED = 13  # `doctor` found a broken layer
    UNEXPLAINED = 14  # `doctor --log`: the log ends in a failure (a fatal line) that no rule explains
    INTERRUPTED = 130  # Ctrl-C


# What each code means to a user: the docs' exit code table, the README's and the man page's EXIT STATUS
# are generated from this (scripts/docs_reference.py); tests/docs holds them to it.
EXIT_MEANINGS: dict[ExitCode, str] = {
    ExitCode.OK: "done",
    ExitCode.FAILURE: "an unexpected internal error (a bug): re-run with `--debug` and report it",
    ExitCode.USAGE: "bad command line (a mistyped command or flag gets a \"did you mean\")",
    ExitCode.NO_GPU: "no usable NVIDIA GPU/driver (install without `--allow-cpu`, probe, plan, `verify` with no env "
                     "or `--host-only`, `doctor` with nothing GPU-related to diagnose)",
    ExitCode.UNSATISFIABLE: "no TensorFlow/CUDA/cuDNN/Python combination fits this machine and profile; your own "
                            "requirements conflict with TensorFlow's; `fleet install --same` found no common release",
    ExitCode.BAD_INPUT: "malformed profile/knowledge YAML, snapshot, bundle, nvidia-smi file, archive, rc-file "
                        "markers, env path; a file over its size limit",
    ExitCode.ENVIRONMENT: "target env unusable: path is a file, wrong Python, no permission, disk full, a file "
                          "someone else could write; no such env (`env-not-found`)",
    ExitCode.STEP_FAILED: "a provisioning step failed: run the same command again to resume, or `rollback`; "
                          "`fleet`: a host failed, was refused, unreachable or not finished",
    ExitCode.DOWNLOAD: "download failed, checksum mismatch, an insecure redirect, an index that cannot be reached",
    ExitCode.VERIFY_FAILED: "verification ran and a layer failed; a restored env differs from its snapshot",
    ExitCode.LOCKED: "another tfgpu-install holds this environment's lock (`--wait` queues behind it)",
    ExitCode.DRIFT: "`check`: the env drifted from its known-good snapshot or its installed files differ from their "
                    "records; `snapshot diff`: the two differ",
    ExitCode.INCOMPATIBLE_HOST: "snapshot restore refused: this host does not meet the snapshot's contract",
    ExitCode.DIAGNOSED: "`doctor` found a broken layer, or a known cause in a log",
    ExitCode.UNEXPLAINED: "`doctor --log`: the log ends in a failure (an exception, a fatal line, a crash) that no "
                          "rule explains: the cause is unknown; the lines are listed",
    ExitCode.INTERRUPTED: "Ctrl-C: run the same command again to resume",
}


class TfgpuError(Exception):
    """Base of every error the tool reports to a user."""

    code: ExitCode = ExitCode.FAILURE
    ref: str = "internal-error"

    def __init__(
        self,
        message: str,
        hint: Optional[str] = None,
        *,
        ref: Optional[str] = None,
        code: Optional[ExitCode] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        if ref is not None:
            self.ref = ref
        if code is not None:
            self.code = code

    def to_json(self) -> dict[str, object]:
        return {
            "error": self.ref,
            "message": self.message,
            "hint": self.hint,
            "exit_code": int(self.code),
        }


class UsageError(TfgpuError):
    code = ExitCode.USAGE
    ref = "usage"


class NoGpuError(TfgpuError):
    code = ExitCode.NO_GPU
    ref = "no-gpu"


class UnsatisfiableError(TfgpuError):
    code = ExitCode.UNSATISFIABLE
    ref = "unsatisfiable"


class BadInputError(TfgpuError):
    code = ExitCode.BAD_INPUT
    ref = "bad-input"


class EnvironmentProblem(TfgpuError):
    code = ExitCode.ENVIRONMENT
    ref = "environment"


class StepFailed(TfgpuError):
    code = ExitCode.STEP_FAILED
    ref = "step-failed"


class DownloadError(TfgpuError):
    code = ExitCode.DOWNLOAD
    ref = "download-failed"


class VerifyFailed(TfgpuError):
    code = ExitCode.VERIFY_FAILED
    ref = "verify-failed"


class LockedError(TfgpuError):
    code = ExitCode.LOCKED
    ref = "env-locked"


class IncompatibleHost(TfgpuError):
    code = ExitCode.INCOMPATIBLE_HOST
    ref = "incompatible-host"


class Interrupted(TfgpuError):
    code = ExitCode.INTERRUPTED
    ref = "interrupted"


class RunnerError(TfgpuError):
    """A command could not be started or timed out (not: exited non-zero)."""

    code = ExitCode.FAILURE
    ref = "command-failed"


# --- a full disk -----------------------------------------------------------------------------
# One place turns ENOSPC/EDQUOT into the error users see (exit 6, "no space left on <path>"):
# files.atomic_write, the journal, the env lock, downloads, the executor and, as the last net,
# cli.main call these instead of each wording their own.


class DiskFull(EnvironmentProblem):
    ref = "disk-full"


def is_disk_full(exc: BaseException) -> bool:
    import errno

    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    value = float(n)
    for unit in ("KiB", "MiB"):
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} GiB"


def _free_bytes(path: str) -> Optional[int]:
    """Free space (for this user) on the filesystem holding `path` or its nearest existing parent."""
    import os

    probe = os.path.abspath(path)
    while probe and not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    try:
        st = os.statvfs(probe)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def disk_full(path: object, exc: Optional[BaseException] = None, needed: Optional[int] = None,
              doing: str = "", undo: bool = False) -> DiskFull:
    """"no space left on <path>" first, then what was being written, how much it needs when known,
    and what is free; the hint says how to go on (a run resumes where it stopped)."""
    import errno

    where = str(path) if path else "the disk"
    quota = isinstance(exc, OSError) and exc.errno == errno.EDQUOT
    parts = [f"no space left on {where}" + (" (disk quota exceeded)" if quota else "")]
    if doing:
        parts.append(doing)
    if needed is not None:
        parts.append(f"{_size(needed)} needed")
    free = _free_bytes(where) if path else None
    if free is not None:
        parts.append(f"{_size(free)} free")
    return DiskFull(
        "; ".join(parts),
        hint="free some space on that filesystem (or point --env / -o / TFGPU_STATE_DIR / TFGPU_CACHE_DIR "
        "at another one), then run the same command again: it resumes where it stopped"
        + (", or `tfgpu-install rollback` to undo what was done" if undo else ""),
    )
