"""Step conda.cuda: the CUDA toolkit and cuDNN as conda packages in a conda env (the seeds'
recipe, `conda install cudatoolkit=11.2 cudnn=8.1.0`, automated), for TensorFlow releases whose
wheels bring no CUDA (matrix.yaml `cuda_from: system`).

The specs are knowledge (profiles/conda.yaml, one row per build CUDA). The engine is an
installed conda/mamba/micromamba (through the runner), else py-rattler in this process. Done
when conda-meta records every spec and the env's lib/ loads every soname the row lists;
apply ends by loading each one in a child process. Undo removes the packages it added.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from tfgpu_install.conda.prefix import installed, unmet
from tfgpu_install.context import Context
from tfgpu_install.errors import StepFailed
from tfgpu_install.guard.jsondoc import items
from tfgpu_install.knowledge.cuda_sources import CondaRecipe, spec_name
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

DEFAULT_CHANNEL = "conda-forge"


def conda_install_argv(exe: str, prefix: Path, name: Optional[str], specs: list[str], channel: str) -> list[str]:
    """`<tool> install -y (-n NAME | -p PREFIX) -c CHANNEL --override-channels SPECS` (pure)."""
    where = ["-n", name] if name else ["-p", str(prefix)]
    return [exe, "install", "-y", *where, "-c", channel, "--override-channels", *specs]


def conda_remove_argv(exe: str, prefix: Path, name: Optional[str], names: list[str]) -> list[str]:
    where = ["-n", name] if name else ["-p", str(prefix)]
    return [exe, "remove", "-y", *where, *names]


class InstallCondaCuda(Step):
    id = "conda.cuda"

    def __init__(self, env: Path, recipe: CondaRecipe, channel: Optional[str] = None,
                 name: Optional[str] = None) -> None:
        self.env = Path(env)
        self.recipe = recipe
        self.channel = channel or recipe.channel or DEFAULT_CHANNEL
        self.name = name

    def describe(self) -> str:
        return f"conda packages {' '.join(self.recipe.specs)} from {self.channel} into {self.env}"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.env / "conda-meta"), str(self.env / "lib")]

    def missing_libraries(self) -> list[str]:
        lib = self.env / "lib"
        return [so for so in self.recipe.libraries if not (lib / so).exists()]

    def preflight(self, ctx: Context) -> None:
        from tfgpu_install.steps.env import conda_engine

        conda_engine(ctx)

    def check(self, ctx: Context) -> bool:
        if not (self.env / "conda-meta").is_dir():
            return False
        return not unmet(installed(self.env), self.recipe.specs) and not self.missing_libraries()

    def apply(self, ctx: Context) -> UndoRecord:
        from tfgpu_install.env.tools import find_conda

        before = {r.name for r in installed(self.env)}
        exe = find_conda(ctx)
        if exe:
            engine = Path(exe).name
            self._with_tool(ctx, exe)
        else:
            from tfgpu_install.conda import rattler_engine

            engine = "rattler"
            rattler_engine.solve_install(ctx, self.env, list(self.recipe.specs), [self.channel],
                                         cuda_override=ctx.env("CONDA_OVERRIDE_CUDA"))
        checkpoint(ctx, self.id, "middle")
        records = installed(self.env)
        added = sorted(r.name for r in records if r.name not in before)
        undo: UndoRecord = {"added": added, "engine": engine, "channel": self.channel,
                            "packages": [r.to_json() for r in records
                                         if r.name in set(added) | set(self.recipe.package_names())]}
        left = unmet(records, self.recipe.specs)
        if left:
            raise StepFailed(f"{engine} finished, but {self.env} does not hold {', '.join(left)}",
                             "run again, or `tfgpu-install rollback`", ref="conda-incomplete")
        self._loader_check(ctx)
        return undo

    def _with_tool(self, ctx: Context, exe: str) -> None:
        from tfgpu_install.env.tools import last_lines, tool_env

        argv = conda_install_argv(exe, self.env, self.name, list(self.recipe.specs), self.channel)
        res = ctx.runner.run(argv, desc=f"conda install {' '.join(self.recipe.specs)}", env=tool_env(ctx),
                             timeout=3600, mutating=True)
        if not res.ok:
            raise StepFailed(
                f"{Path(exe).name} could not install {' '.join(self.recipe.specs)}: "
                f"{last_lines(res.stderr or res.stdout)}",
                "fix the cause above (or pass --conda-channel), then run again; or `tfgpu-install rollback`",
                ref="conda-install",
            )

    def _loader_check(self, ctx: Context) -> None:
        """Each soname TF opens must load from the env's lib/ (a child process, like tfgpu-run)."""
        missing = self.missing_libraries()
        if missing:
            raise StepFailed(
                f"the conda packages {' '.join(self.recipe.specs)} left no {', '.join(missing)} in {self.env / 'lib'}",
                f"the channel {self.channel} does not serve the packages profiles/conda.yaml names; "
                "use --conda-channel conda-forge (or a true mirror of it)",
                ref="conda-libs-missing",
            )
        code = "import ctypes, sys\nfor n in sys.argv[1:]:\n    ctypes.CDLL(n)\n"
        done = ctx.runner.run([sys.executable, "-c", code, *self.recipe.libraries], desc="load the CUDA libraries",
                              env={"LD_LIBRARY_PATH": str(self.env / "lib")}, timeout=120)
        if not done.ok:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise StepFailed(f"the loader cannot load the conda CUDA libraries from {self.env / 'lib'}: {tail}",
                             "run `tfgpu-install doctor`", ref="conda-load-failed")

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        added = [str(n) for n in items(record, "added")]
        if record.get("partial"):
            added = list(self.recipe.package_names())  # killed mid-install: what the specs name may be there
        present = {r.name for r in installed(self.env)}
        names = [n for n in added if n in present]
        if not names or not self.env.is_dir():
            return
        from tfgpu_install.env.tools import find_conda, tool_env

        exe = find_conda(ctx)
        if exe and record.get("engine") != "rattler":
            ctx.runner.run(conda_remove_argv(exe, self.env, self.name, names), desc="conda remove",
                           env=tool_env(ctx), timeout=1800, mutating=True)
            return
        from tfgpu_install.conda import rattler_engine

        rattler_engine.remove(ctx, self.env, names)


