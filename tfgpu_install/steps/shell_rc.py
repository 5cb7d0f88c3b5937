"""`--shell-rc FILE`: a marked block in the user's shell rc that activates the env in new shells.

The rc is the user's, so it gets the strictest handling of the block code it shares with the
activate scripts (tfgpu_install/files.py): the markers carry this env's id, so envs sharing one rc
never touch each other's blocks; a symlinked rc stays a link (its target is edited); owner, mode,
line endings and every byte outside the block are kept; undo puts back the block that was there
before (or removes ours), so install + rollback gives the file back byte for byte. An rc that
cannot be edited safely is refused (validate_shell_rc, called before any step runs).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import EnvironmentProblem, TfgpuError
from tfgpu_install.files import (
    BlockSpan,
    MarkerError,
    atomic_write,
    block_bytes,
    edit_target,
    put_block,
    remove_file,
    render_block_bytes,
    replace_block,
    scan_blocks,
)
from tfgpu_install.guard import shellquote
from tfgpu_install.guard.argtypes import creatable
from tfgpu_install.guard.jsondoc import text
from tfgpu_install.steps.activation import b64, parsed_blocks, restore_blocks
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint


class WriteShellRc(Step):
    """A marked block in the user's shell rc that activates the env in every new shell."""

    id = "shell-rc.write"

    def __init__(self, rc: Path, env: Path, backend: str = "venv") -> None:
        self.rc = Path(rc)
        self.env = Path(env)
        self.backend = backend

    def describe(self) -> str:
        return f"activate {self.env} in new shells ({self.rc})"

    def body(self) -> str:
        """The block in the rc's own shell: fish, csh/tcsh (.tcshrc, .cshrc, *.csh) or POSIX sh."""
        head = "# Managed by tfgpu-install: activates the TensorFlow GPU env in new shells.\n"
        kind = shellquote.kind_of_rc(self.rc.name)
        if kind == "fish":
            env, act = shellquote.fish(str(self.env)), shellquote.fish(str(self.env / "bin" / "activate.fish"))
            if self.backend == "conda":
                return head + f"type -q conda; and conda activate {env}\n"
            return head + f"test -f {act}; and source {act}\n"
        if kind == "csh":
            env, act = shellquote.csh(str(self.env)), shellquote.csh(str(self.env / "bin" / "activate.csh"))
            if self.backend == "conda":
                return head + f"which conda >& /dev/null && conda activate {env}\n"
            return head + f"if ( -f {act} ) source {act}\n"
        env = shellquote.sh(str(self.env))
        if self.backend == "conda":
            return head + f"command -v conda >/dev/null 2>&1 && conda activate {env}\n"
        act = shellquote.sh(str(self.env / "bin" / "activate"))
        return head + f"[ -f {act} ] && . {act}\n"

    def tag(self) -> str:
        return env_block_id(self.env)

    def touches(self, ctx: Context) -> list[str]:
        # The link and the file it points at: the executor backs up the target's bytes.
        target = edit_target(self.rc)
        return [str(self.rc)] + ([str(target)] if target != self.rc else [])

    def _ours(self, data: bytes) -> Optional[BlockSpan]:
        """This env's block; else a block an earlier version wrote for this env (no id in its
        markers, exactly the text it wrote for this env: adopted, so undo puts it back)."""
        spans = scan_blocks(data)
        mine = next((s for s in spans if s.tag == self.tag()), None)
        if mine is not None:
            return mine
        return next((s for s in spans if s.tag == "" and block_bytes(data, s)
                     == render_block_bytes(self.body(), "", newline=s.newline)), None)

    def check(self, ctx: Context) -> bool:
        try:
            data = read_rc(self.rc)
            span = self._ours(data or b"")
        except (TfgpuError, MarkerError):
            return False  # apply says why
        return (span is not None and span.tag == self.tag()
                and block_bytes(data or b"", span) == render_block_bytes(self.body(), self.tag(),
                                                                          newline=span.newline))

    def apply(self, ctx: Context) -> UndoRecord:
        target = edit_target(self.rc)
        old = read_rc(self.rc)
        data = old or b""
        span = parsed_blocks(self.rc, lambda: self._ours(data))
        previous: Optional[bytes] = None
        if span is not None:  # ours, or adopted from an earlier version: replaced in place
            previous = block_bytes(data, span)
            written = replace_block(data, span, render_block_bytes(self.body(), self.tag(), newline=span.newline))
        else:
            written, _ = put_block(data, self.body(), self.tag())
        checkpoint(ctx, self.id, "middle")
        atomic_write(target, written)
        return {"format": 2, "target": str(target), "existed": old is not None, "tag": self.tag(),
                "previous": b64(previous)}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if record.get("partial"):
            return  # killed mid-apply: the executor already put back every path touches() named
        target = Path(text(record, "target") or edit_target(self.rc))
        if not target.is_file():
            return
        if record.get("format") == 2:
            restore_blocks(target, {str(record.get("tag")): text(record, "previous")})
        else:  # a record of an earlier version: its block had no id; the one _ours() adopts
            data = target.read_bytes()
            span = parsed_blocks(target, lambda: self._ours(data))
            if span is not None and span.tag == "":
                atomic_write(target, replace_block(data, span, b""))
        if record.get("existed") is False and target.stat().st_size == 0:
            remove_file(target)


