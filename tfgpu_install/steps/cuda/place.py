"""Step cuda.redist: the CUDA user space from NVIDIA's redistributable archives
(--cuda-source redist [--cuda-mirror URL]), for a TensorFlow release whose wheels bring none,
on hosts where PyPI's nvidia-* wheels are not allowed.

Which manifest and components: profiles/cuda_redist.yaml. Each component's archive is
downloaded sha256-checked into the hash-keyed cache (a re-run after a kill reuses it), extracted
with every member checked (fetch/archive.py), the lib/ trees merged in a staging dir beside the
destination, then renamed in one step to <env>/lib/cuda-<release>/ with the stable link
<env>/lib/cuda -> it (the activation's library dir is <env>/lib/cuda/lib). Every listed soname
must then load. Undo removes the tree it placed (it carries our marker) and the link.
"""

from __future__ import annotations

import json
import os
import platform as _platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.context import Context
from tfgpu_install.errors import StepFailed, UnsatisfiableError
from tfgpu_install.files import atomic_write, replace_symlink
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.knowledge.cuda_sources import RedistRecipe
from tfgpu_install.steps.base import Step, UndoRecord, checkpoint

MARKER = ".tfgpu-cuda.json"


def cuda_lib_dir(env: Path) -> Path:
    return Path(env) / "lib" / "cuda" / "lib"


def cuda_redist_steps(choice: Any, options: Any, env: Path, profiles: Optional[Path]) -> tuple[list[Step], list[Path]]:
    """The redist step for the build's CUDA, or a refusal naming the releases that have one."""
    from tfgpu_install.knowledge.cuda_sources import load_redist_recipes, redist_recipe_for

    recipes = load_redist_recipes(profiles)
    recipe = redist_recipe_for(recipes, choice.cuda)
    if recipe is None:
        raise UnsatisfiableError(
            f"NVIDIA publishes no CUDA redist archives that serve TensorFlow {choice.tensorflow}'s CUDA {choice.cuda} "
            "build",
            "redist covers CUDA " + ", ".join(sorted(r.cuda for r in recipes))
            + "; use --backend conda (conda packages) or the system's CUDA toolkit",
            ref="cuda-redist-none",
        )
    return [PlaceCudaRedist(env, recipe, options.cuda_mirror)], [cuda_lib_dir(env)]


