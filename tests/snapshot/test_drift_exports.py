"""Drift between states, and the exports other tools read."""

from __future__ import annotations

import yaml

from tests.support.snapshot_doc import make
from tfgpu_install.snapshot import drift, exports
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.pylock import parse_pylock, wheel_hashes


def test_compare_finds_each_kind_of_drift() -> None:
    a = make()
    pk = (S.Package("numpy", "2.0.0"), S.Package("rich", "13.0.0"))
    files = (S.FileRecord(a.files[0].path, "c" * 64, 10),)
    act = {"bin/activate": "edited"}
    host = S.HostContract(driver="550.54.14", max_cuda="12.4", glibc="2.35", arch="x86_64", gpus=a.host.gpus)
    d = drift.compare((a.packages, pk), (a.files, files), (a.activation, act), (a.host, host))
    assert d.packages_added == ("rich==13.0.0",)
    assert d.packages_removed == ("six==1.16.0",)
    assert d.packages_changed == ("numpy: 1.26.4 -> 2.0.0",)
    assert d.files_changed == (a.files[0].path,)
    assert d.activation_changed == ("bin/activate",)
    assert "driver: 535.104.05 -> 550.54.14" in d.host_changed
    assert not d.clean
    assert any(line.startswith("activation edited") for line in d.lines())


def test_identical_states_are_clean() -> None:
    a = make()
    d = drift.compare((a.packages, a.packages), (a.files, a.files), (a.activation, a.activation), (a.host, a.host))
    assert d.clean and d.lines() == []


def test_requirements_txt_has_hash_lines() -> None:
    hashes = ("sha256:" + "a" * 64, "sha256:" + "b" * 64)
    text = exports.requirements_txt(make(packages=(S.Package("numpy", "1.26.4", hashes),)))
    assert "numpy==1.26.4 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:" + "b" * 64 + "\n" in text
    assert "WARNING" not in text
    warn = exports.requirements_txt(make())
    assert "no hash known for: six==1.16.0" in warn


def test_conda_environment_shape() -> None:
    env = yaml.safe_load(exports.conda_environment_yml(make()))
    assert set(env) == {"name", "channels", "dependencies"}
    assert env["dependencies"][0] == "python=3.11"
    assert env["dependencies"][1] == "pip"
    assert env["dependencies"][2] == {"pip": ["numpy==1.26.4", "six==1.16.0"]}


def test_pylock_parse_and_hashes() -> None:
    text = (
        'lock-version = "1.0"\ncreated-by = "uv"\n\n[[packages]]\nname = "Six"\nversion = "1.16.0"\n'
        'wheels = [{ url = "https://example.invalid/six-1.16.0-py2.py3-none-any.whl", '
        'hashes = { sha256 = "' + "8" * 64 + '" } }]\n'
    )
    entry = parse_pylock(text)["six"]
    assert wheel_hashes(entry) == ("sha256:" + "8" * 64,)


def test_lock_platform_is_the_newest_uv_knows_not_above_the_host_glibc() -> None:
    from tfgpu_install.snapshot.pylock import python_platform

    assert python_platform("2.36", "x86_64") == "x86_64-manylinux_2_36"
    assert python_platform("2.30", "x86_64") == "x86_64-manylinux_2_28"
    assert python_platform("2.27", "aarch64") == "aarch64-manylinux_2_17"
    assert python_platform(None, None) == "x86_64-manylinux_2_28"
    assert python_platform("2.45", "x86_64") == "x86_64-manylinux_2_40"


def test_the_seeded_pip_is_never_drift() -> None:
    from tfgpu_install.snapshot.drift import compare
    from tfgpu_install.snapshot.model import Package

    old = [Package("pip", "23.2.1"), Package("numpy", "1.26.4")]
    assert compare((old, [Package("numpy", "1.26.4")]), ((), ()), ({}, {})).clean
    assert compare(([Package("numpy", "1.26.4")], [Package("pip", "24.0"), Package("numpy", "1.26.4")]),
                   ((), ()), ({}, {})).clean
    assert not compare((old, [Package("numpy", "2.0.0")]), ((), ()), ({}, {})).clean
