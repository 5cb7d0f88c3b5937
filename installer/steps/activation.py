"""Activation: make the env's CUDA/cuDNN libraries and ptxas visible wherever the env is used.

- venv: a marked block at the end of bin/activate (and activate.fish / activate.csh) sets
  LD_LIBRARY_PATH (the env's nvidia/*/lib dirs, plus a placed cuDNN dir) and PATH (ptxas
  from the nvcc wheel, for XLA); a second marked block inside `deactivate` puts
  LD_LIBRARY_PATH back (venv already restores PATH itself).
- conda: etc/conda/activate.d/tfgpu-install.sh and deactivate.d/tfgpu-install.sh.
- Both: a launcher <env>/bin/tfgpu-run CMD... that sets the variables itself, because
  sudo strips LD_LIBRARY_PATH and cron, systemd and IDEs never source activate.
- `--shell-rc FILE`: a marked block in the user's rc that activates the env.
Nothing outside our marks is touched; undo removes exactly what was added.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shlex
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, TypeVar

from installer.context import Context
from installer.errors import BadInputError, EnvironmentProblem, StepFailed, TfgpuError
from installer.files import (
    MARK,
    BlockSpan,
    MarkerError,
    atomic_write,
    block_bytes,
    edit_target,
    find_block,
    put_block,
    remove_file,
    render_block_bytes,
    replace_block,
    scan_blocks,
)
from installer.steps.base import Step, UndoRecord, checkpoint

LAUNCHER = "tfgpu-run"
CONDA_SCRIPT = "tfgpu-install.sh"


def nvidia_lib_dirs(env: Path) -> list[Path]:
    """The env's nvidia/*/lib directories (PyPI CUDA/cuDNN wheels), sorted for stable output."""
    return sorted(p for p in Path(env).glob("lib/python*/site-packages/nvidia/*/lib") if p.is_dir())


def nvidia_bin_dirs(env: Path) -> list[Path]:
    """Where ptxas/nvlink from the nvcc wheel live (XLA calls ptxas by name)."""
    return sorted(p for p in Path(env).glob("lib/python*/site-packages/nvidia/cuda_nvcc/bin") if p.is_dir())


def _q(paths: Sequence[Path]) -> str:
    return shlex.quote(":".join(str(p) for p in paths))


# --- the texts ---------------------------------------------------------------------------


def sh_block(libs: Sequence[Path], bins: Sequence[Path]) -> str:
    lines = [
        "# Managed by tfgpu-install (rewritten on re-install; edits here are lost).",
        'if [ -z "${_TFGPU_OLD_LD_LIBRARY_PATH+x}" ]; then',
        '    _TFGPU_OLD_LD_LIBRARY_PATH="${LD_LIBRARY_PATH-}"',
        "fi",
        "export _TFGPU_OLD_LD_LIBRARY_PATH",
    ]
    if libs:
        lines.append(
            f"LD_LIBRARY_PATH={_q(libs)}" + '"${_TFGPU_OLD_LD_LIBRARY_PATH:+:$_TFGPU_OLD_LD_LIBRARY_PATH}"'
        )
        lines.append("export LD_LIBRARY_PATH")
    if bins:
        lines += [f'PATH={_q(bins)}":$PATH"', "export PATH"]
    return "\n".join(lines) + "\n"


SH_DEACTIVATE = """\
if [ -n "${_TFGPU_OLD_LD_LIBRARY_PATH+x}" ]; then
    if [ -n "$_TFGPU_OLD_LD_LIBRARY_PATH" ]; then
        LD_LIBRARY_PATH="$_TFGPU_OLD_LD_LIBRARY_PATH"
        export LD_LIBRARY_PATH
    else
        unset LD_LIBRARY_PATH
    fi
    unset _TFGPU_OLD_LD_LIBRARY_PATH
fi
"""


def fish_block(libs: Sequence[Path], bins: Sequence[Path]) -> str:
    lines = [
        "# Managed by tfgpu-install (rewritten on re-install; edits here are lost).",
        "if not set -q _TFGPU_OLD_LD_LIBRARY_PATH",
        '    set -gx _TFGPU_OLD_LD_LIBRARY_PATH "$LD_LIBRARY_PATH"',
        "end",
    ]
    if libs:
        lines += [
            'if test -n "$_TFGPU_OLD_LD_LIBRARY_PATH"',
            f'    set -gx LD_LIBRARY_PATH {_q(libs)}":$_TFGPU_OLD_LD_LIBRARY_PATH"',
            "else",
            f"    set -gx LD_LIBRARY_PATH {_q(libs)}",
            "end",
        ]
    if bins:
        lines.append("set -gx PATH " + " ".join(shlex.quote(str(b)) for b in bins) + " $PATH")
    return "\n".join(lines) + "\n"


