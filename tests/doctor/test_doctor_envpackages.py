"""Issue 43 item 1, the machine side: `doctor --env` starts from `check`'s drift, runs the pip check its
own checklist recommends, and names the package that broke `import tensorflow` where the evidence
points at one (the package changed or fails a requirement AND the import's error names its module)."""

from __future__ import annotations

from pathlib import Path

from tests.support.doctor_layouts import fake_tf_env, make_ctx, replay
from tfgpu_install.doctor.chain import walk
from tfgpu_install.doctor.envpackages import Conflict, EnvPackages, culprit, parse_pip_check
from tfgpu_install.doctor.rules import load_rules
from tfgpu_install.snapshot import model as S

RULES = load_rules()
ABI = ("RuntimeError: module was compiled against NumPy C-API version 0x12 (NumPy 2.0) but the running NumPy has "
       "C-API version 0x11. Check the section C-API incompatibility at the Troubleshooting ImportError section")


def test_pip_and_uv_check_lines_are_read() -> None:
    pip = ("tensorflow 2.18.0 has requirement numpy<2.1.0,>=1.26.0, but you have numpy 2.2.1.\n"
           "tensorflow 2.18.0 requires ml-dtypes, which is not installed.\n")
    got = parse_pip_check(pip)
    assert got == (Conflict("tensorflow", "numpy", "numpy<2.1.0,>=1.26.0", "2.2.1"),
                   Conflict("tensorflow", "ml-dtypes", "ml-dtypes", ""))
    uv = ("Checked 42 packages in 3ms\nFound 1 incompatibility\nThe package `tensorflow` requires "
          "`numpy>=1.26.0,<2.1.0`, but `2.2.1` is installed\n")
    assert parse_pip_check(uv) == (Conflict("tensorflow", "numpy", "numpy>=1.26.0,<2.1.0", "2.2.1"),)
    assert parse_pip_check("No broken requirements found.\n") == ()  # control


def test_a_culprit_needs_both_sides() -> None:
    pk = EnvPackages(snapshot="kg-1", changed=("numpy: 2.0.2 -> 1.26.4", "six: 1.16.0 -> 1.17.0"))
    assert culprit(pk, ABI) is not None and culprit(pk, ABI)[0] == "numpy"  # type: ignore[index]
    assert culprit(pk, "ImportError: libcudart.so.12: cannot open shared object file") is None  # not named
    assert culprit(EnvPackages(snapshot="kg-1"), ABI) is None  # named, but nothing changed: no blame


def _env_with_numpy_swapped(tmp_path: Path) -> Path:
    env = fake_tf_env(tmp_path / "env", version="2.18.0", import_error=ABI)
    site = next((env / "lib").glob("python3*/site-packages"))
    (site / "tensorflow-2.18.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.18.0\nRequires-Dist: numpy>=2.0\n")
    for d in site.glob("nvidia_cudnn_cu12-*.dist-info"):
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nvidia-cudnn-cu12\nVersion: {d.name[18:-10]}\n")
    (site / "numpy-1.26.4.dist-info").mkdir()
    (site / "numpy-1.26.4.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.4\n")
    return env


def test_doctor_env_names_numpy_from_drift_and_pip_check(tmp_env: dict[str, str], tmp_path: Path) -> None:
    env = _env_with_numpy_swapped(tmp_path)
    ctx = make_ctx(tmp_env, replay(None, python=str(env / "bin" / "python")))
    good = _good(env)
    S.save(ctx.state_dir, good)
    rep = walk(ctx, RULES, str(env))  # no GPU here: the env's own layers are still examined
    checks = {c.name: c for c in rep.checks}
    drift = checks["packages since known-good"]
    assert drift.status == "warn" and "changed: numpy: 2.0.2 -> 1.26.4" in drift.evidence
    pip = checks["pip check"]
    assert pip.status == "warn" and any("numpy>=2.0" in e and "1.26.4" in e for e in pip.evidence), pip
    b = rep.broken
    assert b is not None and b.name == "import tensorflow" and b.rule == "numpy-api-version"
    assert "The package that broke it: numpy (changed: numpy: 2.0.2 -> 1.26.4" in b.cause
    assert f"snapshot restore {good.id}" in b.fix


def test_control_no_snapshot_no_blame(tmp_env: dict[str, str], tmp_path: Path) -> None:
    env = _env_with_numpy_swapped(tmp_path)
    rep = walk(make_ctx(tmp_env, replay(None, python=str(env / "bin" / "python"))), RULES, str(env))
    checks = {c.name: c for c in rep.checks}
    assert checks["packages since known-good"].status == "skip"
    b = rep.broken
    # pip check alone points at numpy, and the error names it: still named, through the broken requirement
    assert b is not None and b.rule == "numpy-api-version" and "numpy (" in b.cause and "requires numpy>=2.0" in b.cause


def _good(env: Path) -> S.Snapshot:
    """The env's known-good record: numpy 2.0.2 when it was verified."""
    from tests.support.snapshot_doc import make

    return make(env={"path": str(env), "backend": "venv", "python": "3.11.7"},
                packages=(S.Package("numpy", "2.0.2"), S.Package("nvidia-cudnn-cu12", "8.9.7.29"),
                          S.Package("tensorflow", "2.18.0")))
