"""The conda backend's CUDA packages, for real: py-rattler solves and installs stand-in
cudatoolkit/cudnn packages (gcc-built libraries with TF's sonames) from a local file:// channel,
offline; the step's loader check opens every soname; undo unlinks what it added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.conda_channel import CondaPkg, build_channel, cuda_channel
from tests.support.fake_conda import read_log, write_fake_conda
from tests.support.promised import absent
from tests.support.snapshot_doc import env_record
from tfgpu_install.conda.prefix import CondaRecord, installed, meets, unmet
from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, StepFailed, UnsatisfiableError
from tfgpu_install.knowledge.cuda_sources import conda_recipe_for, load_conda_recipes, parse_conda, spec_name
from tfgpu_install.steps.conda_packages import InstallCondaCuda, conda_install_argv

pytest.importorskip("rattler")
needs_gcc = pytest.mark.skipif(absent("gcc"), reason="the stand-in libraries need gcc")


@pytest.fixture(scope="module")
def channel(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    return cuda_channel(tmp_path_factory.mktemp("conda-channel") / "channel")


def _prefix(tmp_path: Path) -> Path:
    env = tmp_path / "env"
    (env / "conda-meta").mkdir(parents=True)
    return env


def test_knowledge_rows_carry_sources_and_cover_every_system_cuda() -> None:
    recipes = load_conda_recipes()
    assert all(r.source and r.specs and r.libraries for r in recipes)
    # Every CUDA a `cuda_from: system` release was built with has a row (TF 2.0 .. 2.13).
    for cuda in ("10.0", "10.1", "11.0", "11.2", "11.8"):
        assert conda_recipe_for(recipes, cuda) is not None, cuda
    seeds = conda_recipe_for(recipes, "11.2")
    assert seeds is not None and seeds.specs == ("cudatoolkit=11.2", "cudnn=8.1.0")
    assert conda_recipe_for(recipes, "12.3") is None  # CUDA 12 comes from the nvidia-*-cu12 wheels


def test_every_system_cuda_release_has_a_row_whose_cudnn_serves_its_build() -> None:
    """matrix.yaml x conda.yaml: each `cuda_from: system` release finds a row, and the row's
    cuDNN serves the build's (same major, not older: TF's rule, checked by check_serves)."""
    from tfgpu_install.fetch.cudnn_redist import check_serves
    from tfgpu_install.knowledge.load import load_knowledge

    recipes = load_conda_recipes()
    system = [r for r in load_knowledge().releases if r.cuda_from == "system" and r.cuda]
    assert system
    for rel in system:
        recipe = conda_recipe_for(recipes, rel.cuda)
        assert recipe is not None, rel.tensorflow
        check_serves(recipe.cudnn, rel.cudnn, rel.tensorflow, "profiles/conda.yaml")
        major = recipe.cudnn.split(".")[0]
        assert f"libcudnn.so.{major}" in recipe.libraries


def test_malformed_conda_knowledge_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "conda.yaml"
    bad.write_text('recipes:\n  - cuda: "11.2"\n    cudnn: "8.1"\n    channel: conda-forge\n'
                   '    specs: ["cudatoolkit"]\n    libraries: [libcudart.so.11.0]\n    source: x\n')
    with pytest.raises(BadInputError, match=r"conda.yaml:5: recipes\[0\]\.specs\[0\]: expected name=version"):
        parse_conda(bad, "conda.yaml")


def test_spec_matching_follows_conda_fuzzy_equals() -> None:
    rec = CondaRecord("cudnn", "8.1.0.77", "h0_0", "conda-forge", "")
    assert spec_name("conda-forge::cudnn>=8") == "cudnn"
    assert meets(rec, "cudnn=8.1.0") and meets(rec, "cudnn=8.1") and meets(rec, "cudnn=8.1.0.77=h0_0")
    assert not meets(rec, "cudnn=8.1.1") and not meets(rec, "cudnn=8.10") and not meets(rec, "cudnn=8.1.0.77=h1_0")
    assert unmet([rec], ["cudnn=8.1.0", "cudatoolkit=11.2"]) == ["cudatoolkit=11.2"]


@needs_gcc
@pytest.mark.parametrize("cuda", ["11.2", "10.1"])
def test_rattler_installs_loads_and_undoes(tmp_path: Path, ctx: Context, channel, cuda: str) -> None:  # type: ignore[no-untyped-def]
    env = _prefix(tmp_path)
    recipe = conda_recipe_for(load_conda_recipes(), cuda)
    assert recipe is not None
    step = InstallCondaCuda(env, recipe, channel.url)
    assert step.check(ctx) is False
    undo = step.apply(ctx)
    assert undo["engine"] == "rattler" and set(undo["added"]) == {"cudatoolkit", "cudnn"}
    pinned = {p["name"]: p for p in undo["packages"]}
    assert pinned["cudnn"]["version"] == ("8.1.0.77" if cuda == "11.2" else "7.6.5.32")
    assert len(pinned["cudatoolkit"]["sha256"]) == 64  # the archive's hash, from the repodata
    assert step.check(ctx) is True  # a re-run is a no-op
    for soname in recipe.libraries:
        assert (env / "lib" / soname).exists(), soname
    step.undo(ctx, json.loads(json.dumps(undo)))
    assert installed(env) == []
    assert not any((env / "lib").glob("lib*.so*"))
    assert step.check(ctx) is False


@needs_gcc
def test_unsolvable_specs_are_refused_with_the_channel(tmp_path: Path, ctx: Context, channel) -> None:  # type: ignore[no-untyped-def]
    env = _prefix(tmp_path)
    recipe = conda_recipe_for(load_conda_recipes(), "11.8")  # cudatoolkit=11.8 is not in the test channel
    assert recipe is not None
    with pytest.raises(UnsatisfiableError, match="cannot solve cudatoolkit=11.8") as err:
        InstallCondaCuda(env, recipe, channel.url).apply(ctx)
    assert err.value.ref == "conda-unsolvable" and "--conda-channel" in (err.value.hint or "")
    assert installed(env) == []


@needs_gcc
def test_a_package_without_the_sonames_fails_the_step(tmp_path: Path, ctx: Context) -> None:
    # A channel whose cudatoolkit holds no libraries (not what conda-forge publishes).
    chan = build_channel(tmp_path / "hollow", [CondaPkg("cudatoolkit", "11.2.2"), CondaPkg("cudnn", "8.1.0.77")])
    env = _prefix(tmp_path)
    recipe = conda_recipe_for(load_conda_recipes(), "11.2")
    assert recipe is not None
    with pytest.raises(StepFailed, match="left no libcudart.so.11.0"):
        InstallCondaCuda(env, recipe, chan.url).apply(ctx)


def test_installed_conda_gets_the_install_argv(tmp_path: Path) -> None:
    argv = conda_install_argv("/opt/conda/bin/mamba", tmp_path / "env", None, ["cudatoolkit=11.2", "cudnn=8.1.0"],
                              "conda-forge")
    assert argv == ["/opt/conda/bin/mamba", "install", "-y", "-p", str(tmp_path / "env"), "-c", "conda-forge",
                    "--override-channels", "cudatoolkit=11.2", "cudnn=8.1.0"]
    named = conda_install_argv("conda", tmp_path, "tf211", ["cudnn=8.1.0"], "https://mirror.example/cf")
    assert named[3:5] == ["-n", "tf211"] and "https://mirror.example/cf" in named


def test_installed_conda_is_driven_through_the_runner(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    """With a conda on PATH the step runs it (the stand-in refuses `install`: the step fails
    with conda's own words, after the exact argv was issued)."""
    from tfgpu_install.context import build_context

    exe = write_fake_conda(tmp_path / "bin", root=tmp_path / "miniforge")
    env_vars = dict(tmp_env, PATH=f"{exe.parent}:{tmp_env.get('PATH', '')}")
    ctx = build_context(env_vars)
    env = _prefix(tmp_path)
    recipe = conda_recipe_for(load_conda_recipes(), "11.2")
    assert recipe is not None
    with pytest.raises(StepFailed, match="fake conda: unsupported"):
        InstallCondaCuda(env, recipe, None).apply(ctx)
    assert read_log(exe)[-1] == ["install", "-y", "-p", str(env), "-c", "conda-forge", "--override-channels",
                                 "cudatoolkit=11.2", "cudnn=8.1.0"]


@needs_gcc
def test_restore_reinstalls_the_snapshots_exact_builds(tmp_path: Path, ctx: Context) -> None:
    """A snapshot of a conda env pins cudatoolkit/cudnn by version and build; the restore's
    conda.cuda step asks for exactly those, though the channel now has a newer build."""
    from types import SimpleNamespace

    from tfgpu_install.plan.options import InstallOptions
    from tfgpu_install.plan.restore import conda_restore_extra, restore_steps
    from tfgpu_install.resolver.model import Choice, Resolution
    from tfgpu_install.steps.conda_packages import InstallCondaCuda

    chan = build_channel(tmp_path / "chan", [
        CondaPkg("cudatoolkit", "11.2.2", ("libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11",
                                           "libcufft.so.10", "libcurand.so.10", "libcusolver.so.11",
                                           "libcusparse.so.11")),
        CondaPkg("cudnn", "8.1.0.77", ("libcudnn.so.8",), build="h0_0"),
        CondaPkg("cudnn", "8.1.0.77", ("libcudnn.so.8",), build="h9_1"),  # published after the snapshot
    ])
    snap = SimpleNamespace(env=env_record({"conda_packages": [
        {"name": "cudatoolkit", "version": "11.2.2", "build": "h0_0", "channel": chan.url, "sha256": "a" * 64},
        {"name": "cudnn", "version": "8.1.0.77", "build": "h0_0", "channel": chan.url, "sha256": "b" * 64},
        {"name": "python", "version": "3.11.7", "build": "h0_cpython", "channel": chan.url, "sha256": ""},
    ]}))
    extra = conda_restore_extra(snap)  # type: ignore[arg-type]
    assert extra["conda_channel"] == chan.url
    env = _prefix(tmp_path)
    choice = Choice(tensorflow="2.11.1", cuda="11.2", cudnn="8.1", python="3.11", jit_only=False, cuda_from="system")
    res = Resolution(profile="snapshot:x", choice=choice, reasons=(), rejected=(), cpu_only=True)
    steps = restore_steps(res, InstallOptions(env=env, backend="conda", extra=extra), [], False)
    conda = [s for s in steps if isinstance(s, InstallCondaCuda)]
    assert len(conda) == 1 and conda[0].recipe.specs == ("cudatoolkit=11.2.2=h0_0", "cudnn=8.1.0.77=h0_0")
    assert [s.id for s in steps][:4] == ["env.create", "packages.install", "conda.cuda", "packages.sync"]
    conda[0].apply(ctx)
    assert {(r.name, r.build) for r in installed(env)} == {("cudatoolkit", "h0_0"), ("cudnn", "h0_0")}
    # A venv snapshot (no conda packages) restores without the step.
    assert conda_restore_extra(SimpleNamespace(env=env_record({"backend": "venv"}))) == {}  # type: ignore[arg-type]


@needs_gcc
def test_a_package_needing_a_driver_solves_with_conda_override_cuda(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    """cudnn builds that depend on the __cuda virtual package: no such driver here, so unsolvable;
    CONDA_OVERRIDE_CUDA (conda's own variable, read through the context) stands in for one."""
    from tfgpu_install.context import build_context

    chan = build_channel(tmp_path / "chan", [
        CondaPkg("cudatoolkit", "11.2.2", ("libcudart.so.11.0", "libcublas.so.11", "libcublasLt.so.11",
                                           "libcufft.so.10", "libcurand.so.10", "libcusolver.so.11",
                                           "libcusparse.so.11")),
        # A driver version no machine has, so that the test means the same on a GPU machine.
        CondaPkg("cudnn", "8.1.0.77", ("libcudnn.so.8",), ("__cuda >=99.1",)),
    ])
    recipe = conda_recipe_for(load_conda_recipes(), "11.2")
    assert recipe is not None
    env = _prefix(tmp_path)
    with pytest.raises(UnsatisfiableError) as err:
        InstallCondaCuda(env, recipe, chan.url).apply(build_context(dict(tmp_env, CONDA_OVERRIDE_CUDA="")))
    assert "CONDA_OVERRIDE_CUDA" in (err.value.hint or "")
    InstallCondaCuda(env, recipe, chan.url).apply(build_context(dict(tmp_env, CONDA_OVERRIDE_CUDA="99.1")))
    assert {r.name for r in installed(env)} == {"cudatoolkit", "cudnn"}


@needs_gcc
@pytest.mark.parametrize("hostile", [
    # paths.json names a path in another cache entry: rattler would link it to <prefix>/../
    CondaPkg("cudatoolkit", "11.2.2", ("libcudart.so.11.0",), build="h6_0",
             extra_files={"escaped.txt": b"pwned"}, listed_paths=("../cudatoolkit-11.2.2-h6_0/escaped.txt",)),
    CondaPkg("cudatoolkit", "11.2.2", ("libcudart.so.11.0",), build="h7_0", listed_paths=("/etc/evil.conf",)),
    CondaPkg("cudatoolkit", "11.2.2", ("libcudart.so.11.0",), build="h8_0",
             symlinks={"lib/libcudart.so": "../../../../../../../etc/passwd"}),
])
def test_a_hostile_package_changes_nothing_outside_or_inside(tmp_path: Path, ctx: Context, hostile: CondaPkg) -> None:
    from tfgpu_install.files import tree_digest

    chan = build_channel(tmp_path / "chan", [hostile, CondaPkg("cudnn", "8.1.0.77", ("libcudnn.so.8",))])
    work = tmp_path / "work"
    env = _prefix(work)
    before = tree_digest(work)
    recipe = conda_recipe_for(load_conda_recipes(), "11.2")
    assert recipe is not None
    with pytest.raises(BadInputError) as err:
        InstallCondaCuda(env, recipe, chan.url).apply(ctx)
    assert err.value.ref == "conda-unsafe-package" and "outside" in err.value.message + (err.value.hint or "")
    assert tree_digest(work) == before  # not one file in or beside the env
    assert not list(tmp_path.rglob("escaped.txt"))[1:]  # only the one inside the channel's archive cache, if any


@needs_gcc
def test_a_package_whose_bytes_differ_from_the_repodata_is_refused(tmp_path: Path, ctx: Context) -> None:
    chan = build_channel(tmp_path / "chan", [CondaPkg("cudatoolkit", "11.2.2", ("libcudart.so.11.0",)),
                                             CondaPkg("cudnn", "8.1.0.77", ("libcudnn.so.8",))])
    repodata = tmp_path / "chan" / "linux-64" / "repodata.json"
    doc = json.loads(repodata.read_text())
    doc["packages"]["cudnn-8.1.0.77-h0_0.tar.bz2"]["sha256"] = "0" * 64
    repodata.write_text(json.dumps(doc))
    env = _prefix(tmp_path / "work")
    recipe = conda_recipe_for(load_conda_recipes(), "11.2")
    assert recipe is not None
    with pytest.raises(BadInputError) as err:
        InstallCondaCuda(env, recipe, chan.url).apply(ctx)
    assert err.value.ref == "hash-mismatch"
    assert installed(env) == []
