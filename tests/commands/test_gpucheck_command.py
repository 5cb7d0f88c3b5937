"""`tfgpu-install gpu-check --pack DIR` (issue 43): the pack as a command, through the real CLI and the
real script (scripts/gpu-check.sh), from a checkout."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tfgpu_install.cli import main

LIMIT = 64 * 1024 * 1024


def _run(argv: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = main(["gpu-check", *argv, "--json"], environ=environ)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_a_file_is_refused_before_anything_is_built(tmp_env: dict[str, str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    code, doc = _run(["--pack", str(target)], tmp_env, capsys)
    assert code == 2 and "is a file, not a directory" in doc["message"]
    assert target.read_text() == "mine\n"


def test_a_directory_of_other_things_is_refused(tmp_env: dict[str, str], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "photos"
    target.mkdir()
    (target / "cat.jpg").write_bytes(b"\xff\xd8")
    code, doc = _run(["--pack", str(target)], tmp_env, capsys)
    assert code == 2 and "not empty and holds no pack" in doc["message"]
    assert sorted(p.name for p in target.iterdir()) == ["cat.jpg"]


def test_without_the_index_it_fails_as_a_download_with_the_fix(tmp_env: dict[str, str], tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The script is found (no digging in site-packages) and builds the tool's wheel; the dependency
    download is what fails offline: exit 8, the script's own words, and what to do."""
    environ = dict(tmp_env, PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1")
    target = tmp_path / "pack"
    code, doc = _run(["--pack", str(target)], environ, capsys)
    assert code == 8, doc
    assert "downloading the dependencies for Python 3.9 failed" in doc["message"]
    assert "package index" in doc["hint"]
    assert [w.name.split("-")[0] for w in (target / "wheels").glob("*.whl")] == ["tfgpu_install"]


@pytest.mark.slow
def test_a_real_pack_fits_the_lent_machine(tmp_env: dict[str, str], tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    cache = Path(os.environ.get("HOME", "/root")) / ".cache" / "pip"
    environ = dict(tmp_env, PIP_CACHE_DIR=str(cache), PIP_DISABLE_PIP_VERSION_CHECK="1")
    target = tmp_path / "pack"
    code, doc = _run(["--pack", str(target)], environ, capsys)
    assert code == 0, doc
    assert doc["bytes"] <= LIMIT and doc["run"] == f"{target}/gpu-check.sh --offline {target}"
    assert any(w.startswith("tfgpu_install-") for w in doc["wheels"])
    assert (target / "gpu-check.sh").stat().st_mode & 0o111
    code, again = _run(["--pack", str(target)], environ, capsys)  # a pack made earlier is refreshed
    assert code == 0 and again["bytes"] <= LIMIT
