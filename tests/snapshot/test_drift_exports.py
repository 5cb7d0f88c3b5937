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
    assert set(env) == {"name", "channels", "dependencies", "prefix", "variables"}
    assert env["dependencies"][0] == "python=3.11.7"  # exact, as the env had it
    assert env["dependencies"][1] == "pip"
    assert env["dependencies"][2] == {"pip": ["numpy==1.26.4", "six==1.16.0"]}
    # conda does not expand variables: absolute paths under the prefix the file names
    assert env["prefix"] == "/envs/tf"
    assert env["variables"] == {"LD_LIBRARY_PATH": "/envs/tf/lib/python3.11/site-packages/nvidia/cudnn/lib"}


def test_conda_environment_pins_conda_packages_and_drops_hostile_ones() -> None:
    conda = [{"name": "cudatoolkit", "version": "11.8.0", "build": "h6a678d5_0"},
             {"name": "evil; rm -rf /", "version": "1"}, {"name": "python", "version": "3.11.7"}]
    snap = make(env={"path": "/envs/tf", "backend": "conda", "python": "3.11.7", "conda_packages": conda},
                files=())
    env = yaml.safe_load(exports.conda_environment_yml(snap))
    assert env["dependencies"][:3] == ["python=3.11.7", "pip", "cudatoolkit=11.8.0=h6a678d5_0"]
    assert len(env["dependencies"]) == 4  # + the pip table; the hostile name is dropped
    assert "variables" not in env  # no library files recorded: nothing to put on the path


def test_library_dirs_ignore_paths_outside_the_env() -> None:
    files = (S.FileRecord("../../etc/libx.so.1", "b" * 64, 1), S.FileRecord("/abs/liby.so", "b" * 64, 1),
             S.FileRecord("lib/python3.11/site-packages/nvidia/cublas/lib/libcublas.so.12", "b" * 64, 1),
             S.FileRecord("lib/python3.11/site-packages/nvidia/cublas/__init__.py", "b" * 64, 1))
    assert exports.library_dirs(make(files=files)) == ["lib/python3.11/site-packages/nvidia/cublas/lib"]


def test_one_format_table_feeds_the_command() -> None:
    from tfgpu_install.cli import build_parser

    parser = build_parser(only="snapshot")
    args = parser.parse_args(["snapshot", "export", "--format", "conda", "-o", "x"])
    assert args.format == "conda"
    sub = next(a for a in parser._actions if a.dest == "command").choices["snapshot"]  # type: ignore[union-attr]
    export = next(a for a in sub._actions if a.dest == "snapshot_command").choices["export"]  # type: ignore[union-attr]
    fmt = next(a for a in export._actions if a.dest == "format")
    assert tuple(fmt.choices) == tuple(exports.FORMATS) == ("tfgpu", "requirements", "conda", "pylock")
    assert all(f.summary in fmt.help for f in exports.FORMATS.values())


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