FISH_DEACTIVATE = """\
if set -q _TFGPU_OLD_LD_LIBRARY_PATH
    if test -n "$_TFGPU_OLD_LD_LIBRARY_PATH"
        set -gx LD_LIBRARY_PATH $_TFGPU_OLD_LD_LIBRARY_PATH
    else
        set -e LD_LIBRARY_PATH
    end
    set -e _TFGPU_OLD_LD_LIBRARY_PATH
end
"""


def csh_block(libs: Sequence[Path], bins: Sequence[Path]) -> str:
    # csh's `deactivate` is a one-line alias we leave alone: it restores PATH, not LD_LIBRARY_PATH.
    lines = ["# Managed by tfgpu-install (rewritten on re-install; edits here are lost)."]
    if libs:
        # csh expands $VAR even on lines it skips, so the variable must exist before any test.
        lines += [
            'if ( ! $?LD_LIBRARY_PATH ) setenv LD_LIBRARY_PATH ""',
            'if ( "$LD_LIBRARY_PATH" != "" ) then',
            f'    setenv LD_LIBRARY_PATH {_q(libs)}":$LD_LIBRARY_PATH"',
            "else",
            f"    setenv LD_LIBRARY_PATH {_q(libs)}",
            "endif",
        ]
    if bins:
        lines.append(f'setenv PATH {_q(bins)}":$PATH"')
    return "\n".join(lines) + "\n"


def conda_scripts(libs: Sequence[Path], bins: Sequence[Path]) -> tuple[str, str]:
    head = "# Managed by tfgpu-install: removed by `tfgpu-install rollback`.\n"
    act = head + 'export _TFGPU_OLD_LD_LIBRARY_PATH="${LD_LIBRARY_PATH-}"\n'
    if libs:
        act += f'export LD_LIBRARY_PATH={_q(libs)}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\n'
    if bins:
        act += f'export _TFGPU_OLD_PATH="$PATH"\nexport PATH={_q(bins)}":$PATH"\n'
    deact = head + SH_DEACTIVATE
    deact += (
        'if [ -n "${_TFGPU_OLD_PATH+x}" ]; then\n    export PATH="$_TFGPU_OLD_PATH"\n'
        "    unset _TFGPU_OLD_PATH\nfi\n"
    )
    return act, deact


def launcher(env: Path, backend: str, libs: Sequence[Path], bins: Sequence[Path]) -> str:
    var = "CONDA_PREFIX" if backend == "conda" else "VIRTUAL_ENV"
    paths = [env / "bin", *bins]
    text = f"""#!/bin/sh
# {LAUNCHER}: written by tfgpu-install. Runs a command with this environment's CUDA/cuDNN
# libraries and tools and no activation needed: for sudo (which strips LD_LIBRARY_PATH),
# cron, systemd units and IDEs.   Usage: {LAUNCHER} python train.py
if [ "$#" -eq 0 ]; then
    echo "usage: {LAUNCHER} COMMAND [ARGS...]   e.g. {LAUNCHER} python train.py" >&2
    exit 2
fi
{var}={shlex.quote(str(env))}
export {var}
PATH={_q(paths)}"${{PATH:+:$PATH}}"
export PATH
"""
    if libs:
        text += f'LD_LIBRARY_PATH={_q(libs)}"${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\nexport LD_LIBRARY_PATH\n'
    return text + 'exec "$@"\n'


# --- the step ----------------------------------------------------------------------------

# venv activate scripts: (file, body renderer, deactivate body, where `deactivate` starts)
_VENV_SCRIPTS = (
    ("activate", sh_block, SH_DEACTIVATE, r"^deactivate \(\) \{"),
    ("activate.fish", fish_block, FISH_DEACTIVATE, r"^function deactivate\b"),
    ("activate.csh", csh_block, None, None),
)


