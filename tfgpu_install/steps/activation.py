"""Activation: make the env's CUDA/cuDNN libraries and ptxas visible wherever the env is used.

- venv: a marked block at the end of bin/activate (and activate.fish / activate.csh) sets
  LD_LIBRARY_PATH (the env's nvidia/*/lib dirs, plus a placed cuDNN dir) and PATH (ptxas
  from the nvcc wheel, for XLA); a second marked block inside `deactivate` puts
  LD_LIBRARY_PATH back (venv already restores PATH itself).
- conda: etc/conda/activate.d/tfgpu-install.sh and deactivate.d/tfgpu-install.sh.
- Both: a launcher <env>/bin/tfgpu-run CMD... that sets the variables itself, because
  sudo strips LD_LIBRARY_PATH and cron, systemd and IDEs never source activate.
(`--shell-rc FILE`, the user's rc, is steps/shell_rc.py: the same block code.)
Nothing outside our marks is touched; undo puts back the blocks that were there before.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
from pathlib import Path
from typing import Callable, Optional, Sequence, TypeVar

from tfgpu_install.context import Context
from tfgpu_install.env.layout import nvidia_lib_dirs
from tfgpu_install.errors import BadInputError, StepFailed, TfgpuError
from tfgpu_install.files import (
    MARK,
    MarkerError,
    atomic_write,
    edit_target,
    find_block,
    put_block,
    remove_file,
    replace_block,
)
from tfgpu_install.guard import shellquote
from tfgpu_install.guard.jsondoc import JSONValue, obj
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

LAUNCHER = "tfgpu-run"
CONDA_SCRIPT = "tfgpu-install.sh"


def nvidia_bin_dirs(env: Path) -> list[Path]:
    """Where ptxas/nvlink from the nvcc wheel live (XLA calls ptxas by name)."""
    return sorted(p for p in Path(env).glob("lib/python*/site-packages/nvidia/cuda_nvcc/bin") if p.is_dir())


def _q(paths: Sequence[Path], quote: Callable[[str], str] = shellquote.sh) -> str:
    """A ':'-joined path list as one word of the shell `quote` is for (envpath.py keeps ':' out of
    the paths themselves)."""
    return quote(":".join(str(p) for p in paths))


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
            f'    set -gx LD_LIBRARY_PATH {_q(libs, shellquote.fish)}":$_TFGPU_OLD_LD_LIBRARY_PATH"',
            "else",
            f"    set -gx LD_LIBRARY_PATH {_q(libs, shellquote.fish)}",
            "end",
        ]
    if bins:
        lines.append("set -gx PATH " + " ".join(shellquote.fish(str(b)) for b in bins) + " $PATH")
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
            f'    setenv LD_LIBRARY_PATH {_q(libs, shellquote.csh)}":$LD_LIBRARY_PATH"',
            "else",
            f"    setenv LD_LIBRARY_PATH {_q(libs, shellquote.csh)}",
            "endif",
        ]
    if bins:
        lines.append(f'setenv PATH {_q(bins, shellquote.csh)}":$PATH"')
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
                data, before = parsed_blocks(path, lambda: put_block(path.read_bytes(), render(libs, bins)))  # noqa: B023 (called at once)
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
        paths = [self.env / n for n in names + [f"bin/{LAUNCHER}"]]
        # A linked file is written at its target: the executor backs up the target's bytes too.
        return [str(p) for p in paths] + [str(edit_target(p)) for p in paths if p.is_symlink()]

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
        edited: dict[str, JSONValue] = {}
        written: dict[str, JSONValue] = {}
        record: UndoRecord = {"edited": edited, "written": written}
        for i, (path, (kind, data, previous)) in enumerate(self._wanted().items()):
            if kind == "block":
                edited[str(path)] = {name: b64(old) for name, old in previous.items()}
                atomic_write(edit_target(path), data)
            else:
                written[str(path)] = b64(path.read_bytes() if path.is_file() else None)
                # A file that was there keeps its mode (undo gives back its bytes, not its mode).
                fresh = not path.is_file() or (path.name == LAUNCHER and not os.access(path, os.X_OK))
                mode = (0o755 if path.name == LAUNCHER else 0o644) if fresh else None
                atomic_write(edit_target(path), data, mode=mode)
            if i == 0:
                checkpoint(ctx, self.id, "middle")
        return record

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if record.get("partial"):
            return  # killed mid-apply: the executor already put back every path touches() named
        for p, previous in obj(record, "edited").items():
            # None: a record of an earlier version, which kept no previous blocks.
            path = edit_target(Path(p))
            if path.is_file() and path.name != LAUNCHER and not path.name.endswith(".sh"):
                blocks = {str(k): v if isinstance(v, str) else None for k, v in previous.items()} \
                    if isinstance(previous, dict) else {}
                restore_blocks(path, blocks or {"deactivate": None, "": None})
        for p, old in obj(record, "written").items():
            if old is None:
                remove_file(Path(p))
            elif isinstance(old, str):
                atomic_write(edit_target(Path(p)), base64.b64decode(old))


def b64(data: Optional[bytes]) -> Optional[str]:
    return base64.b64encode(data).decode() if data is not None else None


def restore_blocks(path: Path, previous: dict[str, Optional[str]]) -> None:
    """Put back in `path` the blocks that were there before (base64), removing ours where
    there was none; a block no longer there (the user removed it) is left out."""
    data = path.read_bytes()
    new = data
    for name, old in previous.items():
        span = parsed_blocks(path, lambda: find_block(new, name))  # noqa: B023 (called at once)
        if span is not None:
            new = replace_block(new, span, base64.b64decode(old) if old else b"")
    if new != data:
        atomic_write(path, new)


_T = TypeVar("_T")


def parsed_blocks(path: Path, read: Callable[[], _T]) -> _T:
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
