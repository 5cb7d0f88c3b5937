"""--with / --with-file input: requirements.txt, pylock.toml, pyproject.toml read strictly; hostile
or malformed input is refused with the line and the fix, never installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tfgpu_install.errors import BadInputError, ExitCode, UsageError
from tfgpu_install.plan import additions as A
from tfgpu_install.plan.options import InstallOptions, options_from_json, options_to_json


def test_requirements_txt_comments_continuations_and_hashes(tmp_path: Path) -> None:
    f = tmp_path / "requirements.txt"
    f.write_text("# mine\npandas>=2 ; python_version >= '3.9'  # data\n\nrich==13.7.0 \\\n"
                 "    --hash=sha256:" + "a" * 64 + "\nPyYAML[libyaml]~=6.0\n")
    assert A.read_file(f) == ['pandas>=2; python_version >= "3.9"', "rich==13.7.0", "PyYAML[libyaml]~=6.0"]


@pytest.mark.parametrize("line", ["-r other.txt", "-e .", "--index-url https://evil.invalid/simple",
                                  "--extra-index-url=https://evil.invalid"])
def test_requirements_txt_options_are_refused_with_the_line(tmp_path: Path, line: str) -> None:
    f = tmp_path / "requirements.txt"
    f.write_text(f"numpy\n{line}\n")
    with pytest.raises(BadInputError) as err:
        A.read_file(f)
    assert "requirements.txt:2" in err.value.message and err.value.code == ExitCode.BAD_INPUT


@pytest.mark.parametrize("text", ["x @ https://evil.invalid/x.whl", "y @ file:///etc/passwd", "not a req!!",
                                  "a" * 2000, "ok\x00no"])
def test_direct_references_and_garbage_are_refused(text: str) -> None:
    with pytest.raises(UsageError) as err:
        A.gather([text], [])
    assert err.value.code == ExitCode.USAGE and err.value.hint


def test_pylock_pins_each_package(tmp_path: Path) -> None:
    f = tmp_path / "pylock.toml"
    f.write_text('lock-version = "1.0"\ncreated-by = "uv"\n[[packages]]\nname = "Rich"\nversion = "13.7.0"\n'
                 '[[packages]]\nname = "pygments"\nversion = "2.17.2"\n')
    assert A.read_file(f) == ["Rich==13.7.0", "pygments==2.17.2"]
    f.write_text('lock-version = "1.0"\n[[packages]]\nname = "rich"\nversion = "1; rm -rf /"\n')
    with pytest.raises(BadInputError, match="exact version"):
        A.read_file(f)


def test_pyproject_reads_project_dependencies(tmp_path: Path) -> None:
    f = tmp_path / "pyproject.toml"
    f.write_text('[project]\nname = "mine"\ndependencies = ["pandas>=2", "scikit-learn"]\n')
    assert A.read_file(f) == ["pandas>=2", "scikit-learn"]
    f.write_text('[project]\nname = "mine"\n')
    with pytest.raises(BadInputError, match="dependencies"):
        A.read_file(f)
    f.write_text("[project\n")
    with pytest.raises(BadInputError, match="not TOML"):
        A.read_file(f)


def test_files_that_are_not_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no file"):
        A.read_file(tmp_path / "missing.txt")
    target = tmp_path / "real.txt"
    target.write_text("numpy\n")
    link = tmp_path / "requirements.txt"
    os.symlink(target, link)
    with pytest.raises(BadInputError):
        A.read_file(link)  # a link is not followed
    big = tmp_path / "big.txt"
    big.write_bytes(b"numpy\n" * (A.MAX_FILE // 6 + 10))
    with pytest.raises(BadInputError, match="larger"):
        A.read_file(big)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(BadInputError, match="UTF-8"):
        A.read_file(binary)


def test_merged_replaces_by_name() -> None:
    assert A.merged(["pandas>=2", "rich"], ["Pandas>=2.2", "tqdm"]) == ("rich", "Pandas>=2.2", "tqdm")


def test_records_are_checked_again() -> None:
    assert A.from_record({"added": ["rich", "x @ file:///etc/passwd", 3, "ok>=1"]}) == ("rich", "ok>=1")
    assert A.from_record({"added": "rich"}) == () and A.from_record(None) == ()


def test_options_round_trip_keeps_the_additions() -> None:
    opts = InstallOptions(env=Path("/envs/tf"), with_requirements=("pandas>=2", "rich"))
    back = options_from_json(options_to_json(opts))
    assert back == opts and isinstance(back.with_requirements, tuple)
    assert options_from_json({"env": "/envs/tf"}).with_requirements == ()