class PlaceCudaRedist(Step):
    id = "cuda.redist"

    def __init__(self, env: Path, recipe: RedistRecipe, mirror: Optional[str] = None,
                 platform: Optional[str] = None) -> None:
        from tfgpu_install.fetch.redist import CUDA_REDIST_URL, platform_key

        self.env = Path(env)
        self.recipe = recipe
        self.mirror = mirror
        self.base_url = mirror or CUDA_REDIST_URL
        self.platform = platform or platform_key(_platform.machine())

    def describe(self) -> str:
        return (f"CUDA {self.recipe.release} redist ({', '.join(self.recipe.components)}) from {self.base_url} "
                f"into {self.dest()}")

    def dest(self) -> Path:
        return self.env / "lib" / f"cuda-{self.recipe.release}"

    def link(self) -> Path:
        return self.env / "lib" / "cuda"

    def touches(self, ctx: Context) -> list[str]:
        return [str(self.dest()), str(self.link())]

    def _marker(self) -> Optional[JSONObject]:
        try:
            doc = json.loads((self.dest() / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return doc if isinstance(doc, dict) else None

    def check(self, ctx: Context) -> bool:
        marker = self._marker()
        if marker is None or marker.get("base_url") != self.base_url:
            return False
        lib = self.dest() / "lib"
        return (self.link().is_symlink() and os.readlink(self.link()) == self.dest().name
                and all((lib / so).exists() for so in self.recipe.libraries))

    def apply(self, ctx: Context) -> UndoRecord:
        from tfgpu_install.fetch import archive as archive_mod
        from tfgpu_install.fetch import download
        from tfgpu_install.fetch.redist import component_entry, manifest_url, select

        url = manifest_url(self.base_url, self.recipe.release)
        allow_http = self.mirror is not None  # a mirror the user named themselves
        text = download.fetch_text(ctx, url, allow_http=allow_http)
        picked = [select(component_entry(text, c, url), c, self.platform, None, url) for c in self.recipe.components]
        got = [download.fetch(ctx, a.url(self.base_url), a.sha256, size=a.size, allow_http=allow_http,
                              what=f"{a.component} {a.version}") for a in picked]
        checkpoint(ctx, self.id, "middle")
        parent = self.env / "lib"
        existed = self.dest().exists() and self._marker() is None
        if existed:
            raise StepFailed(f"{self.dest()} exists and was not placed by tfgpu-install; refusing to mix trees",
                             f"move {self.dest()} away and run again", ref="cuda-redist-exists")
        parent.mkdir(parents=True, exist_ok=True)
        merged = Path(tempfile.mkdtemp(prefix=".tfgpu-staging-", dir=str(parent)))  # beside dest: one filesystem
        try:
            tree = merged / ".merged"
            (tree / "lib").mkdir(parents=True)
            for arc in got:
                staging = archive_mod.extract(arc.path, merged)
                _merge_libs(archive_mod.content_root(staging), tree / "lib")
            marker = {"release": self.recipe.release, "base_url": self.base_url, "manifest": url,
                      "archives": [a.to_json() for a in picked]}
            atomic_write(tree / MARKER, json.dumps(marker, indent=2, sort_keys=True) + "\n")
            if self.dest().exists():  # ours, from an earlier run with another mirror: replace it
                shutil.rmtree(self.dest())
            archive_mod.place(tree, self.dest())
        finally:
            shutil.rmtree(merged, ignore_errors=True)
        previous = os.readlink(self.link()) if self.link().is_symlink() else None
        replace_symlink(self.link(), self.dest().name)
        self._loader_check(ctx)
        return {"dest": str(self.dest()), "link": str(self.link()), "previous_link": previous,
                "archives": [a.to_json() for a in picked]}

    def _loader_check(self, ctx: Context) -> None:
        lib = self.dest() / "lib"
        missing = [so for so in self.recipe.libraries if not (lib / so).exists()]
        if missing:
            raise StepFailed(f"the CUDA {self.recipe.release} archives left no {', '.join(missing)} in {lib}",
                             "the mirror does not serve NVIDIA's archives unchanged; check --cuda-mirror",
                             ref="cuda-redist-libs-missing")
        code = "import ctypes, sys\nfor n in sys.argv[1:]:\n    ctypes.CDLL(n)\n"
        done = ctx.runner.run([sys.executable, "-c", code, *self.recipe.libraries], desc="load the CUDA libraries",
                              env={"LD_LIBRARY_PATH": str(lib)}, timeout=120)
        if not done.ok:
            tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise StepFailed(f"the loader cannot load the CUDA libraries from {lib}: {tail}",
                             "run `tfgpu-install doctor`", ref="cuda-redist-load-failed")

    def undo(self, ctx: Context, record: UndoRecord) -> None:
        link = self.link()
        if link.is_symlink() and os.readlink(link) == self.dest().name:
            prev = record.get("previous_link")
            if prev:
                replace_symlink(link, str(prev))
            else:
                link.unlink()
        if (self.dest() / MARKER).is_file():
            shutil.rmtree(self.dest())  # only a tree we placed
        parent = self.env / "lib"
        for leftover in parent.glob(".tfgpu-staging-*") if parent.is_dir() else []:
            shutil.rmtree(leftover, ignore_errors=True)


def _merge_libs(root: Path, lib_out: Path) -> None:
    """Move a component's lib/ (or lib64/) entries into the merged lib/; links stay links.
    Two components never ship the same file; if they did, the first one stays."""
    for name in ("lib", "lib64"):
        src = root / name
        if not src.is_dir() or src.is_symlink():
            continue
        for entry in sorted(src.iterdir()):
            target = lib_out / entry.name
            if not (target.exists() or target.is_symlink()):
                os.rename(entry, target)

