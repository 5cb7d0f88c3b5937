"""env.create on real venvs (uv and stdlib) and on a conda stand-in that lays out real prefixes."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.fake_conda import read_log, write_fake_conda
from tfgpu_install.context import Context, build_context
from tfgpu_install.engine.executor import Executor
from tfgpu_install.env.target import TargetEnv, env_python_version
from tfgpu_install.env.tools import conda_named_env_path, find_uv
from tfgpu_install.errors import EnvironmentProblem, ExitCode, StepFailed
from tfgpu_install.files import tree_digest
from tfgpu_install.steps.env import CreateEnv

PYV = f"{sys.version_info.major}.{sys.version_info.minor}"
BASE = Path(sys.executable)
OTHER = "3.10" if PYV != "3.10" else "3.12"


def _ctx(tmp_env: dict[str, str], **extra: str) -> Context:
    return build_context({**tmp_env, **extra})


def _python_version_of(env: Path) -> str:
    import subprocess

    out = subprocess.run([str(env / "bin" / "python"), "-c", "import sys; print(sys.prefix); "
                                                             "print(sys.version_info[:2])"],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == str(env)  # the env's own interpreter, isolated in its prefix
    return out[1]


# --- venv ------------------------------------------------------------------------------------


@pytest.mark.parametrize("use_uv", [True, False], ids=["uv", "stdlib"])
def test_create_venv_then_noop_then_undo(tmp_env: dict[str, str], tmp_path: Path, use_uv: bool) -> None:
    ctx = _ctx(tmp_env) if use_uv else _ctx(tmp_env, TFGPU_NO_UV="1")
    if use_uv:
        assert find_uv(ctx) is not None
    env = TargetEnv.at(tmp_path / "envs" / "tf")
    step = CreateEnv(env, PYV, BASE)
    assert not step.check(ctx)
    record = step.apply(ctx)
    assert record["created"] is True and record["tool"] == ("uv venv" if use_uv else "python -m venv")
    assert step.check(ctx)
    assert env_python_version(env).startswith(PYV)  # type: ignore[union-attr]
    assert _python_version_of(env.path) == str(sys.version_info[:2])
    assert env.site_packages().is_dir() and env.site_packages().name == "site-packages"
    assert (env.bin_dir() / "activate").is_file()
    json.dumps(record)  # the undo record is JSON-able
    step.undo(ctx, record)
    assert not env.path.exists()
    assert (tmp_path / "envs").is_dir()  # only the env itself goes


def test_existing_empty_dir_is_used_and_given_back_empty(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "empty")
    env.path.mkdir()
    step = CreateEnv(env, PYV, BASE)
    assert not step.check(ctx)
    record = step.apply(ctx)
    assert step.check(ctx) and record["existed_empty"]
    step.undo(ctx, record)
    assert env.path.is_dir() and list(env.path.iterdir()) == []


def test_through_the_executor_rollback_restores_the_tree(ctx: Context, tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "keep.txt").write_text("mine")
    before = tree_digest(tmp_path / "work")
    env = TargetEnv.at(tmp_path / "work" / "env")
    ex = Executor(ctx, env.path)
    rep = ex.run([CreateEnv(env, PYV, BASE)])
    assert [s.status for s in rep.steps] == ["applied"]
    assert [s.status for s in ex.run([CreateEnv(env, PYV, BASE)]).steps] == ["done"]
    ex.rollback([CreateEnv(env, PYV, BASE)])
    assert tree_digest(tmp_path / "work") == before


def test_refuses_env_built_on_another_python(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    CreateEnv(env, PYV, BASE).apply(ctx)
    have = env_python_version(env)
    before = tree_digest(env.path)
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(env, OTHER, BASE).check(ctx)
    assert err.value.code == ExitCode.ENVIRONMENT and err.value.ref == "env-wrong-python"
    assert have in err.value.message and OTHER in err.value.message
    assert "--env" in (err.value.hint or "") and "delete" in (err.value.hint or "")
    assert tree_digest(env.path) == before


def test_base_interpreter_of_another_version_is_refused_before_acting(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(env, OTHER, BASE).apply(ctx)
    assert err.value.ref == "python-mismatch" and f"Python {PYV}" in err.value.message and OTHER in err.value.message
    assert not env.path.exists()


def test_seed_pip_gives_a_uv_venv_pip(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    CreateEnv(env, PYV, BASE, seed_pip=True).apply(ctx)
    assert list(env.site_packages().glob("pip-*.dist-info"))


def test_env_path_that_is_a_file(ctx: Context, tmp_path: Path) -> None:
    f = tmp_path / "env"
    f.write_text("not a dir")
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(TargetEnv.at(f), PYV, BASE).check(ctx)
    assert err.value.ref == "env-is-file" and str(f) in err.value.message
    assert f.read_text() == "not a dir"


def test_non_env_directory_is_never_written(ctx: Context, tmp_path: Path) -> None:
    d = tmp_path / "project"
    d.mkdir()
    (d / "notes.txt").write_text("x")
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(TargetEnv.at(d), PYV, BASE).check(ctx)
    assert err.value.ref == "env-not-an-env"
    assert [p.name for p in d.iterdir()] == ["notes.txt"]


def test_broken_env_whose_interpreter_is_gone(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    CreateEnv(env, PYV, BASE).apply(ctx)
    for name in ("python", "python3", f"python{PYV}"):
        p = env.bin_dir() / name
        if p.is_symlink() or p.exists():
            p.unlink()
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(env, PYV, BASE).check(ctx)
    assert err.value.ref == "env-broken"


def test_interpreter_missing(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    for base in (tmp_path / "no-such-python", None):
        with pytest.raises(EnvironmentProblem) as err:
            CreateEnv(env, PYV, base).apply(ctx)
        assert err.value.ref == "python-missing" and PYV in (err.value.message + (err.value.hint or ""))
    assert not env.path.exists()  # refused before the first change
    assert not CreateEnv(env, PYV, None)._marker(ctx).exists()


def test_interrupted_creation_resumes_and_rolls_back(ctx: Context, tmp_path: Path) -> None:
    env = TargetEnv.at(tmp_path / "env")
    step = CreateEnv(env, PYV, BASE)
    ctx.hooks.fail_at = "env.create:middle:eio"
    with pytest.raises(OSError):
        step.apply(ctx)
    ctx.hooks.fail_at = None
    assert env.path.is_dir()  # half-made
    assert not step.check(ctx)  # ours, unfinished: not "done", and not refused either
    step.undo(ctx, {"partial": True})
    assert not env.path.exists()
    # Again, then resume: the second apply finishes the job.
    ctx.hooks.fail_at = "env.create:middle:eio"
    with pytest.raises(OSError):
        step.apply(ctx)
    ctx.hooks.fail_at = None
    (env.path / "debris").write_text("left by the killed attempt")
    record = step.apply(ctx)
    assert step.check(ctx) and record["created"] and not (env.path / "debris").exists()


def test_no_write_permission(tmp_path: Path) -> None:
    """A parent the user cannot write: a clear EnvironmentProblem from check() and apply().
    Root ignores permission bits, so as root the check runs in a forked child as nobody."""
    top = Path(tempfile.mkdtemp(prefix="tfgpu-perm-"))
    try:
        os.chmod(top, 0o755)
        locked = top / "locked"
        locked.mkdir(mode=0o555)
        os.chmod(locked, 0o555)
        state = top / "state"
        state.mkdir(mode=0o777)
        os.chmod(state, 0o777)
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(top), "TFGPU_STATE_DIR": str(state),
               "TFGPU_CACHE_DIR": str(top / "c"), "TFGPU_DATA_DIR": str(top / "d")}

        def attempt() -> list[str]:
            ctx = build_context(env)
            # As nobody, an interpreter under /root is out of reach: use the system one.
            base = next((Path(p) for p in (f"/usr/bin/python{PYV}", "/usr/bin/python3") if os.path.exists(p)), BASE)
            step = CreateEnv(TargetEnv.at(locked / "env"), PYV, base)
            refs = []
            for call in (step.check, step.apply):
                try:
                    call(ctx)
                    refs.append("no error")
                except EnvironmentProblem as exc:
                    refs.append(f"{exc.ref}|{exc.message}")
            return refs

        if os.geteuid() != 0:
            refs = attempt()
        else:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # child: drop to nobody, report through the pipe
                try:
                    os.close(r)
                    os.setgid(65534)
                    os.setuid(65534)
                    os.write(w, json.dumps(attempt()).encode())
                finally:
                    os._exit(0)
            os.close(w)
            with os.fdopen(r) as fh:
                data = fh.read()
            os.waitpid(pid, 0)
            refs = json.loads(data)
        assert [x.split("|")[0] for x in refs] == ["no-permission", "no-permission"], refs
        assert str(locked) in refs[0]
        assert list(locked.iterdir()) == []
    finally:
        os.chmod(top / "locked", 0o755)
        import shutil

        shutil.rmtree(top)


# --- conda (stand-in executable; see tests/support/fake_conda.py) --------------------------


@pytest.fixture
def conda_ctx(tmp_env: dict[str, str], tmp_path: Path) -> tuple[Context, Path]:
    bin_dir = tmp_path / "condabin"
    exe = write_fake_conda(bin_dir, root=tmp_path / "miniforge", pythons={PYV: sys.executable})
    return build_context({**tmp_env, "PATH": f"{bin_dir}:{tmp_env['PATH']}"}), exe


def test_conda_prefix_env(conda_ctx: tuple[Context, Path], tmp_path: Path) -> None:
    ctx, exe = conda_ctx
    env = TargetEnv.at(tmp_path / "cenv", backend="conda")
    step = CreateEnv(env, PYV, None)  # conda brings its own Python: no base interpreter needed
    assert not step.check(ctx)
    record = step.apply(ctx)
    assert read_log(exe) == [["create", "-y", "-p", str(env.path), f"python={PYV}"]]
    assert (env.path / "conda-meta" / "history").is_file()
    assert (env.path / "etc" / "conda" / "activate.d").is_dir()
    assert env_python_version(env).startswith(PYV)  # type: ignore[union-attr]  # from conda-meta
    assert _python_version_of(env.path) == str(sys.version_info[:2])
    assert step.check(ctx)
    step.undo(ctx, record)
    assert read_log(exe)[-1] == ["remove", "-y", "--all", "-p", str(env.path)]
    assert not env.path.exists()


def test_conda_named_env(conda_ctx: tuple[Context, Path], tmp_path: Path) -> None:
    ctx, exe = conda_ctx
    path = conda_named_env_path(ctx, "tf217")
    assert path == tmp_path / "miniforge" / "envs" / "tf217"
    env = TargetEnv.at(path, backend="conda", name="tf217")
    record = CreateEnv(env, PYV, None).apply(ctx)
    assert ["create", "-y", "-n", "tf217", f"python={PYV}"] in read_log(exe)
    assert (path / "conda-meta").is_dir() and CreateEnv(env, PYV, None).check(ctx)
    CreateEnv(env, PYV, None).undo(ctx, record)
    assert read_log(exe)[-1] == ["remove", "-y", "--all", "-n", "tf217"] and not path.exists()


def test_micromamba_gets_a_channel(tmp_env: dict[str, str], tmp_path: Path) -> None:
    bin_dir = tmp_path / "mm"
    exe = write_fake_conda(bin_dir, root=tmp_path / "mmroot", pythons={PYV: sys.executable}, name="micromamba")
    ctx = build_context({**tmp_env, "PATH": f"{bin_dir}:{tmp_env['PATH']}"})
    env = TargetEnv.at(tmp_path / "menv", backend="conda")
    record = CreateEnv(env, PYV, None).apply(ctx)
    assert read_log(exe)[0] == ["create", "-y", "-p", str(env.path), f"python={PYV}", "-c", "conda-forge"]
    CreateEnv(env, PYV, None).undo(ctx, record)
    assert read_log(exe)[-1] == ["env", "remove", "-y", "-p", str(env.path)]


def test_conda_without_that_python_fails_clearly(conda_ctx: tuple[Context, Path], tmp_path: Path) -> None:
    ctx, _ = conda_ctx
    env = TargetEnv.at(tmp_path / "cenv", backend="conda")
    with pytest.raises(StepFailed) as err:
        CreateEnv(env, OTHER, None).apply(ctx)
    assert "PackagesNotFoundError" in err.value.message and err.value.code == ExitCode.STEP_FAILED


def test_conda_env_on_another_python_is_refused(conda_ctx: tuple[Context, Path], tmp_path: Path) -> None:
    ctx, _ = conda_ctx
    env = TargetEnv.at(tmp_path / "cenv", backend="conda")
    CreateEnv(env, PYV, None).apply(ctx)
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(env, OTHER, None).check(ctx)
    assert err.value.ref == "env-wrong-python"


def test_conda_missing(ctx: Context, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No conda tool and no py-rattler: refused before anything is made."""
    from tfgpu_install.conda import rattler_engine

    monkeypatch.setattr(rattler_engine, "available", lambda: False)
    ctx = build_context({**ctx.environ, "PATH": str(tmp_path / "empty-bin")})
    with pytest.raises(EnvironmentProblem) as err:
        CreateEnv(TargetEnv.at(tmp_path / "c", backend="conda"), PYV, None).apply(ctx)
    assert err.value.ref == "conda-missing" and "miniforge" in (err.value.hint or "")
    assert "tfgpu-install[conda]" in (err.value.hint or "") and not (tmp_path / "c").exists()


