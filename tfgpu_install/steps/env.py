"""Step env.create: a venv (uv or stdlib) or a conda env on the planned Python X.Y.

The env's Python version is read from files, not by running it (pyvenv.cfg for venvs,
conda-meta/python-*.json for conda envs), so a no-op re-run costs a stat or two.
An env built on another Python is never reused or replaced silently: check() refuses
with the two versions and the fix.

Interrupted creation: before creating, apply() writes a marker in the env's state dir
(not in the env, which may not exist yet). A half-made env with that marker is ours
to remove and redo; without it, a directory we do not recognise is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

from tfgpu_install.context import Context
from tfgpu_install.env.ownership import looks_like_env, stamp
from tfgpu_install.env.ownership import problem as ownership_problem
from tfgpu_install.env.target import BACKENDS, RATTLER, TargetEnv, env_python_version, minor_of
from tfgpu_install.env.tools import find_conda, find_uv, last_lines, tool_env
from tfgpu_install.errors import EnvironmentProblem, StepFailed
from tfgpu_install.files import atomic_write
from tfgpu_install.guard.jsondoc import text
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

# --- the step ------------------------------------------------------------------------------


def bundled_pip_wheel(base: Path, python_version: str) -> Optional[Path]:
    """The pip wheel an interpreter ships for ensurepip (<prefix>/lib/pythonX.Y/ensurepip/_bundled),
    or Debian's python3-pip-whl (/usr/share/python-wheels): the newest found, else None."""
    prefix = Path(os.path.realpath(base)).parent.parent
    found: list[Path] = []
    for d in (prefix / "lib" / f"python{python_version}" / "ensurepip" / "_bundled", Path("/usr/share/python-wheels")):
        found += [p for p in d.glob("pip-*-py3-none-any.whl") if p.is_file()]

    def key(p: Path) -> tuple[int, ...]:
        parts = p.name.split("-")[1].split(".")
        return tuple(int(x) if x.isdigit() else 0 for x in parts)

    return max(found, key=key) if found else None


