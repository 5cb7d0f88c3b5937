"""cuda.redist for real: a loopback server serves a generated redistrib_11.8.0.json and
NVIDIA-shaped archives of gcc-built stand-ins; the step downloads them sha256-checked, places
the merged lib/ under <env>/lib/cuda-11.8.0 (link <env>/lib/cuda), loads every soname, and
undo removes it. A wrong hash or a hostile archive changes nothing."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from tests.support.cuda_redist import publish_cuda_redist
from tests.support.httpserver import LoopbackServer
from tests.support.promised import absent
from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, DownloadError, UnsatisfiableError
from tfgpu_install.files import tree_digest
from tfgpu_install.knowledge.cuda_sources import load_redist_recipes, redist_recipe_for
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.model import Choice
from tfgpu_install.steps.cuda.place import PlaceCudaRedist, cuda_lib_dir, cuda_redist_steps

pytestmark = pytest.mark.skipif(absent("gcc"), reason="the stand-in libraries need gcc")

SONAMES = {
    "cuda_cudart": ["libcudart.so.11.0"], "libcublas": ["libcublas.so.11", "libcublasLt.so.11"],
    "libcufft": ["libcufft.so.10"], "libcurand": ["libcurand.so.10"], "libcusolver": ["libcusolver.so.11"],
    "libcusparse": ["libcusparse.so.11"], "cuda_cupti": ["libcupti.so.11.8"], "cuda_nvrtc": ["libnvrtc.so.11.2"],
}


def _recipe(cuda: str = "11.2"):  # type: ignore[no-untyped-def]
    recipe = redist_recipe_for(load_redist_recipes(), cuda)
    assert recipe is not None and recipe.release == "11.8.0" and recipe.source
    return recipe


def test_places_loads_and_undoes(tmp_path: Path, ctx: Context) -> None:
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    with LoopbackServer() as srv:
        publish_cuda_redist(srv, tmp_path / "so", "11.8.0", SONAMES)
        step = PlaceCudaRedist(env, _recipe(), mirror=srv.url("/"), platform="linux-x86_64")
        assert step.check(ctx) is False
        undo = step.apply(ctx)
        assert step.check(ctx) is True
        assert {a["component"] for a in undo["archives"]} == set(SONAMES)
        lib = cuda_lib_dir(env)
        assert lib.resolve() == (env / "lib" / "cuda-11.8.0" / "lib").resolve()
        for sonames in SONAMES.values():
            for so in sonames:
                assert (lib / so).is_symlink() and (lib / so).resolve().is_file(), so
        # A second run is a no-op, and re-downloads nothing (the cache is keyed by sha256).
        served = len(srv.requests)
        assert step.check(ctx) is True and len(srv.requests) == served
        step.undo(ctx, json.loads(json.dumps(undo)))
    assert sorted(p.name for p in (env / "lib").iterdir()) == []


def test_a_wrong_checksum_places_nothing(tmp_path: Path, ctx: Context) -> None:
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    with LoopbackServer() as srv:
        publish_cuda_redist(srv, tmp_path / "so", "11.8.0", SONAMES, corrupt=["libcusolver"])
        with pytest.raises(DownloadError):
            PlaceCudaRedist(env, _recipe(), mirror=srv.url("/"), platform="linux-x86_64").apply(ctx)
    assert list((env / "lib").iterdir()) == []


def test_a_hostile_archive_writes_nothing_outside(tmp_path: Path, ctx: Context) -> None:
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    before = {k: v for k, v in tree_digest(tmp_path).items() if k.startswith("env")}
    evil = tarfile.TarInfo("cuda_cudart-linux-x86_64-11.8.89-archive/../../../../escaped.txt")
    evil.size = 4
    with LoopbackServer() as srv:
        publish_cuda_redist(srv, tmp_path / "so-x", "11.8.0", SONAMES, extra={"cuda_cudart": [(evil, b"evil")]})
        with pytest.raises(BadInputError):
            PlaceCudaRedist(env, _recipe(), mirror=srv.url("/"), platform="linux-x86_64").apply(ctx)
    assert not list(tmp_path.rglob("escaped.txt"))
    assert [p.name for p in (env / "lib").iterdir()] == []
    assert {k: v for k, v in tree_digest(tmp_path).items() if k.startswith("env")} == before


def test_a_platform_the_manifest_lacks_is_named(tmp_path: Path, ctx: Context) -> None:
    env = tmp_path / "env"
    with LoopbackServer() as srv:
        publish_cuda_redist(srv, tmp_path / "so", "11.8.0", {"cuda_cudart": ["libcudart.so.11.0"]})
        step = PlaceCudaRedist(env, _recipe(), mirror=srv.url("/"), platform="linux-sbsa")
        with pytest.raises(BadInputError, match="no archive for linux-sbsa.*linux-x86_64"):
            step.apply(ctx)


def test_cuda_without_a_redist_is_refused_in_the_plan(tmp_path: Path) -> None:
    choice = Choice(tensorflow="2.3.4", cuda="10.1", cudnn="7.6", python="3.8", jit_only=False, cuda_from="system")
    with pytest.raises(UnsatisfiableError, match="no CUDA redist") as err:
        cuda_redist_steps(choice, InstallOptions(env=tmp_path, cuda_source="redist"), tmp_path, None)
    assert "--backend conda" in (err.value.hint or "")