class WriteActivation(Step):
    id = "activation.write"

    def __init__(self, env: Path, backend: str = "venv", extra_lib_dirs: Sequence[Path] = ()) -> None:
        self.env = Path(env)
        self.backend = backend
        self.extra_lib_dirs = [Path(p) for p in extra_lib_dirs]

    def describe(self) -> str:
        where = "etc/conda/activate.d" if self.backend == "conda" else "bin/activate"
        return f"activation: LD_LIBRARY_PATH and PATH in {where}, and the {LAUNCHER} launcher"

    def libs(self) -> list[Path]:
        # A placed cuDNN goes first: it must win over any cuDNN wheel.
        return [*self.extra_lib_dirs, *nvidia_lib_dirs(self.env)]

    def bins(self) -> list[Path]:
        return nvidia_bin_dirs(self.env)

    def _wanted(self) -> dict[Path, tuple[str, bytes, dict[str, Optional[bytes]]]]:
        """path -> ("whole", bytes, {}) for files we own; ("block", new bytes, {block name: the
        block that was there before, or None}) for files we edit (only inside our marks)."""
        libs, bins = self.libs(), self.bins()
        out: dict[Path, tuple[str, bytes, dict[str, Optional[bytes]]]] = {}
        if self.backend == "conda":
            act, deact = conda_scripts(libs, bins)
            out[self.env / "etc/conda/activate.d" / CONDA_SCRIPT] = ("whole", act.encode(), {})
            out[self.env / "etc/conda/deactivate.d" / CONDA_SCRIPT] = ("whole", deact.encode(), {})
        else:
            for name, render, deact_body, deact_at in _VENV_SCRIPTS:
                path = self.env / "bin" / name
                if not path.is_file():
                    continue
                data, before = _parsed(path, lambda: put_block(path.read_bytes(), render(libs, bins)))
                previous = {"": before}
                # Only inside an existing `deactivate`: appended, it would run at activation.
                if deact_body and deact_at and re.search(deact_at.encode(), data, re.M):
                    data, previous["deactivate"] = put_block(data, deact_body, block="deactivate",
                                                             after=deact_at, indent="    ")
                out[path] = ("block", data, previous)
        out[self.env / "bin" / LAUNCHER] = ("whole", launcher(self.env, self.backend, libs, bins).encode(), {})
        return out

    def touches(self, ctx: Context) -> list[str]:
        names = (
            [f"etc/conda/activate.d/{CONDA_SCRIPT}", f"etc/conda/deactivate.d/{CONDA_SCRIPT}"]
            if self.backend == "conda"
            else [f"bin/{n}" for n, *_ in _VENV_SCRIPTS]
        )
        return [str(self.env / n) for n in names + [f"bin/{LAUNCHER}"]]

    def check(self, ctx: Context) -> bool:
        if self.backend != "conda" and not (self.env / "bin" / "activate").is_file():
            return False
        try:
            wanted = self._wanted()
        except TfgpuError:
            return False  # markers out of order: apply says why
        return all(path.is_file() and path.read_bytes() == data for path, (_, data, _) in wanted.items())

    def apply(self, ctx: Context) -> UndoRecord:
        if self.backend != "conda" and not (self.env / "bin" / "activate").is_file():
            raise StepFailed(
                f"{self.env} has no bin/activate: it is not a virtual environment",
                hint="run the install again (it recreates the env), or pass a venv with --env",
            )
        record: dict[str, dict[str, Any]] = {"edited": {}, "written": {}}
        for i, (path, (kind, data, previous)) in enumerate(self._wanted().items()):
            if kind == "block":
                record["edited"][str(path)] = {name: _b64(old) for name, old in previous.items()}
                atomic_write(edit_target(path), data)
            else:
                record["written"][str(path)] = _b64(path.read_bytes() if path.is_file() else None)
                atomic_write(path, data, mode=0o755 if path.name == LAUNCHER else 0o644)
            if i == 0:
                checkpoint(ctx, self.id, "middle")
        return record

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if record.get("partial"):
            return  # killed mid-apply: the executor already put back every path touches() named
        for p, previous in record.get("edited", {}).items():
            # None: a record of an earlier version, which kept no previous blocks.
            path = edit_target(Path(p))
            if path.is_file() and path.name != LAUNCHER and not path.name.endswith(".sh"):
                restore_blocks(path, previous or {"deactivate": None, "": None})
        for p, old in record.get("written", {}).items():
            if old is None:
                remove_file(Path(p))
            else:
                atomic_write(Path(p), base64.b64decode(old))


def _b64(data: Optional[bytes]) -> Optional[str]:
    return base64.b64encode(data).decode() if data is not None else None


