"""packages.install: real uv and pip installs from a local index served over loopback HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import pytest

from tests.support.fake_conda import write_fake_conda
from tests.support.httpserver import refused_port
from tests.support.wheelhouse import (  # noqa: F401  (fixtures)
    STABLE_PINS,
    STABLE_REQUIREMENTS,
    TF_VERSION,
    IndexServer,
    Wheelhouse,
    package_index,
    served,
    wheelhouse,
)
from tfgpu_install.context import Context, build_context
from tfgpu_install.env.target import TargetEnv
from tfgpu_install.errors import DownloadError, ExitCode, StepFailed
from tfgpu_install.runner import Completed, ReplayRunner, SubprocessRunner
from tfgpu_install.steps.env import CreateEnv
from tfgpu_install.steps.packages import InstallPackages, installed_versions, unsatisfied

PYV = f"{sys.version_info.major}.{sys.version_info.minor}"


class RecordingRunner(SubprocessRunner):
    """The real runner, also noting which calls were marked mutating."""

    def __init__(self, path: Optional[str]) -> None:
        super().__init__(path=path)
        self.calls: list[tuple[tuple[str, ...], bool]] = []

    def run(self, argv: Sequence[str], *, mutating: bool = False, **kw: Any) -> Completed:  # type: ignore[override]
        self.calls.append((tuple(str(a) for a in argv), mutating))
        return super().run(argv, mutating=mutating, **kw)


def _ctx(tmp_env: Mapping[str, str], **extra: str) -> Context:
    env = {**tmp_env, "UV_HTTP_RETRIES": "0", **extra}
    return build_context(env, runner=RecordingRunner(env["PATH"]))


def _venv(ctx: Context, path: Path) -> TargetEnv:
    env = TargetEnv.at(path)
    CreateEnv(env, PYV, Path(sys.executable)).apply(ctx)
    return env


def _py(env: TargetEnv, code: str) -> str:
    return subprocess.run([str(env.python), "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_uv_install_from_index_then_noop_check_spawns_nothing(
    tmp_env: dict[str, str], tmp_path: Path, package_index: IndexServer
) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    step = InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url)
    assert not step.check(ctx)
    record = step.apply(ctx)
    assert record["tfgpu_install"] == "uv"
    have = installed_versions(env)
    assert have["tensorflow"] == TF_VERSION
    assert have["numpy"] == "1.26.4"  # the constraint held numpy below 2 although 2.0.0 is offered
    assert have["protobuf"] == "4.25.9"
    assert all(have[n] == v for n, v in STABLE_PINS.items())
    info = json.loads(_py(env, "import json, tensorflow as tf; print(json.dumps(tf.sysconfig.get_build_info()))"))
    assert info["cuda_version"] == "12.3" and info["cudnn_version"] == "9"
    install_calls = [(a, m) for a, m in ctx.runner.calls if "install" in a]  # type: ignore[attr-defined]
    assert install_calls and all(m for _, m in install_calls)
    assert ["--index-url", package_index.url] == list(install_calls[0][0][5:7])
    json.dumps(record)

    # A re-run's check reads dist-info files only: a runner that refuses every command proves it.
    quiet = build_context(dict(ctx.environ), runner=ReplayRunner())
    assert InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url).check(quiet)
    assert quiet.runner.calls == []  # type: ignore[attr-defined]


def test_pip_fallback_honours_pip_index_url(tmp_env: dict[str, str], tmp_path: Path, wheelhouse: Wheelhouse) -> None:
    ctx = _ctx(tmp_env, TFGPU_NO_UV="1")
    env = _venv(build_context(tmp_env), tmp_path / "env")  # a uv venv: it has no pip yet
    with served(wheelhouse) as srv:
        ctx = _ctx(tmp_env, TFGPU_NO_UV="1", PIP_INDEX_URL=srv.url)
        record = InstallPackages(env, STABLE_REQUIREMENTS).apply(ctx)
        assert any(r.startswith("/files/tensorflow-") for r in srv.requests)
    assert record["tfgpu_install"] == "pip"
    calls = [a for a, _ in ctx.runner.calls]  # type: ignore[attr-defined]
    assert calls[0][1:] == ("-m", "ensurepip", "--default-pip")  # pip bootstrapped offline first
    assert calls[1][:4] == (str(env.python), "-m", "pip", "install") and "--index-url" in calls[1]
    assert installed_versions(env)["tensorflow"] == TF_VERSION
    assert InstallPackages(env, STABLE_REQUIREMENTS).check(ctx)


def test_uv_honours_uv_index_url_and_extra_index(tmp_env: dict[str, str], tmp_path: Path,
                                                 wheelhouse: Wheelhouse) -> None:
    with served(wheelhouse) as srv:
        dead = f"http://127.0.0.1:{refused_port()}/simple"
        ctx = _ctx(tmp_env, UV_INDEX_URL=srv.url, PIP_EXTRA_INDEX_URL=dead)
        env = _venv(ctx, tmp_path / "env")
        step = InstallPackages(env, ["tensorflow==2.98.0", "numpy<2"])
        argv = step._installer(ctx)[1] + step._index_args(ctx, "uv")
        assert argv[-4:] == ["--index-url", srv.url, "--extra-index-url", dead]
        # uv tries the first index first and finds everything there.
        InstallPackages(env, ["tensorflow==2.98.0", "numpy<2"], extra_index_urls=[]).apply(
            _ctx(tmp_env, UV_INDEX_URL=srv.url)
        )
        assert srv.requests
    assert installed_versions(env)["tensorflow"] == "2.98.0"


def test_offline_find_links(tmp_env: dict[str, str], tmp_path: Path, wheelhouse: Wheelhouse) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    step = InstallPackages(env, STABLE_REQUIREMENTS, find_links=[str(wheelhouse.dir)], no_index=True)
    step.apply(ctx)
    assert step.check(ctx)
    argv = next(a for a, _ in ctx.runner.calls if "install" in a)  # type: ignore[attr-defined]
    assert "--no-index" in argv and str(wheelhouse.dir) in argv


def test_complete_lock_with_hashes(tmp_env: dict[str, str], tmp_path: Path, package_index: IndexServer,
                                  wheelhouse: Wheelhouse) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    lock = {"tensorflow": TF_VERSION, **STABLE_PINS, "numpy": "1.26.4", "protobuf": "4.25.9", "absl-py": "2.1.0"}
    reqs = [f"{n}=={v}" for n, v in lock.items()]
    hashes = {n: [wheelhouse.sha256(n, v)] for n, v in lock.items()}
    step = InstallPackages(env, reqs, hashes=hashes, index_url=package_index.url)
    step.apply(ctx)
    argv = next(a for a, _ in ctx.runner.calls if "install" in a)  # type: ignore[attr-defined]
    assert "--require-hashes" in argv
    assert step.check(ctx)


def test_wrong_hash_is_refused(tmp_env: dict[str, str], tmp_path: Path, package_index: IndexServer) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    bad = {"tensorflow": ["sha256:" + "0" * 64]}
    step = InstallPackages(env, STABLE_REQUIREMENTS, hashes=bad, index_url=package_index.url)
    with pytest.raises(StepFailed) as err:
        step.apply(ctx)
    assert "hash" in err.value.message.lower()
    assert "tensorflow" not in installed_versions(env)


def test_unreachable_index_is_a_download_error(tmp_env: dict[str, str], tmp_path: Path) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    step = InstallPackages(env, STABLE_REQUIREMENTS, index_url=f"http://127.0.0.1:{refused_port()}/simple")
    with pytest.raises(DownloadError) as err:
        step.apply(ctx)
    assert err.value.code == ExitCode.DOWNLOAD and "PIP_INDEX_URL" in (err.value.hint or "")


def test_unsatisfiable_pin_fails_and_changes_nothing(tmp_env: dict[str, str], tmp_path: Path,
                                                     package_index: IndexServer) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    before = installed_versions(env)
    with pytest.raises(StepFailed) as err:
        InstallPackages(env, ["tensorflow==3.0.0"], index_url=package_index.url).apply(ctx)
    assert "tensorflow" in err.value.message and err.value.code == ExitCode.STEP_FAILED
    assert installed_versions(env) == before


def test_undo_restores_previous_package_set(tmp_env: dict[str, str], tmp_path: Path,
                                            package_index: IndexServer) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    InstallPackages(env, ["tensorflow==2.98.0", "numpy==1.26.4", "protobuf==5.0.0"],
                    index_url=package_index.url).apply(ctx)
    before = installed_versions(env)
    step = InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url)
    assert not step.check(ctx)
    record = step.apply(ctx)
    assert record["env_created"] is False
    now = installed_versions(env)
    assert now["tensorflow"] == TF_VERSION and now["protobuf"] == "4.25.9"  # upgraded, downgraded
    step.undo(ctx, record)
    assert installed_versions(env) == before
    uninstall = [a for a, m in ctx.runner.calls if "uninstall" in a]  # type: ignore[attr-defined]
    calls = ctx.runner.calls  # type: ignore[attr-defined]
    assert uninstall and all(m for a, m in calls if "uninstall" in a or "install" in a)
    assert _py(env, "import tensorflow; print(tensorflow.__version__)") == "2.98.0"


def test_env_created_in_the_same_run_is_left_to_env_removal(tmp_env: dict[str, str], tmp_path: Path,
                                                             package_index: IndexServer) -> None:
    ctx = _ctx(tmp_env)
    env = TargetEnv.at(tmp_path / "env")
    created = CreateEnv(env, PYV, Path(sys.executable)).apply(ctx)
    # what the executor hands the next step, which names env.create in its `needs`
    record = InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url).apply_with(
        ctx, {"env.create": created})
    assert record["env_created"] is True
    n = len(ctx.runner.calls)  # type: ignore[attr-defined]
    InstallPackages(env, STABLE_REQUIREMENTS).undo(ctx, record)
    assert len(ctx.runner.calls) == n  # type: ignore[attr-defined]  # nothing uninstalled one by one
    CreateEnv(env, PYV, Path(sys.executable)).undo(ctx, created)
    assert not env.path.exists()


def test_interrupted_install_resumes_and_partial_undo(tmp_env: dict[str, str], tmp_path: Path,
                                                      package_index: IndexServer) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    before = installed_versions(env)
    step = InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url)
    ctx.hooks.fail_at = "packages.install:middle:eio"
    with pytest.raises(OSError):
        step.apply(ctx)
    ctx.hooks.fail_at = None
    # Everything is on disk, but the step did not finish: check() says so, and undo of the
    # interrupted step (no record) still knows the before-state.
    assert not unsatisfied(env, STABLE_REQUIREMENTS)
    assert not step.check(ctx)
    step.undo(ctx, {"partial": True})
    assert installed_versions(env) == before
    # And a resumed run finishes and is then done.
    ctx.hooks.fail_at = "packages.install:middle:eio"
    with pytest.raises(OSError):
        step.apply(ctx)
    ctx.hooks.fail_at = None
    record = step.apply(ctx)
    assert record["before"] == before and step.check(ctx)


def test_a_package_cut_short_mid_write_is_installed_again_on_resume(
    tmp_env: dict[str, str], tmp_path: Path, package_index: IndexServer
) -> None:
    """Disk full or a kill in the middle of writing a package leaves its dist-info without
    METADATA: uv then refuses to read the env. The resumed step drops such records and finishes."""
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    step = InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url)
    ctx.hooks.fail_at = "packages.install:middle:enospc"
    with pytest.raises(OSError):
        step.apply(ctx)
    ctx.hooks.fail_at = None
    broken = next(env.path.glob("lib/python*/site-packages/absl_py-*.dist-info"))
    (broken / "METADATA").unlink()  # as a write cut short leaves it
    record = step.apply(ctx)
    assert step.check(ctx) and record["tfgpu_install"] in ("uv", "pip")
    assert (next(env.path.glob("lib/python*/site-packages/absl_py-*.dist-info")) / "METADATA").is_file()


def test_check_walks_dependencies_and_markers(tmp_env: dict[str, str], tmp_path: Path,
                                              package_index: IndexServer) -> None:
    ctx = _ctx(tmp_env)
    env = _venv(ctx, tmp_path / "env")
    InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url).apply(ctx)
    assert unsatisfied(env, STABLE_REQUIREMENTS) == []  # the win32-only dependency is not wanted here
    assert unsatisfied(env, ["tensorflow[and-cuda]"]) == []  # the extra's pins are installed
    # A dependency removed behind our back (as after a kill mid-install) is noticed.
    InstallPackages(env, [])._run(ctx, [*InstallPackages(env, [])._installer(ctx)[2], "absl-py"], "remove absl")
    problems = unsatisfied(env, STABLE_REQUIREMENTS)
    assert problems == ["absl-py>=1.0.0 is not installed (needed by tensorflow)"]
    assert unsatisfied(env, ["numpy>=2"]) == ["numpy>=2 wanted, numpy 1.26.4 is installed"]
    assert not InstallPackages(env, STABLE_REQUIREMENTS).check(ctx)


def test_conda_env_gets_packages(tmp_env: dict[str, str], tmp_path: Path, package_index: IndexServer) -> None:
    bin_dir = tmp_path / "condabin"
    write_fake_conda(bin_dir, root=tmp_path / "miniforge", pythons={PYV: sys.executable})
    ctx = _ctx(tmp_env, PATH=f"{bin_dir}:{tmp_env['PATH']}")
    env = TargetEnv.at(tmp_path / "cenv", backend="conda")
    CreateEnv(env, PYV, None).apply(ctx)
    step = InstallPackages(env, STABLE_REQUIREMENTS, index_url=package_index.url)
    step.apply(ctx)
    assert step.check(ctx)
    assert _py(env, "import tensorflow, sys; print(tensorflow.__file__.startswith(sys.prefix))") == "True"


def test_proxy_from_the_environment_reaches_the_installer(tmp_env: dict[str, str], tmp_path: Path,
                                                          wheelhouse: Wheelhouse) -> None:
    """HTTP_PROXY in the context's environment is how the index is reached: the index host
    (.invalid never resolves) is only reachable through a loopback proxy that serves it."""
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import urlsplit

    seen: list[str] = []

    class Proxy(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            seen.append(self.path)  # a proxy gets the absolute URL
            self.path = urlsplit(self.path).path if self.path.startswith("http://") else "/refused"
            super().do_GET()

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Proxy, directory=str(wheelhouse.root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        proxy = f"http://127.0.0.1:{server.server_address[1]}"
        ctx = _ctx(tmp_env, HTTP_PROXY=proxy, http_proxy=proxy, NO_PROXY="", no_proxy="")
        env = _venv(ctx, tmp_path / "env")
        InstallPackages(env, STABLE_REQUIREMENTS, index_url="http://pkgs.invalid/simple").apply(ctx)
    finally:
        server.shutdown()
        server.server_close()
    assert installed_versions(env)["tensorflow"] == TF_VERSION
    assert any(u.startswith("http://pkgs.invalid/simple/tensorflow") for u in seen)


def test_index_settings_precedence(tmp_env: dict[str, str], tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    ctx = build_context({**tmp_env, "PIP_INDEX_URL": "https://pip.example/simple",
                         "UV_INDEX_URL": "https://uv.example/simple",
                         "PIP_EXTRA_INDEX_URL": "https://a.example/simple https://b.example/simple",
                         "PIP_FIND_LINKS": "/srv/wheels", "PIP_NO_INDEX": "1"})
    step = InstallPackages(env, ["tensorflow==2.99.0"])
    # Each tool first reads its own variable, then the other tool's (users set only one).
    assert step._index_args(ctx, "uv") == [
        "--index-url", "https://uv.example/simple",
        "--extra-index-url", "https://a.example/simple", "--extra-index-url", "https://b.example/simple",
        "--find-links", "/srv/wheels", "--no-index"]
    assert step._index_args(ctx, "pip")[:2] == ["--index-url", "https://pip.example/simple"]
    explicit = InstallPackages(env, ["x"], index_url="https://mirror.example/simple")
    assert explicit._index_args(ctx, "uv")[:2] == ["--index-url", "https://mirror.example/simple"]
    only_pip = build_context({**tmp_env, "PIP_INDEX_URL": "https://pip.example/simple"})
    assert step._index_args(only_pip, "uv") == ["--index-url", "https://pip.example/simple"]
    assert step._index_args(build_context(tmp_env), "uv") == []  # the tool's own default (PyPI)


def test_from_choice_and_options(tmp_path: Path) -> None:
    from tfgpu_install.plan.options import InstallOptions
    from tfgpu_install.resolver.model import Choice

    choice = Choice(tensorflow="2.99.0", cuda="12.3", cudnn="9.1", python=PYV, jit_only=False,
                    pins=dict(STABLE_PINS), constraints={"numpy": ">=1.23.5,<2.0"})
    opts = InstallOptions(env=tmp_path / "env", index_url="https://mirror.example/simple",
                          extra={"find_links": "/w1 /w2", "no_index": "0"})
    step = InstallPackages.from_choice(TargetEnv.at(opts.env), choice, opts)
    assert step.requirements == STABLE_REQUIREMENTS[:4] + ["numpy>=1.23.5,<2.0"]
    assert step.index_url == "https://mirror.example/simple"
    assert step.find_links == ["/w1", "/w2"] and step.no_index is False
    assert "tensorflow==2.99.0" in step.describe() and str(opts.env) in step.describe()


def test_a_resume_drops_records_whose_files_the_full_disk_cut(tmp_path: Path) -> None:
    """A dist-info can look complete (METADATA, the wheel's own RECORD) next to a library that
    ENOSPC cut short: on resume it is dropped, so the installer puts the package in again."""
    from tfgpu_install.env.target import TargetEnv
    from tfgpu_install.steps.packages import _drop_half_installed, installed

    env = TargetEnv.at(tmp_path / "env")
    site = env.path / "lib" / "python3.11" / "site-packages"

    def dist(name: str, lib_bytes: bytes, listed: int, record: bool = True) -> Path:
        info = site / f"{name}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (site / name).mkdir()
        (site / name / "lib.so").write_bytes(lib_bytes)
        if record:
            (info / "RECORD").write_text(f"{name}/lib.so,sha256=x,{listed}\n{name}-1.0.dist-info/METADATA,,\n"
                                         f"{name}-1.0.dist-info/RECORD,,\n")
        return info

    whole = dist("whole", b"x" * 100, 100)
    cut = dist("cut", b"x" * 40, 100)  # the copy stopped at 40 of 100 bytes
    gone = dist("gone", b"", 0)
    (site / "gone" / "lib.so").unlink()
    norecord = dist("norecord", b"x", 1, record=False)
    assert set(installed(env)) == {"whole", "cut", "gone", "norecord"}
    _drop_half_installed(env)
    assert whole.is_dir() and not cut.exists() and not gone.exists() and not norecord.exists()
    assert set(installed(env)) == {"whole"}
