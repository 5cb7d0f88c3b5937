"""`--system-ldconfig` (root only): register the env's CUDA/cuDNN library dirs with the
system loader, so programs that never see the env's LD_LIBRARY_PATH still find them.

Writes /etc/ld.so.conf.d/tfgpu-<env>.conf, runs ldconfig, and confirms with `ldconfig -p`
that every library in those dirs is now in the cache. Under a test root (ctx.root != "/")
ldconfig runs as `ldconfig -C <root>/etc/ld.so.cache -f <root>/etc/ld.so.conf`, so tests
exercise the real ldconfig against a temp cache.
"""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path
from typing import Optional, Sequence

from tfgpu_install.context import Context
from tfgpu_install.env.layout import nvidia_lib_dirs
from tfgpu_install.errors import EnvironmentProblem, StepFailed
from tfgpu_install.files import atomic_write, remove_file
from tfgpu_install.guard.jsondoc import text
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

_SONAME = re.compile(r"^lib[\w.+-]+\.so(\.\d+)+$")


def conf_name(env: Path) -> str:
    """tfgpu-<basename>-<hash of the real path>.conf: two envs with one basename never share
    (and unregister) one file."""
    import hashlib

    real = os.path.realpath(str(env))
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", Path(env).name)[:64] or "env"
    return f"tfgpu-{name}-{hashlib.sha256(real.encode()).hexdigest()[:12]}.conf"


class SystemLdconfig(Step):
    id = "ldconfig.system"

    def __init__(self, env: Path, extra_lib_dirs: Sequence[Path] = ()) -> None:
        self.env = Path(env)
        self.extra_lib_dirs = [Path(p) for p in extra_lib_dirs]

    def describe(self) -> str:
        return f"register the env's CUDA libraries with the system loader (/etc/ld.so.conf.d/{conf_name(self.env)})"

    def conf_path(self, ctx: Context) -> Path:
        return ctx.sys_path(f"/etc/ld.so.conf.d/{conf_name(self.env)}")

    def lib_dirs(self) -> list[Path]:
        return [*self.extra_lib_dirs, *nvidia_lib_dirs(self.env)]

    def conf_text(self) -> str:
        head = f"# Managed by tfgpu-install for {self.env}: removed by `tfgpu-install rollback`.\n"
        return head + "".join(f"{d}\n" for d in self.lib_dirs())

    def _ldconfig(self, ctx: Context) -> list[str]:
        exe = ctx.runner.which("ldconfig") or "/sbin/ldconfig"
        if str(ctx.root) == "/":
            return [exe]
        return [exe, "-C", str(ctx.sys_path("/etc/ld.so.cache")), "-f", str(ctx.sys_path("/etc/ld.so.conf"))]

    def _expected(self) -> list[Path]:
        """Library files named by their soname (what ldconfig lists) in our dirs."""
        return sorted(p for d in self.lib_dirs() if d.is_dir() for p in d.iterdir() if _SONAME.match(p.name))

    def _missing_from_cache(self, ctx: Context) -> Optional[list[str]]:
        """Libraries not in `ldconfig -p` (None when ldconfig -p itself failed)."""
        argv = self._ldconfig(ctx)
        listing = ctx.runner.run([argv[0], "-p", *argv[1:3]], desc="ldconfig -p", timeout=60)
        if not listing.ok:
            return None
        listed = set(re.findall(r"=>\s*(\S+)", listing.stdout))
        return [str(p) for p in self._expected() if str(p) not in listed]

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.conf_path(ctx))]

    def check(self, ctx: Context) -> bool:
        conf = self.conf_path(ctx)
        if not conf.is_file() or conf.read_text() != self.conf_text():
            return False
        return self._missing_from_cache(ctx) == []

    def _require_root(self, ctx: Context) -> None:
        if str(ctx.root) == "/" and os.geteuid() != 0:
            raise EnvironmentProblem(
                "--system-ldconfig edits /etc/ld.so.conf.d and needs root",
                hint="run the install with sudo, or leave out --system-ldconfig (activation and tfgpu-run suffice)",
                ref="needs-root",
            )

    def _run_ldconfig(self, ctx: Context) -> None:
        done = ctx.runner.run(self._ldconfig(ctx), desc="ldconfig", timeout=300, mutating=True)
        if not done.ok:
            raise StepFailed(
                f"ldconfig failed (exit {done.returncode}): {done.stderr.strip()[:300]}",
                hint="fix the message above, then run the install again (it resumes)",
            )

    def apply(self, ctx: Context) -> UndoRecord:
        self._require_root(ctx)
        conf = self.conf_path(ctx)
        old = conf.read_bytes() if conf.is_file() else None
        atomic_write(conf, self.conf_text())
        checkpoint(ctx, self.id, "middle")
        self._run_ldconfig(ctx)
        missing = self._missing_from_cache(ctx)
        if missing:
            raise StepFailed(
                f"after ldconfig, `ldconfig -p` still does not list: {', '.join(missing[:5])}",
                hint=f"check that {conf} is included by /etc/ld.so.conf (`include /etc/ld.so.conf.d/*.conf`)",
            )
        return {"conf": str(conf), "old": base64.b64encode(old).decode() if old is not None else None}

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        conf = Path(text(record, "conf") or self.conf_path(ctx))
        old = text(record, "old")
        if record.get("partial"):
            pass  # the executor already put the conf file back as it was; refresh the cache
        elif old is None:
            remove_file(conf)
        else:
            atomic_write(conf, base64.b64decode(old))
        self._run_ldconfig(ctx)