def restore_blocks(path: Path, previous: dict[str, Optional[str]]) -> None:
    """Put back in `path` the blocks that were there before (base64), removing ours where
    there was none; a block no longer there (the user removed it) is left out."""
    data = path.read_bytes()
    new = data
    for name, old in previous.items():
        span = _parsed(path, lambda: find_block(new, name))
        if span is not None:
            new = replace_block(new, span, base64.b64decode(old) if old else b"")
    if new != data:
        atomic_write(path, new)


class WriteShellRc(Step):
    """A marked block in the user's shell rc that activates the env in every new shell.

    The rc is the user's: the block's markers carry this env's id, so envs sharing one rc never
    touch each other's blocks; a symlinked rc stays a link (its target is edited); owner, mode,
    line endings and every byte outside the block are kept; undo puts back the block that was
    there before (or removes ours), so install + rollback gives the file back byte for byte.
    """

    id = "shell-rc.write"

    def __init__(self, rc: Path, env: Path, backend: str = "venv") -> None:
        self.rc = Path(rc)
        self.env = Path(env)
        self.backend = backend

    def describe(self) -> str:
        return f"activate {self.env} in new shells ({self.rc})"

    def body(self) -> str:
        env = shlex.quote(str(self.env))
        head = "# Managed by tfgpu-install: activates the TensorFlow GPU env in new shells.\n"
        if self.rc.name.endswith(".fish"):
            act = shlex.quote(str(self.env / "bin" / "activate.fish"))
            if self.backend == "conda":
                return head + f"type -q conda; and conda activate {env}\n"
            return head + f"test -f {act}; and source {act}\n"
        if self.backend == "conda":
            return head + f"command -v conda >/dev/null 2>&1 && conda activate {env}\n"
        act = shlex.quote(str(self.env / "bin" / "activate"))
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
        span = _parsed(self.rc, lambda: self._ours(data))
        previous: Optional[bytes] = None
        if span is not None:  # ours, or adopted from an earlier version: replaced in place
            previous = block_bytes(data, span)
            written = replace_block(data, span, render_block_bytes(self.body(), self.tag(), newline=span.newline))
        else:
            written, _ = put_block(data, self.body(), self.tag())
        checkpoint(ctx, self.id, "middle")
        atomic_write(target, written)
        return {"format": 2, "target": str(target), "existed": old is not None, "tag": self.tag(),
                "previous": _b64(previous)}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if record.get("partial"):
            return  # killed mid-apply: the executor already put back every path touches() named
        target = Path(record.get("target") or edit_target(self.rc))
        if not target.is_file():
            return
        if record.get("format") == 2:
            restore_blocks(target, {str(record.get("tag")): record.get("previous")})
        else:  # a record of an earlier version: its block had no id, it kept no previous block
            restore_blocks(target, {"": None})
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
    elif target.exists() and os.geteuid() not in (0, target.stat().st_uid):
        # Rewriting it would make it ours: its owner must stay its owner.
        problem = f"{target}{via} belongs to uid {target.stat().st_uid}, not to you"
    if problem is not None:
        raise EnvironmentProblem(problem, hint="pass a regular file to --shell-rc (e.g. ~/.bashrc)",
                                 ref="shell-rc-unusable")
    try:
        return target.read_bytes() if target.exists() else None
    except PermissionError as exc:
        raise EnvironmentProblem(f"cannot read {target}{via}: {exc.strerror}",
                                 hint="fix its permissions, or pass another file to --shell-rc",
                                 ref="shell-rc-unusable") from exc


_T = TypeVar("_T")


def _parsed(path: Path, read: Callable[[], _T]) -> _T:
    """`read()`, with a MarkerError turned into the error users see (exit 5, nothing changed)."""
    try:
        return read()
    except MarkerError as err:
        raise BadInputError(
            f"{path}, {err}: its tfgpu-install markers are unbalanced (edited by hand?), so which "
            "lines are ours is unclear; nothing was changed",
            hint=f"fix or delete the marker lines (`# >>> {MARK} ... >>>` / `# <<< {MARK} ... <<<`) "
            "in that file, then run the command again",
            ref="rc-markers-unbalanced",
        ) from err


def validate_shell_rc(rc: Path, env: Path) -> None:
    """Refuse, before any step runs, an rc that install could not edit safely."""
    data = read_rc(rc)
    if data is not None:
        _parsed(edit_target(rc), lambda: WriteShellRc(rc, env)._ours(data))
