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
import re
import shlex
from pathlib import Path
from typing import Optional, Sequence

from installer.context import Context
from installer.errors import StepFailed
from installer.files import atomic_write, read_block, remove_block, remove_file, set_block
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

    def _wanted(self) -> dict[Path, tuple[str, str]]:
        """path -> ("whole", text) for files we own, ("block", new text) for files we edit."""
        libs, bins = self.libs(), self.bins()
        out: dict[Path, tuple[str, str]] = {}
        if self.backend == "conda":
            act, deact = conda_scripts(libs, bins)
            out[self.env / "etc/conda/activate.d" / CONDA_SCRIPT] = ("whole", act)
            out[self.env / "etc/conda/deactivate.d" / CONDA_SCRIPT] = ("whole", deact)
        else:
            for name, render, deact_body, deact_at in _VENV_SCRIPTS:
                path = self.env / "bin" / name
                if not path.is_file():
                    continue
                text = set_block(path.read_text(), render(libs, bins))
                # Only inside an existing `deactivate`: appended, it would run at activation.
                if deact_body and deact_at and re.search(deact_at, text, re.M):
                    text = set_block(text, deact_body, block="deactivate", after=deact_at, indent="    ")
                out[path] = ("block", text)
        out[self.env / "bin" / LAUNCHER] = ("whole", launcher(self.env, self.backend, libs, bins))
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
        for path, (_, text) in self._wanted().items():
            if not path.is_file() or path.read_text() != text:
                return False
        return True

    def apply(self, ctx: Context) -> UndoRecord:
        if self.backend != "conda" and not (self.env / "bin" / "activate").is_file():
            raise StepFailed(
                f"{self.env} has no bin/activate: it is not a virtual environment",
                hint="run the install again (it recreates the env), or pass a venv with --env",
            )
        record: dict[str, dict[str, Optional[str]]] = {"edited": {}, "written": {}}
        for i, (path, (kind, text)) in enumerate(self._wanted().items()):
            if kind == "block":
                record["edited"][str(path)] = None
                atomic_write(path, text)
            else:
                old = path.read_bytes() if path.is_file() else None
                record["written"][str(path)] = base64.b64encode(old).decode() if old is not None else None
                atomic_write(path, text, mode=0o755 if path.name == LAUNCHER else 0o644)
            if i == 0:
                checkpoint(ctx, self.id, "middle")
        return record

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if record.get("partial"):
            # Killed mid-apply: the executor restored what existed; strip blocks from the rest.
            record = {"edited": {p: None for p in self.touches(ctx)}, "written": {}}
        for p in record.get("edited", {}):
            path = Path(p)
            if path.is_file() and path.name != LAUNCHER and not path.name.endswith(".sh"):
                text = path.read_text()
                new = remove_block(remove_block(text, "deactivate"))
                if new != text:
                    atomic_write(path, new)
        for p, old in record.get("written", {}).items():
            if old is None:
                remove_file(Path(p))
            else:
                atomic_write(Path(p), base64.b64decode(old))


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

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.rc)]

    def check(self, ctx: Context) -> bool:
        text = self.rc.read_text() if self.rc.is_file() else ""
        return read_block(text) == read_block(set_block("", self.body()))

    def apply(self, ctx: Context) -> UndoRecord:
        existed = self.rc.is_file()
        text = self.rc.read_text() if existed else ""
        checkpoint(ctx, self.id, "middle")
        atomic_write(self.rc, set_block(text, self.body()))
        return {"existed": existed}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        if not self.rc.is_file():
            return
        text = self.rc.read_text()
        new = remove_block(text)
        if not new and record.get("existed") is False:
            remove_file(self.rc)
        elif new != text:
            atomic_write(self.rc, new)