def test_conda_without_conda_uses_rattler_on_the_planned_interpreter(ctx: Context, tmp_path: Path) -> None:
    """No conda tool: py-rattler's prefix is a venv on the planned Python, with conda-meta/ for
    the CUDA packages; check() then accepts it as a conda env, and undo removes it."""
    pytest.importorskip("rattler")
    ctx = build_context({**ctx.environ, "PATH": f"{tmp_path / 'empty-bin'}:/usr/bin:/bin"})
    env = TargetEnv.at(tmp_path / "r", backend="conda")
    step = CreateEnv(env, PYV, Path(sys.executable))
    record = step.apply(ctx)
    assert record["tool"].startswith("rattler") and (env.path / "conda-meta").is_dir()
    assert step.check(ctx) is True
    step.undo(ctx, record)
    assert not env.path.exists()


def test_conda_python_from_an_unreadable_channel_is_a_step_failure(ctx: Context, tmp_path: Path) -> None:
    """No interpreter to build on: rattler must take Python from the channel; a channel it
    cannot read is one clear error (exit 7), not a traceback."""
    pytest.importorskip("rattler")
    ctx = build_context({**ctx.environ, "PATH": str(tmp_path / "empty-bin")})
    step = CreateEnv(TargetEnv.at(tmp_path / "p", backend="conda"), PYV, None,
                     channel=(tmp_path / "no-channel").as_uri())
    with pytest.raises(StepFailed) as err:
        step.apply(ctx)
    assert err.value.ref == "conda-channel" and "--conda-channel" in (err.value.hint or "")