def conda_cuda_step(env: Path, cuda: Optional[str], channel: Optional[str], name: Optional[str],
                    knowledge_dir: Optional[Path] = None) -> Optional[InstallCondaCuda]:
    """The step for a build's CUDA, or None when profiles/conda.yaml has no row for it."""
    from tfgpu_install.knowledge.cuda_sources import conda_recipe_for, load_conda_recipes

    recipe = conda_recipe_for(load_conda_recipes(knowledge_dir), cuda)
    return InstallCondaCuda(env, recipe, channel, name) if recipe else None


def pinned_conda_cuda_step(env: Path, cuda: Optional[str], pins: list[str], channel: Optional[str],
                           name: Optional[str], knowledge_dir: Optional[Path] = None) -> Optional[InstallCondaCuda]:
    """A restore's step: the snapshot's exact CUDA/cuDNN packages (name=version=build) instead of
    the knowledge row's specs; the row still says which sonames must load. None when the
    snapshot pins none of the row's packages."""
    from dataclasses import replace

    from tfgpu_install.knowledge.cuda_sources import conda_recipe_for, load_conda_recipes

    recipe = conda_recipe_for(load_conda_recipes(knowledge_dir), cuda)
    if recipe is None:
        return None
    exact = [p for p in pins if spec_name(p) in recipe.package_names()]
    if not exact:
        return None
    return InstallCondaCuda(env, replace(recipe, specs=tuple(exact)), channel, name)
