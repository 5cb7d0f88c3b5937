"""cuDNN steps through the real executor: loopback mirror, real archives of gcc-built ELF
libraries, real loader, journal-driven rollback."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

from tests.support.cudnn_archive import build_archive, install_libs, publish, version_code, version_header
from tests.support.httpserver import Fault, LoopbackServer
from tfgpu_install.context import Context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.errors import BadInputError, DownloadError, ExitCode, StepFailed, UnsatisfiableError, UsageError
from tfgpu_install.files import tree_digest
from tfgpu_install.plan.options import InstallOptions
from tfgpu_install.resolver.model import Choice, Resolution
from tfgpu_install.steps.cudnn.place import MARKER, cudnn_steps, find_stale, placed_lib_dir


def resolution(cudnn: str = "9.1", pin: Optional[str] = "9.1.0.70", cuda: str = "12.3",
               tf: str = "2.17.1") -> Resolution:
    pins = {"nvidia-cudnn-cu12": pin} if pin else {}
    choice = Choice(tensorflow=tf, cuda=cuda, cudnn=cudnn, python="3.11", jit_only=False, pins=pins)
    return Resolution(profile="stable", choice=choice, reasons=(), rejected=())


@pytest.fixture
def fast(ctx: Context) -> Context:
    ctx.hooks.download_backoff = 0.0
    return ctx


def loader_resolves(lib_dir: Path, soname: str = "libcudnn.so.9") -> int:
    """Load by soname through the real loader (LD_LIBRARY_PATH), in a child process."""
    code = f"import ctypes; print(ctypes.CDLL({soname!r}).cudnnGetVersion())"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "LD_LIBRARY_PATH": str(lib_dir)},
        capture_output=True, text=True, check=True,
    )
    return int(out.stdout)


def run(ctx: Context, res: Resolution, opts: InstallOptions) -> list[str]:
    steps = cudnn_steps(res, opts)
    return [s.status for s in Executor(ctx, opts.env).run(steps).steps]


def test_redist_happy_path_resume_noop_and_rollback(fast: Context, tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    before = tree_digest(env)
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    with LoopbackServer() as srv:
        opts = InstallOptions(env=env, cudnn_source="redist", cudnn_mirror=publish(srv, arc, "9.1.0.70"))
        assert run(fast, resolution(), opts) == ["applied", "applied"]
        lib = placed_lib_dir(opts)
        assert lib == env / "lib" / "cudnn" / "lib"
        assert os.readlink(env / "lib" / "cudnn") == "cudnn-9.1.0"
        assert (env / "lib" / "cudnn-9.1.0" / MARKER).is_file()
        # The placed library, loaded through its soname link, is the one we built.
        assert ctypes.CDLL(str(lib / "libcudnn.so.9")).cudnnGetVersion() == version_code("9.1.0")
        assert loader_resolves(lib) == 90100
        n = len(srv.requests)
        assert run(fast, resolution(), opts) == ["done", "done"]  # a re-run touches nothing
        assert len(srv.requests) == n
        steps = cudnn_steps(resolution(), opts)
        Executor(fast, env).rollback(steps)
    assert tree_digest(env) == before


def test_cached_archive_is_not_downloaded_again(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.0.70")
        archive_path = f"/cudnn/linux-x86_64/{arc.name}"
        for name in ("env1", "env2"):
            opts = InstallOptions(env=tmp_path / name, cudnn_source="redist", cudnn_mirror=mirror)
            run(fast, resolution(), opts)
            assert (tmp_path / name / "lib" / "cudnn" / "lib" / "libcudnn.so.9").exists()
        assert len(srv.requests_for(archive_path)) == 1  # the second env came from the cache


def test_cut_connection_resumes_and_places(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70", pad=400_000)
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.0.70", fault=Fault.CUT_ONCE, cut_at=arc.stat().st_size // 2)
        opts = InstallOptions(env=tmp_path / "env", cudnn_source="redist", cudnn_mirror=mirror)
        run(fast, resolution(), opts)
        reqs = srv.requests_for(f"/cudnn/linux-x86_64/{arc.name}")
        assert len(reqs) == 2 and reqs[1].range is not None
    assert loader_resolves(placed_lib_dir(opts)) == 90100  # type: ignore[arg-type]


def _nothing_placed(env: Path) -> None:
    lib = env / "lib"
    assert not lib.exists() or [p.name for p in lib.iterdir()] == []


@pytest.mark.parametrize(
    "fault,ref",
    [(Fault.WRONG_BYTES, "download-checksum"), (Fault.NOT_FOUND, "download-not-found"),
     (Fault.CLOSE_MID, "download-interrupted"), (Fault.SHORT, "download-truncated")],
)
def test_download_failures_leave_nothing_in_place(fast: Context, tmp_path: Path, fault: Fault, ref: str) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    env = tmp_path / "env"
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.0.70", fault=fault, cut_at=1000)
        opts = InstallOptions(env=env, cudnn_source="redist", cudnn_mirror=mirror)
        with pytest.raises(DownloadError) as ei:
            run(fast, resolution(), opts)
    assert ei.value.ref == ref and ei.value.code == ExitCode.DOWNLOAD and ei.value.hint
    _nothing_placed(env)
    downloads = fast.cache_dir / "downloads"
    leftovers = [p.name for p in downloads.iterdir()] if downloads.exists() else []
    assert all(n.endswith(".part") for n in leftovers)  # only a resumable part, if anything


def test_missing_manifest_falls_back_to_the_index(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.2.5")
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.2.5")
        srv.add("/", b'<a href="redistrib_8.9.7.json">a</a> <a href="redistrib_9.1.2.json">b</a>')
        opts = InstallOptions(env=tmp_path / "env", cudnn_source="redist", cudnn_mirror=mirror)
        run(fast, resolution(pin="9.1.0.70"), opts)  # redistrib_9.1.0.json is not there
        assert srv.requests_for("/redistrib_9.1.0.json") and srv.requests_for("/redistrib_9.1.2.json")
    assert os.readlink(tmp_path / "env" / "lib" / "cudnn") == "cudnn-9.1.2"


def test_no_manifest_and_no_index_is_one_clear_error(fast: Context, tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        opts = InstallOptions(env=tmp_path / "env", cudnn_source="redist", cudnn_mirror=srv.url("/"))
        with pytest.raises(DownloadError) as ei:
            run(fast, resolution(), opts)
    assert "404" in ei.value.message


def test_manifest_without_this_platform(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.0.70", platform="linux-sbsa")
        opts = InstallOptions(env=tmp_path / "env", cudnn_source="redist", cudnn_mirror=mirror)
        with pytest.raises(BadInputError) as ei:
            run(fast, resolution(), opts)
        assert not srv.requests_for(f"/cudnn/linux-sbsa/{arc.name}")
    assert ei.value.ref == "cudnn-no-platform" and "linux-x86_64" in ei.value.message
    _nothing_placed(tmp_path / "env")


def test_redist_of_the_wrong_major_is_refused_before_downloading(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    with LoopbackServer() as srv:
        mirror = publish(srv, arc, "9.1.0.70")
        opts = InstallOptions(env=tmp_path / "env", cudnn_source="redist", cudnn_mirror=mirror)
        opts.extra["cudnn_version"] = "9.1.0"
        with pytest.raises(UnsatisfiableError) as ei:
            run(fast, resolution(cudnn="8.9", pin="8.9.7.29", tf="2.15.1"), opts)
        assert not srv.requests_for(f"/cudnn/linux-x86_64/{arc.name}")
    assert "TensorFlow 2.15.1" in ei.value.message and "8.x" in (ei.value.hint or "")


@pytest.mark.parametrize("fmt,links", [("tar.gz", True), ("zip", True), ("tar.xz", False)])
def test_local_archive_is_placed_with_its_soname_links(fast: Context, tmp_path: Path, fmt: str, links: bool) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70", fmt=fmt, links=links)
    env = tmp_path / "env"
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc)
    assert run(fast, resolution(), opts) == ["applied", "applied"]
    lib = placed_lib_dir(opts)
    assert lib is not None
    assert os.readlink(lib / "libcudnn.so") == "libcudnn.so.9"
    assert os.readlink(lib / "libcudnn_ops.so.9") == "libcudnn_ops.so.9.1.0"
    assert loader_resolves(lib) == 90100


def test_local_archive_into_a_prefix(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "8.9.7.29")
    prefix = tmp_path / "opt" / "cudnn-8.9"
    opts = InstallOptions(env=tmp_path / "env", cudnn_source="archive", cudnn_archive=arc, cudnn_prefix=prefix)
    run(fast, resolution(cudnn="8.9", pin="8.9.4.25", tf="2.15.1"), opts)
    assert placed_lib_dir(opts) == prefix / "lib"
    assert loader_resolves(prefix / "lib", "libcudnn.so.8") == version_code("8.9.7")
    Executor(fast, opts.env).rollback(cudnn_steps(resolution(cudnn="8.9"), opts))
    assert not prefix.exists()


def test_truncated_local_archive(fast: Context, tmp_path: Path) -> None:
    full = build_archive(tmp_path / "b1", "9.1.0.70")
    arc = build_archive(tmp_path / "b2", "9.1.0.70", truncate=full.stat().st_size // 2)
    env = tmp_path / "env"
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc)
    with pytest.raises(BadInputError) as ei:
        run(fast, resolution(), opts)
    assert "truncated" in ei.value.message
    _nothing_placed(env)


def test_local_archive_of_the_wrong_major(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    opts = InstallOptions(env=tmp_path / "env", cudnn_source="archive", cudnn_archive=arc)
    with pytest.raises(UnsatisfiableError) as ei:
        run(fast, resolution(cudnn="8.9", tf="2.15.1"), opts)
    assert "cuDNN 9.1.0.70" in ei.value.message and "needs cuDNN 8.x" in (ei.value.hint or "")
    # Renamed so the name says nothing: the header inside decides, at place.
    anon = tmp_path / "cudnn.tar.xz"
    os.rename(arc, anon)
    opts = InstallOptions(env=tmp_path / "env", cudnn_source="archive", cudnn_archive=anon)
    with pytest.raises(UnsatisfiableError):
        run(fast, resolution(cudnn="8.9", tf="2.15.1"), opts)
    _nothing_placed(tmp_path / "env")


def test_missing_local_archive(fast: Context, tmp_path: Path) -> None:
    opts = InstallOptions(env=tmp_path / "env", cudnn_source="archive", cudnn_archive=tmp_path / "nope.tar.xz")
    with pytest.raises(BadInputError) as ei:  # the same check as the CLI's, before any step
        run(fast, resolution(), opts)
    assert "nope.tar.xz" in ei.value.message and ei.value.hint
    assert ei.value.code == ExitCode.BAD_INPUT and ei.value.ref == "cudnn-archive-missing"


def test_option_errors() -> None:
    env = Path("/tmp/e")
    with pytest.raises(UsageError):
        cudnn_steps(resolution(), InstallOptions(env=env, cudnn_source="archive"))
    with pytest.raises(UsageError):
        cudnn_steps(resolution(), InstallOptions(env=env, cudnn_source="rpm"))
    with pytest.raises(UsageError):
        cudnn_steps(resolution(), InstallOptions(env=env, cudnn_mirror="http://x/"))
    assert [s.id for s in cudnn_steps(resolution(), InstallOptions(env=env))] == ["cudnn.check"]
    assert [s.id for s in cudnn_steps(resolution(), InstallOptions(env=env, quarantine_stale=True))] == [
        "cudnn.check", "cudnn.quarantine"]
    assert placed_lib_dir(InstallOptions(env=env)) is None


# --- stale copies ------------------------------------------------------------------------


def _stale_setup(tmp_path: Path, tmp_env: dict[str, str]) -> tuple[Context, Path, Path, Path]:
    from tfgpu_install.context import build_context

    w = tmp_path / "w"
    w.mkdir()
    old = tmp_path / "ldpath"
    install_libs(old, "8.6.0", w)
    (old / "libother.so.1").write_bytes(b"not ours")  # not cuDNN: stays
    toolkit = Path(tmp_env["TFGPU_ROOT"]) / "usr/local/cuda-12.2/lib64"
    install_libs(toolkit, "9.0.0", w)
    ctx = build_context({**tmp_env, "LD_LIBRARY_PATH": str(old)})
    ctx.hooks.download_backoff = 0.0
    return ctx, old, toolkit, w


def test_quarantine_moves_stale_copies_and_undo_is_byte_identical(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    ctx, old, toolkit, _ = _stale_setup(tmp_path, tmp_env)
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    env = tmp_path / "env"
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc, quarantine_stale=True)
    res = resolution()
    # Listed before anything is placed (a dry run shows them), against the planned version.
    assert {c.version for c in find_stale(ctx, res, opts)} == {"8.6.0", "9.0.0"}
    before = {p: tree_digest(p) for p in (old, toolkit)}
    assert run(ctx, res, opts) == ["applied", "applied", "applied"]
    assert sorted(p.name for p in old.iterdir()) == ["libother.so.1"]
    assert list(toolkit.iterdir()) == []
    assert find_stale(ctx, res, opts) == []
    qdir = ctx.state_dir / "quarantine"
    assert any(p.name == "libcudnn.so.8.6.0" for p in qdir.rglob("*"))
    Executor(ctx, env).rollback(cudnn_steps(res, opts))
    assert {p: tree_digest(p) for p in (old, toolkit)} == before
    assert not any(p.is_file() for p in qdir.rglob("*"))


def test_stale_copies_are_listed_without_the_flag(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    ctx, old, toolkit, _ = _stale_setup(tmp_path, tmp_env)
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    opts = InstallOptions(env=tmp_path / "env", cudnn_source="archive", cudnn_archive=arc)
    report = Executor(ctx, opts.env).run(cudnn_steps(resolution(), opts))
    reported = report.results["cudnn.place"]["stale"]  # what the install report can show
    assert {(c["directory"], c["version"]) for c in reported} == {(str(old), "8.6.0"), (str(toolkit), "9.0.0")}
    stale = find_stale(ctx, resolution(), opts)
    assert {(c.directory, c.version, c.source) for c in stale} == {
        (old, "8.6.0", "LD_LIBRARY_PATH"), (toolkit, "9.0.0", "CUDA toolkit")}
    assert (old / "libcudnn.so.8.6.0").exists()  # listed, not moved


def test_quarantine_interrupted_midway_rolls_back_byte_identical(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    ctx, old, toolkit, _ = _stale_setup(tmp_path, tmp_env)
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)  # as env.create leaves it
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc, quarantine_stale=True)
    before = {p: tree_digest(p) for p in (old, toolkit, env)}
    ctx.hooks.fail_at = "cudnn.quarantine:middle:eio"
    with pytest.raises(StepFailed):
        run(ctx, resolution(), opts)
    assert tree_digest(old) != before[old]  # it had started moving
    ctx.hooks.fail_at = None
    Executor(ctx, env).rollback(cudnn_steps(resolution(), opts))
    assert {p: tree_digest(p) for p in (old, toolkit, env)} == before


# --- the wheel source ----------------------------------------------------------------------


def _wheel_env(tmp_path: Path, version: str) -> Path:
    env = tmp_path / "env"
    base = env / "lib/python3.11/site-packages/nvidia/cudnn"
    (base / "lib").mkdir(parents=True)
    w = tmp_path / "w"
    w.mkdir(exist_ok=True)
    install_libs(base / "lib", version, w, links=False)
    major = version.split(".")[0]
    for p in list((base / "lib").iterdir()):  # the wheel ships the soname as the file name
        p.rename(p.with_name(p.name.rsplit(".", 2)[0]))
    assert (base / "lib" / f"libcudnn.so.{major}").is_file()
    (base / "include").mkdir()
    (base / "include/cudnn_version.h").write_text(version_header(version))
    return env


def test_wheel_check(fast: Context, tmp_path: Path) -> None:
    env = _wheel_env(tmp_path, "9.1.0")
    opts = InstallOptions(env=env)
    assert run(fast, resolution(), opts) == ["done"]
    with pytest.raises(StepFailed) as ei:
        run(fast, resolution(cudnn="8.9", tf="2.15.1"), opts)
    assert "cannot serve TensorFlow 2.15.1" in ei.value.message
    (env / "lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9").unlink()
    with pytest.raises(StepFailed) as ei:
        run(fast, resolution(), opts)
    assert "no libcudnn.so.<major>" in ei.value.message


# --- interrupted placement -----------------------------------------------------------------


@pytest.mark.parametrize("named", [True, False])
def test_place_interrupted_then_resumed_then_rolled_back(fast: Context, tmp_path: Path, named: bool) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    if not named:  # nothing in the name tells the version: only the intent file knows dest
        arc = arc.rename(tmp_path / "cudnn.tar.xz")
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    before = tree_digest(env)
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc)
    fast.hooks.fail_at = "cudnn.place:middle:eio"
    with pytest.raises(StepFailed):
        run(fast, resolution(), opts)
    assert (env / "lib" / "cudnn-9.1.0" / MARKER).is_file() and not (env / "lib" / "cudnn").exists()
    fast.hooks.fail_at = None
    assert run(fast, resolution(), opts) == ["done", "applied"]  # resumed
    assert loader_resolves(env / "lib" / "cudnn" / "lib") == 90100
    Executor(fast, env).rollback(cudnn_steps(resolution(), opts))
    assert tree_digest(env) == before


@pytest.mark.parametrize("named", [True, False])
def test_place_interrupted_then_rolled_back(fast: Context, tmp_path: Path, named: bool) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    if not named:
        arc = arc.rename(tmp_path / "cudnn.tar.xz")
    env = tmp_path / "env"
    (env / "lib").mkdir(parents=True)
    before = tree_digest(env)
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc)
    fast.hooks.fail_at = "cudnn.place:middle:eio"
    with pytest.raises(StepFailed):
        run(fast, resolution(), opts)
    fast.hooks.fail_at = None
    Executor(fast, env).rollback(cudnn_steps(resolution(), opts))
    assert tree_digest(env) == before


def test_an_existing_tree_of_another_origin_is_never_merged_or_removed(fast: Context, tmp_path: Path) -> None:
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    env = tmp_path / "env"
    mine = env / "lib" / "cudnn-9.1.0"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("the user's")
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc)
    with pytest.raises(BadInputError) as ei:
        run(fast, resolution(), opts)
    assert "not empty" in ei.value.message
    Executor(fast, env).rollback(cudnn_steps(resolution(), opts))
    assert (mine / "notes.txt").read_text() == "the user's"


def test_the_envs_own_wheel_copy_is_listed_but_never_moved(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    ctx, old, toolkit, w = _stale_setup(tmp_path, tmp_env)
    env = _wheel_env(tmp_path, "9.3.0")  # pip's nvidia-cudnn wheel, another version
    arc = build_archive(tmp_path / "build", "9.1.0.70")
    opts = InstallOptions(env=env, cudnn_source="archive", cudnn_archive=arc, quarantine_stale=True)
    run(ctx, resolution(), opts)
    wheel_lib = env / "lib/python3.11/site-packages/nvidia/cudnn/lib"
    assert wheel_lib in {c.directory for c in find_stale(ctx, resolution(), opts)}
    assert (wheel_lib / "libcudnn.so.9").is_file()  # left to pip
    assert not (old / "libcudnn.so.8.6.0").exists()  # the others were moved