class CreateEnv(Step):
    id = "env.create"

    def __init__(
        self, env: TargetEnv, python_version: str, base_python: Optional[Path] = None, seed_pip: bool = False,
        channel: Optional[str] = None,
    ) -> None:
        """python_version: "3.11" (the plan's X.Y). base_python: the interpreter a venv is
        built from (the resolver's choice.python_path or --python); unused for conda.
        seed_pip: give the venv pip (offline: the interpreter's bundled pip wheel, else ensurepip) so
        `pip install` works in it; install's default (--no-pip turns it off). packages.install uses uv."""
        if env.backend not in BACKENDS:
            raise EnvironmentProblem(f"unknown backend {env.backend!r}", hint="use --backend venv or --backend conda")
        self.env = env
        self.python_version = minor_of(python_version)
        self.base_python = Path(base_python) if base_python else None
        self.seed_pip = seed_pip
        self.channel = channel or "conda-forge"  # conda backend: where Python comes from

    def describe(self) -> str:
        kind = "conda env" if self.env.backend == "conda" else "venv"
        return f"create {kind} {self.env.path} with Python {self.python_version}"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.env.path)]

    def _marker(self, ctx: Context) -> Path:
        from tfgpu_install.env.state import env_state_dir

        return env_state_dir(ctx, self.env.path) / "env-creating.json"

    def _identity_file(self, ctx: Context) -> Path:
        """The identity of the directory this step made (env/ownership.py), kept until its undo:
        a kill between the end of apply and the journal's "done" still knows what it made."""
        from tfgpu_install.env.state import env_state_dir

        return env_state_dir(ctx, self.env.path) / "env-identity.json"

    # check ------------------------------------------------------------------------------

    def check(self, ctx: Context) -> bool:
        path = self.env.path
        if self._marker(ctx).exists():
            return False  # our own creation was interrupted: apply() redoes it
        if path.is_symlink() and not path.exists():
            raise EnvironmentProblem(f"env path {path} is a dangling symlink", hint="remove it or pick another --env")
        if path.exists() and not path.is_dir():
            raise EnvironmentProblem(
                f"env path {path} exists and is a file, not a directory",
                hint="pick another --env, or move that file away",
                ref="env-is-file",
            )
        if not path.exists():
            self._check_writable(path)
            return False
        have = env_python_version(self.env)
        if have is None:
            if not any(path.iterdir()):
                self._check_writable(path)
                return False  # an empty directory: fine to create the env in it
            raise EnvironmentProblem(
                f"{path} exists and is not a {'conda env' if self.env.backend == 'conda' else 'virtual env'}"
                " (no pyvenv.cfg/conda-meta); refusing to write into it",
                hint="pick another --env, or an empty/new directory",
                ref="env-not-an-env",
            )
        if minor_of(have) != self.python_version:
            raise EnvironmentProblem(
                f"the env at {path} is built on Python {have}, but the plan needs Python {self.python_version}",
                hint=f"use another --env, or delete {path} (rm -rf) and run again; "
                f"or plan for Python {minor_of(have)} with --python {minor_of(have)}",
                ref="env-wrong-python",
            )
        if self.env.backend == "conda" and not (path / "conda-meta").is_dir():
            raise EnvironmentProblem(
                f"{path} is a venv, not a conda env", hint="use --backend venv, or another --env",
                ref="env-wrong-backend",
            )
        if not os.path.exists(self.env.python):
            raise EnvironmentProblem(
                f"the env at {path} is broken: its interpreter {self.env.python} is missing "
                "(was its base Python removed?)",
                hint=f"delete {path} and run again, or use another --env",
                ref="env-broken",
            )
        return True

    @staticmethod
    def _check_writable(path: Path) -> None:
        parent = path
        while not parent.exists():
            parent = parent.parent
        target = path if path.exists() else parent
        if not target.is_dir() or not os.access(target, os.W_OK | os.X_OK):
            raise EnvironmentProblem(
                f"cannot create the env at {path}: no write permission on {target}",
                hint="pick a writable --env (the default lives under your user data dir)",
                ref="no-permission",
            )

    # apply ------------------------------------------------------------------------------

    def apply(self, ctx: Context) -> UndoRecord:
        path = self.env.path
        marker = self._marker(ctx)
        # Everything that can be known before acting is checked before the first change.
        if self.env.backend == "conda":
            conda_engine(ctx)
        else:
            self._check_base_version(ctx, self._base_interpreter())
        if marker.exists():
            # Resume after a kill mid-creation: what is there is our half-made env, while it is
            # still the directory we began (env/ownership.py); anything else is not ours to clear.
            prior = json.loads(marker.read_text())
            if path.exists() or path.is_symlink():
                still_empty = prior.get("existed_empty") and path.is_dir() and not any(path.iterdir())
                if not self.owns(ctx, path) and not still_empty:
                    raise EnvironmentProblem(
                        f"{path} is not the env tfgpu-install began to create there (replaced since): "
                        "nothing of it was removed", hint=f"move {path} away, or use another --env",
                        ref="env-replaced")
                if not prior.get("existed_empty"):
                    shutil.rmtree(path)
                else:
                    _empty_dir(path)
        else:
            prior = {"existed_empty": path.is_dir(), "path": str(path)}
            atomic_write(marker, json.dumps(prior))
        try:
            if self.env.backend == "conda":
                # conda/micromamba want to make the prefix themselves (micromamba refuses an
                # existing non-conda folder); an empty one the user made is given back by undo.
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.is_dir():
                    path.rmdir()
                self._check_writable(path)
            else:
                path.mkdir(parents=True, exist_ok=True)
                # the directory this step is making, marked at once, for an undo after a kill
                # (env/ownership.py: a new directory may get a freed inode's number)
                identity = stamp(path)
                atomic_write(self._identity_file(ctx), json.dumps(identity))
        except EnvironmentProblem:
            marker.unlink(missing_ok=True)
            raise
        except OSError as exc:
            marker.unlink(missing_ok=True)
            raise EnvironmentProblem(
                f"cannot create the env directory {path}: {exc.strerror}",
                hint="pick a writable --env with free space",
                ref="no-permission" if exc.errno in (1, 13, 30) else "env-create",
            ) from exc
        checkpoint(ctx, self.id, "middle")
        if self.env.backend == "conda":
            tool = self._create_conda(ctx)  # conda makes the prefix itself: marked once it is there
            identity = stamp(path)
            atomic_write(self._identity_file(ctx), json.dumps(identity))
        else:
            tool = self._create_venv(ctx)
        got = env_python_version(self.env)
        if got is None or minor_of(got) != self.python_version or not os.path.exists(self.env.python):
            raise StepFailed(
                f"{tool} made {path}, but it holds Python {got or 'none'} instead of {self.python_version}",
                hint="check the interpreter given with --python, then run again (or `tfgpu-install rollback`)",
            )
        marker.unlink(missing_ok=True)  # the identity goes into the undo record: `envs remove` and rollback check it
        return {
            "created": True,
            "path": str(path),
            "backend": self.env.backend,
            "tool": tool,
            "python": got,
            "existed_empty": bool(prior.get("existed_empty")),
            "identity": identity,
        }

    def owns(self, ctx: Context, path: Path) -> bool:
        """The executor's undo of a killed create removes the env path only while it is the
        directory this step began making (its identity in the step's marker); never otherwise."""
        if Path(path) != self.env.path:
            return True
        try:
            ident = json.loads(self._identity_file(ctx).read_text())
        except (OSError, ValueError):
            return False
        return isinstance(ident, dict) and ownership_problem(Path(path), ident) is None

    def _base_interpreter(self) -> Path:
        base = self.base_python
        if base is None:
            raise EnvironmentProblem(
                f"no Python {self.python_version} interpreter was found for the venv",
                hint=f"install Python {self.python_version} (e.g. `uv python install {self.python_version}`, pyenv, "
                "or your distribution's package) and pass --python PATH, or use --backend conda",
                ref="python-missing",
            )
        if not os.access(str(base), os.X_OK) or not base.exists():
            raise EnvironmentProblem(
                f"the interpreter {base} does not exist or is not executable",
                hint=f"pass --python with a working Python {self.python_version}, or use --backend conda",
                ref="python-missing",
            )
        return base

    def _check_base_version(self, ctx: Context, base: Path) -> None:
        """Ask the interpreter its version (read-only; remembered per binary) before building
        anything on it."""
        from tfgpu_install.facts.python import asked_version

        exact = asked_version(ctx, str(base), timeout=60)
        got = ".".join(exact.split(".")[:2]) if exact else ""
        if got != self.python_version:
            raise EnvironmentProblem(
                f"the interpreter {base} is " + (f"Python {got}" if got else "not a working Python")
                + f", but the plan needs Python {self.python_version}",
                hint=f"pass --python with a Python {self.python_version} interpreter, or plan for "
                + (f"Python {got} with --python {got}" if got else "another interpreter"),
                ref="python-mismatch" if got else "python-missing",
            )

    def _create_venv(self, ctx: Context) -> str:
        base = self._base_interpreter()
        uv = find_uv(ctx)
        if uv:
            # --allow-existing: the directory is ours (new, empty, or our interrupted attempt).
            argv = [uv, "venv", "--quiet", "--allow-existing", "--python", str(base), str(self.env.path)]
            tool = "uv venv"
        else:
            argv = [str(base), "-m", "venv"] + ([] if self.seed_pip else ["--without-pip"]) + [str(self.env.path)]
            tool = "python -m venv"
        res = ctx.runner.run(
            argv, desc=f"create venv {self.env.path}", env=tool_env(ctx), timeout=600, mutating=True
        )
        if not res.ok:
            raise StepFailed(
                f"{tool} could not create {self.env.path}: {last_lines(res.stderr or res.stdout)}",
                hint="fix the cause above and run again (the step resumes), or `tfgpu-install rollback`",
            )
        if uv and self.seed_pip:
            self._seed_pip(ctx, uv, base)
        return tool

    def _seed_pip(self, ctx: Context, uv: str, base: Path) -> None:
        """pip into a uv-made venv, offline: the pip wheel the interpreter ships for ensurepip (or
        Debian's python3-pip-whl), linked in by uv; else ensurepip itself."""
        wheel = bundled_pip_wheel(base, self.python_version)
        if wheel is not None:
            res = ctx.runner.run([uv, "pip", "install", "--quiet", "--no-index", "--no-deps", "--python",
                                  str(self.env.python), str(wheel)],
                                 desc="add pip to the venv", env=tool_env(ctx), timeout=600, mutating=True)
            if res.ok:
                return
        res = ctx.runner.run([str(self.env.python), "-m", "ensurepip", "--default-pip"],
                             desc="add pip to the venv", env=tool_env(ctx), timeout=600, mutating=True)
        if not res.ok:
            raise StepFailed(f"could not add pip to {self.env.path} (no bundled pip wheel, and ensurepip failed: "
                             f"{last_lines(res.stderr)})",
                             hint="pass --no-pip (the env works without pip: `uv pip install --python "
                             f"{self.env.python} PACKAGE`), or install python3-pip-whl / python3-venv")

    @staticmethod
    def _conda_exe(ctx: Context) -> str:
        return conda_engine(ctx)

    def preflight(self, ctx: Context) -> None:
        if self.env.backend == "conda":
            conda_engine(ctx)  # no conda engine: the dry run says so, as the real run would

    def _create_rattler(self, ctx: Context) -> str:
        """No conda tool: py-rattler makes the prefix. On the planned interpreter when there is
        one (a venv made a conda prefix: conda-meta/ for the CUDA packages), else conda's own
        Python from the channel."""
        from tfgpu_install.conda import rattler_engine

        if self.base_python is not None:
            self._check_base_version(ctx, self._base_interpreter())
            self.env.path.mkdir(parents=True, exist_ok=True)
            tool = self._create_venv(ctx)
            (self.env.path / "conda-meta").mkdir(exist_ok=True)
            (self.env.path / "conda-meta" / "history").touch()
            return f"rattler ({tool})"
        rattler_engine.solve_install(ctx, self.env.path, [f"python={self.python_version}"], [self.channel],
                                     keep_installed=False)
        return "rattler"

    def _create_conda(self, ctx: Context) -> str:
        exe = self._conda_exe(ctx)
        if exe == RATTLER:
            return self._create_rattler(ctx)
        where = ["-n", self.env.name] if self.env.name else ["-p", str(self.env.path)]
        argv = [exe, "create", "-y", *where, f"python={self.python_version}"]
        if Path(exe).name.startswith("micromamba") or self.channel != "conda-forge":
            argv += ["-c", self.channel]  # micromamba has no default channel
        res = ctx.runner.run(argv, desc=f"create conda env {self.env.path}", env=tool_env(ctx), timeout=1800,
                             mutating=True)
        if not res.ok:
            raise StepFailed(
                f"{Path(exe).name} could not create {self.env.path}: {last_lines(res.stderr or res.stdout)}",
                hint="fix the cause above and run again (the step resumes), or `tfgpu-install rollback`",
            )
        return Path(exe).name

    # undo -------------------------------------------------------------------------------

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        """Remove the env this step made, only while the path is still that directory (its
        device, inode, real path and marker: env/ownership.py; an older record: a venv's or conda's
        own directory, not a link). Anything else there (the user's own directory put there after
        the env was gone, a parent swapped for a link) is left as it is."""
        marker = self._marker(ctx)
        path = Path(text(record, "path") or self.env.path)
        if record.get("partial"):
            # Killed mid-create (or before its "done" was written): its identity file says what it made.
            try:
                prior = json.loads(marker.read_text()) if marker.exists() else {}
            except ValueError:
                prior = {}
            existed_empty = bool(prior.get("existed_empty"))
            ours = self.owns(ctx, path)
        else:
            if not record.get("created"):
                return
            existed_empty = bool(record.get("existed_empty"))
            ident = record.get("identity")
            ours = ownership_problem(path, ident) is None if isinstance(ident, dict) else looks_like_env(path)
        if not ours:
            marker.unlink(missing_ok=True)
            self._identity_file(ctx).unlink(missing_ok=True)
            return
        if self.env.backend == "conda" and path.exists():
            exe = find_conda(ctx)
            if exe:
                where = ["-n", self.env.name] if self.env.name else ["-p", str(path)]
                # Lets conda forget the env (environments.txt); failure is fine, rmtree follows.
                verb = ["env", "remove", "-y"] if Path(exe).name.startswith("micromamba") else ["remove", "-y", "--all"]
                ctx.runner.run([exe, *verb, *where], desc=f"remove conda env {path}",
                               env=tool_env(ctx), timeout=600, mutating=True)
        if path.exists() and not path.is_symlink():
            shutil.rmtree(path)  # the fd-based walk: no link inside it is followed
        if existed_empty:
            path.mkdir(parents=True, exist_ok=True)
        marker.unlink(missing_ok=True)
        self._identity_file(ctx).unlink(missing_ok=True)


def _empty_dir(path: Path) -> None:
    for child in path.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def conda_engine(ctx: Context) -> str:
    """The conda tool (conda, mamba, micromamba), else "rattler" (py-rattler, the embedded engine), else
    refuse (exit 6, conda-missing) with what installs one."""
    exe = find_conda(ctx)
    if exe is not None:
        return exe
    from tfgpu_install.conda import rattler_engine

    if rattler_engine.available():
        return RATTLER
    raise EnvironmentProblem(
        "--backend conda needs conda, mamba, micromamba or the py-rattler package, and none was found",
        hint="install miniforge (https://github.com/conda-forge/miniforge) or the embedded engine (`pip install "
        "'tfgpu-install[conda]'` into the tool's environment; from a checkout, `scripts/install --with-conda`), "
        "or use --backend venv",
        ref="conda-missing",
    )