def test_conda_into_an_existing_empty_dir(conda_ctx: tuple[Context, Path], tmp_path: Path) -> None:
    """conda makes the prefix itself; the user's empty directory is given back by undo."""
    ctx, exe = conda_ctx
    env = TargetEnv.at(tmp_path / "cenv", backend="conda")
    env.path.mkdir()
    record = CreateEnv(env, PYV, None).apply(ctx)
    assert record["existed_empty"] and (env.path / "conda-meta").is_dir()
    CreateEnv(env, PYV, None).undo(ctx, record)
    assert env.path.is_dir() and list(env.path.iterdir()) == []


def test_uv_trusts_the_distributions_ca_store_unless_told_otherwise(tmp_env: dict[str, str]) -> None:
    """A proxy that inspects TLS has its CA in the system store; uv only trusts its own roots
    unless told to use that store (seen here: `env -i` + PyPI through such a proxy failed)."""
    from tfgpu_install.env.tools import tool_env

    root = Path(tmp_env["TFGPU_ROOT"])
    assert "UV_SYSTEM_CERTS" not in tool_env(build_context(tmp_env))  # no store: uv's own roots
    store = root / "etc/ssl/certs/ca-certificates.crt"
    store.parent.mkdir(parents=True)
    store.write_text("")
    assert "UV_SYSTEM_CERTS" not in tool_env(build_context(tmp_env))  # an empty file is no store
    store.write_text("-----BEGIN CERTIFICATE-----\n")
    env = tool_env(build_context(tmp_env))
    assert env["UV_SYSTEM_CERTS"] == env["UV_NATIVE_TLS"] == "1"
    for chosen in ({"SSL_CERT_FILE": "/site/ca.pem"}, {"PIP_CERT": "/site/ca.pem"}, {"UV_SYSTEM_CERTS": "0"},
                   {"UV_NATIVE_TLS": "false"}, {"SSL_CERT_DIR": "/site/certs"}):
        env = tool_env(build_context({**tmp_env, **chosen}))
        assert "UV_SYSTEM_CERTS" not in env or env["UV_SYSTEM_CERTS"] == chosen.get("UV_SYSTEM_CERTS"), chosen
        assert {k: env[k] for k in chosen} == chosen  # what the user set is kept as it is