# --- the user's rc file: which file, readable, markers in order --------------------------


def env_block_id(env: Path) -> str:
    """The tag of an env's block in a shared rc: its basename and a hash of its absolute path."""
    absolute = os.path.abspath(str(env))
    base = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(absolute)) or "env"
    return f"{base}-{hashlib.sha256(absolute.encode()).hexdigest()[:12]}"


def read_rc(rc: Path) -> Optional[bytes]:
    """The rc's bytes (None: no such file yet); EnvironmentProblem when it cannot be edited."""
    target = edit_target(rc)
    via = f" (the target of the link {rc})" if target != rc else ""
    problem = None
    if os.path.islink(rc) and not os.path.lexists(target):
        problem = f"{rc} is a symlink to {os.readlink(rc)}, which does not exist"
    elif target.is_dir():
        problem = f"{target}{via} is a directory, not a shell rc file"
    elif target.exists() and not target.is_file():
        problem = f"{target}{via} is not a regular file"
    elif not target.parent.is_dir():
        problem = f"{target.parent} (where {rc} would go) is not a directory"
    elif target.is_file() and target.stat().st_nlink > 1:
        # Replacing it (write + rename) would split it from its other names.
        problem = f"{target}{via} has {target.stat().st_nlink} hard links; editing it would split them"
    elif target.exists() and os.geteuid() not in (0, target.stat().st_uid):
        # Rewriting it would make it ours: its owner must stay its owner.
        problem = f"{target}{via} belongs to uid {target.stat().st_uid}, not to you"
    else:
        # The edit is a new file beside it renamed over it: its directory must take new files
        # (a read-only one failed only after the env and its packages were installed).
        why = creatable(target.parent)
        if why is not None:
            raise EnvironmentProblem(f"cannot edit {target}{via}: {why}",
                                     hint=f"make {target.parent} writable, or pass --shell-rc a file in a directory "
                                     "you can write (e.g. ~/.bashrc)", ref="shell-rc-unusable")
    if problem is not None:
        raise EnvironmentProblem(problem, hint="pass --shell-rc a regular file of yours with one name (e.g. ~/.bashrc; "
                                 "a symlink to one, as dotfiles repos make, is fine)",
                                 ref="shell-rc-unusable")
    try:
        return target.read_bytes() if target.exists() else None
    except PermissionError as exc:
        raise EnvironmentProblem(f"cannot read {target}{via}: {exc.strerror}",
                                 hint="fix its permissions, or pass another file to --shell-rc",
                                 ref="shell-rc-unusable") from exc


def validate_shell_rc(rc: Path, env: Path) -> None:
    """Refuse, before any step runs, an rc that install could not edit safely."""
    data = read_rc(rc)
    if data is not None:
        parsed_blocks(edit_target(rc), lambda: WriteShellRc(rc, env)._ours(data))
