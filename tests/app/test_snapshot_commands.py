"""check, list, show, diff and the exports, against a real provisioned env.

`check` exits 11 (DRIFT) for each kind of drift and 0 when clean; the exports are read by
the tools that consume them: real pip installs the requirements file with --require-hashes,
pylock.toml parses with PEP 751's required keys, environment.yml has `conda env create`'s shape."""

from __future__ import annotations

import re
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    freeze,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.wheelhouse import WheelSpec, build_wheel
from tfgpu_install.errors import ExitCode

pytestmark = needs_gcc


def _uv(source_env: Provisioned, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "uv", "pip", *args, "--python", str(source_env.env / "bin" / "python")],
                   env=source_env.environ, check=True, capture_output=True)


def _check(source_env: Provisioned, capsys: pytest.CaptureFixture[str], **extra: str) -> tuple[int, Any]:
    return cli(["check", "--env", str(source_env.env)], {**source_env.environ, **extra}, capsys)


def test_check_catches_each_kind_of_drift(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env, idx = source_env.env, source_env.index_url
    code, doc = _check(source_env, capsys)
    assert code == 0 and doc["clean"] is True, doc

    extra = build_wheel(WheelSpec("extra-tool", "1.0", {"extra_tool/__init__.py": b""}), tmp_path / "w")
    _uv(source_env, "install", str(extra))
    code, doc = _check(source_env, capsys)
    assert code == ExitCode.DRIFT == 11 and doc["packages_added"] == ["extra-tool==1.0"]
    _uv(source_env, "uninstall", "extra-tool")
    assert _check(source_env, capsys)[0] == 0

    _uv(source_env, "install", "--index-url", idx, "protobuf==5.0.0")
    code, doc = _check(source_env, capsys)
    assert code == 11 and doc["packages_changed"] == ["protobuf: 4.25.9 -> 5.0.0"]
    _uv(source_env, "install", "--index-url", idx, "protobuf==4.25.9")
    assert _check(source_env, capsys)[0] == 0

    _uv(source_env, "uninstall", "absl-py")
    code, doc = _check(source_env, capsys)
    assert code == 11 and doc["packages_removed"] == ["absl-py==2.1.0"]
    _uv(source_env, "install", "--index-url", idx, "absl-py==2.1.0")
    assert _check(source_env, capsys)[0] == 0

    lib = sorted(env.glob("lib/python3*/site-packages/nvidia/cudnn/lib/libcudnn.so.9"))[0]
    original = lib.read_bytes()
    lib.write_bytes(original + b"\0")
    code, doc = _check(source_env, capsys)
    assert code == 11 and doc["files_changed"] == [str(lib.relative_to(env))]
    lib.write_bytes(original)
    assert _check(source_env, capsys)[0] == 0

    activate = env / "bin" / "activate"
    text = activate.read_text()
    activate.write_text(text.replace("export LD_LIBRARY_PATH", "export LD_LIBRARY_PATH  # edited", 1))
    code, doc = _check(source_env, capsys)
    assert code == 11 and doc["activation_changed"] == ["bin/activate"]
    activate.write_text(text)
    assert _check(source_env, capsys)[0] == 0

    code, doc = _check(source_env, capsys, TFGPU_OVERRIDE_DRIVER="550.54.14")
    assert code == 11 and doc["host_changed"][0] == "driver: 535.104.05 -> 550.54.14"
    assert [k for k, v in doc.items() if isinstance(v, list) and v] == ["host_changed"]


def test_list_show_diff(source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = cli(["snapshot", "list"], source_env.environ, capsys)
    assert code == 0
    good = [s for s in doc["snapshots"] if s["kind"] == "known-good" and s["env"] == str(source_env.env)]
    assert good and good[-1]["tensorflow"] == "2.99.0"
    code, doc = cli(["snapshot", "show", good[-1]["id"][:20]], source_env.environ, capsys)
    assert code == 0 and doc["id"] == good[-1]["id"] and doc["format"] == 2
    code, exp = cli(["snapshot", "export", "--env", str(source_env.env), "--no-hashes"], source_env.environ, capsys)
    assert code == 0
    code, doc = cli(["snapshot", "diff", good[-1]["id"], exp["id"]], source_env.environ, capsys)
    assert code == 0 and doc["clean"] is True
    code, err = cli(["snapshot", "show", "no-such-id"], source_env.environ, capsys)
    assert code == ExitCode.BAD_INPUT and "snapshot list" in err["hint"]


def test_check_without_snapshot_says_how_to_get_one(tmp_path: Path, source_env: Provisioned,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "plain"
    venv.create(other, with_pip=False)
    code, err = cli(["check", "--env", str(other)], source_env.environ, capsys)
    assert code == ExitCode.BAD_INPUT and err["error"] == "no-snapshot" and "export" in err["hint"]
    # An export of it is then what `check` watches it against.
    code, _ = cli(["snapshot", "export", "--env", str(other), "--no-hashes"], source_env.environ, capsys)
    assert code == 0
    code, doc = cli(["check", "--env", str(other)], source_env.environ, capsys)
    assert code == 0 and doc["clean"] is True


# --- the exports, read by their tools ----------------------------------------------------


def test_requirements_export_installs_with_real_pip_require_hashes(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    req = tmp_path / "requirements.txt"
    code, _ = cli(["snapshot", "export", "--env", str(source_env.env), "--format", "requirements", "-o", str(req)],
                  source_env.environ, capsys)
    assert code == 0
    assert "--hash=sha256:" in req.read_text() and "WARNING" not in req.read_text()
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=False)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(fresh / "bin" / "python"), "install", "-q",
                    "--disable-pip-version-check", "--no-cache-dir", "--require-hashes", "--no-deps",
                    "--index-url", source_env.index_url, "-r", str(req)],
                   check=True, capture_output=True, text=True,
                   env={**source_env.environ, "PIP_CONFIG_FILE": "/dev/null"})
    assert freeze(fresh) == freeze(source_env.env)
    # A wrong hash makes pip refuse.
    bad = tmp_path / "bad.txt"
    bad.write_text(re.sub(r"(absl-py==2\.1\.0 \\\n\s+--hash=sha256:)[0-9a-f]{64}", r"\g<1>" + "0" * 64,
                          req.read_text()))
    out = subprocess.run([sys.executable, "-m", "pip", "--python", str(fresh / "bin" / "python"), "install", "-q",
                          "--disable-pip-version-check", "--no-cache-dir", "--require-hashes", "--force-reinstall",
                          "--no-deps", "--index-url", source_env.index_url, "-r", str(bad)],
                         capture_output=True, text=True, env={**source_env.environ, "PIP_CONFIG_FILE": "/dev/null"})
    assert out.returncode != 0 and "DO NOT MATCH THE HASHES" in out.stderr


def test_pylock_export_has_pep751_required_keys(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pylock.toml"
    code, _ = cli(["snapshot", "export", "--env", str(source_env.env), "--format", "pylock", "-o", str(out)],
                  source_env.environ, capsys)
    assert code == 0
    lock = tomllib.loads(out.read_text())
    assert lock["lock-version"] == "1.0" and lock["created-by"]
    names = {p["name"] for p in lock["packages"]}
    assert {"tensorflow", "numpy", "absl-py"} <= names
    for p in lock["packages"]:
        assert p["name"] and p["version"]
        assert p["wheels"], p
        for w in p["wheels"]:
            assert ("url" in w or "path" in w) and re.fullmatch(r"[0-9a-f]{64}", w["hashes"]["sha256"])


CONDA_KEYS = {"name", "channels", "dependencies", "prefix", "variables"}
CONDA_SPEC = re.compile(r"^[A-Za-z0-9_.\-]+(?:[=<>!~]=?[A-Za-z0-9_.*,<>=!]+)?$")


def test_conda_export_matches_conda_env_create_schema(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from packaging.requirements import Requirement

    out = tmp_path / "environment.yml"
    code, _ = cli(["snapshot", "export", "--env", str(source_env.env), "--format", "conda", "-o", str(out)],
                  source_env.environ, capsys)
    assert code == 0
    doc = yaml.safe_load(out.read_text())
    assert set(doc) <= CONDA_KEYS and isinstance(doc["name"], str) and not re.search(r"[/ :#]", doc["name"])
    assert all(isinstance(c, str) for c in doc["channels"])
    deps = doc["dependencies"]
    strings = [d for d in deps if isinstance(d, str)]
    tables = [d for d in deps if isinstance(d, dict)]
    assert all(CONDA_SPEC.match(s) for s in strings), strings
    py = freeze_python(source_env.env)
    assert f"python={py}" in strings and "pip" in strings
    # the library paths ride in `variables:` (conda applies them on activate); rattler reads every spec
    import rattler

    specs = [rattler.MatchSpec(s) for s in strings]
    assert [str(s.name.normalized) for s in specs][:2] == ["python", "pip"]
    libs = doc["variables"]["LD_LIBRARY_PATH"].split(":")
    assert f"{source_env.env}/lib/python{'.'.join(py.split('.')[:2])}/site-packages/nvidia/cudnn/lib" in libs
    assert all(Path(d).is_dir() for d in libs) and doc["prefix"] == str(source_env.env)
    assert len(tables) == 1 and set(tables[0]) == {"pip"}
    pins = [Requirement(r) for r in tables[0]["pip"]]
    assert all(str(r.specifier).startswith("==") for r in pins)
    assert {r.name for r in pins} >= {"tensorflow", "numpy"}


def freeze_python(env: Path) -> str:
    cfg = (env / "pyvenv.cfg").read_text()
    return re.search(r"version(?:_info)?\s*=\s*([\d.]+)", cfg).group(1)  # type: ignore[union-attr]
