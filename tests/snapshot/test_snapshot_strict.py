"""A snapshot is untrusted input: names are PEP 508 names (no direct references), versions are
PEP 440, hashes are sha256:<64 hex>, no path comes from its text, control characters never
reach the terminal raw."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests.support.snapshot_doc import make
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.report import Bullets, Heading, Result, Table, Text
from tfgpu_install.snapshot import model as S

VALID = S.dumps(make(id="20261201T000000Z-known-good-aaaaaa"))


def _refused(old: str, new: str, *words: str) -> BadInputError:
    assert old in VALID, old
    with pytest.raises(BadInputError) as info:
        S.loads(VALID.replace(old, new, 1), "f.yaml")
    err = info.value
    assert err.code == ExitCode.BAD_INPUT and err.hint, err.message
    for word in words:
        assert word in err.message, err.message
    return err


@pytest.mark.parametrize("name", [
    "absl-py @ http://127.0.0.1:9/x.whl#",  # a PEP 508 direct reference: uv would fetch it
    "numpy @ file:///tmp/x",
    "numpy[extra]",
    "numpy; os_name == 'posix'",
    "-e .",
    "--index-url=http://evil",
    "-numpy",
    "numpy ",
])
def test_a_package_name_is_a_project_name_and_nothing_else(name: str) -> None:
    _refused("- name: numpy", f"- name: {json.dumps(name)}", "packages[0].name")


@pytest.mark.parametrize("version", ["1.26.4 @ http://x/y.whl", "1.0; python_version>'3'", "latest", "1.0 ", "../1"])
def test_a_package_version_is_pep440(version: str) -> None:
    _refused("  version: 1.26.4", f"  version: {json.dumps(version)}", "packages[0].version")


@pytest.mark.parametrize("digest", ["md5:abc", "sha256:" + "A" * 64, "sha256:" + "a" * 63, "sha512:" + "a" * 128])
def test_a_hash_is_sha256_with_64_hex(digest: str) -> None:
    _refused("  - sha256:" + "a" * 64, f"  - '{digest}'", "packages[0].hashes[0]")


@pytest.mark.parametrize("key, value", [
    ("tensorflow", "2.17/../../.."), ("cuda", "12.3/../../../.."), ("python", "3.11/../../x"),
    ("cudnn", "8.9\x1b[2K"), ("tensorflow", "2.17.1\n"),
])
def test_versions_in_the_resolution_are_pep440(key: str, value: str) -> None:
    """The default restore target is built from these: a traversal must never get that far."""
    old = {"tensorflow": "  tensorflow: 2.17.1", "cuda": "  cuda: '12.3'", "python": "  python: '3.11'",
           "cudnn": "  cudnn: '8.9'"}[key]
    if old not in VALID:
        old = old.replace("'", "")
    _refused(old, f"  {key}: {json.dumps(value)}", f"resolution.{key}")


@pytest.mark.parametrize("pin", ["absl-py @ https://x/y.whl", "x; os_name=='nt'"])
def test_pin_names_in_the_resolution_are_project_names(pin: str) -> None:
    doc = make(id="20261201T000000Z-known-good-aaaaaa",
               resolution={"tensorflow": "2.17.1", "cuda": "12.3", "cudnn": "8.9", "python": "3.11",
                           "pins": {pin: "1.0"}})
    with pytest.raises(BadInputError) as info:
        S.loads(S.dumps(doc), "f.yaml")
    assert "resolution.pins" in info.value.message


def test_a_valid_document_still_loads() -> None:
    snap = S.loads(VALID, "f.yaml")
    assert [p.name for p in snap.packages] == ["numpy", "six"]


def test_the_default_restore_target_stays_under_the_data_dir(tmp_path: Path) -> None:
    """Even a Choice built without the schema (a journal, a test) cannot leave data_dir/envs."""
    from tfgpu_install.app.envs import default_env_path
    from tfgpu_install.context import build_context
    from tfgpu_install.resolver.model import Choice

    ctx = build_context({"TFGPU_DATA_DIR": str(tmp_path / "data"), "TFGPU_STATE_DIR": str(tmp_path / "s"),
                         "TFGPU_CACHE_DIR": str(tmp_path / "c"), "HOME": str(tmp_path)})
    evil = Choice(tensorflow="2.17/../../..", cuda="12.3", cudnn="8.9", python="3.11", jit_only=False)
    with pytest.raises(BadInputError):
        default_env_path(ctx, evil)
    good = default_env_path(ctx, Choice(tensorflow="2.17.1", cuda="12.3", cudnn="8.9", python="3.11", jit_only=False))
    assert good.parent == tmp_path / "data" / "envs"


def _rendered(result: Result) -> str:
    from tfgpu_install.console import render

    out = io.StringIO()
    render(result, as_json=False, stream=out)
    return out.getvalue()


def test_control_characters_from_snapshot_text_are_escaped_on_the_terminal() -> None:
    """\\x1b[1A\\x1b[2K would erase restore's "into <target>" line; \\r would overwrite it."""
    hostile = "/envs/tf\x1b[1A\x1b[2K\rrestore snapshot X into /safe\x9b2K\x07"
    out = _rendered(Result({}, [Heading("restore snapshot X into /target"), Text(f"taken at {hostile}"),
                                Bullets("w", (hostile,)), Table("t", ("a",), ((hostile,),))]))
    for raw in ("\x1b", "\r", "\x9b", "\x07"):
        assert raw not in out, repr(out)
    assert "\\x1b[1A" in out and "restore snapshot X into /target" in out


def test_control_characters_in_an_error_are_escaped() -> None:
    from tfgpu_install.console import render_error

    err = io.StringIO()
    render_error(BadInputError("no snapshot 'a\x1b]0;pwned\x07'", "fix\x1b[2K"), False, err)
    assert "\x1b" not in err.getvalue() and "\\x1b]0;pwned" in err.getvalue()


CONDA = {"name": "cudatoolkit", "version": "11.8.0", "build": "h6a678d5_0", "channel": "conda-forge",
         "sha256": "c" * 64}


def test_a_conda_envs_packages_load_strictly() -> None:
    snap = make(id="20261201T000000Z-known-good-aaaaaa",
                env={"path": "/envs/tf", "backend": "conda", "conda_packages": [CONDA]})
    assert S.loads(S.dumps(snap), "f.yaml").env.to_json()["conda_packages"] == [CONDA]


@pytest.mark.parametrize("key, value", [
    ("channel", "http://evil.example/channel"), ("channel", "file:///tmp/chan"), ("name", "cuda @ http://x"),
    ("version", "11.8; rm -rf"), ("build", "h 0"), ("sha256", "xyz"),
])
def test_a_conda_record_with_a_hostile_field_is_refused(key: str, value: str) -> None:
    snap = make(id="20261201T000000Z-known-good-aaaaaa",
                env={"path": "/envs/tf", "backend": "conda", "conda_packages": [{**CONDA, key: value}]})
    with pytest.raises(BadInputError) as info:
        S.loads(S.dumps(snap), "f.yaml")
    assert f"env.conda_packages[0].{key}" in info.value.message


def test_the_restore_command_it_suggests_is_shell_quoted(tmp_path: Path) -> None:
    from tfgpu_install.app.restore import _target_env
    from tfgpu_install.commands.snapshot_restore import taken_at_line
    from tfgpu_install.context import build_context
    from tfgpu_install.resolver.model import Choice

    ctx = build_context({"TFGPU_DATA_DIR": str(tmp_path / "data"), "TFGPU_STATE_DIR": str(tmp_path / "s"),
                         "TFGPU_CACHE_DIR": str(tmp_path / "c"), "HOME": str(tmp_path)})
    snap = make(env={"path": "/envs/x; touch PWNED", "backend": "venv"})
    _, taken = _target_env(ctx, None, snap, Choice(tensorflow="2.17.1", cuda="12.3", cudnn="8.9", python="3.11",
                                                   jit_only=False))
    line = taken_at_line(ctx, taken, env_given=False)
    assert "--env '/envs/x; touch PWNED'" in line, line


# --- every field the tool writes in the resolution is typed when read back (#39 item 20) -------

def _recorded_resolution() -> dict[str, object]:
    """The resolution block as an install records it: the resolver's Resolution.to_json() + added."""
    from tfgpu_install.resolver.model import Choice, Rejection, Resolution

    choice = Choice(tensorflow="2.17.1", cuda="12.3", cudnn="8.9", python="3.11", jit_only=False,
                    pins={"nvidia-cudnn-cu12": "8.9.7.29"}, constraints={"numpy": ">=1.26,<2"},
                    hashes={"nvidia-cudnn-cu12": ["sha256:" + "d" * 64]}, sonames=["libcudart.so.12"])
    res = Resolution(profile="stable", choice=choice, reasons=("driver 535 supports CUDA <= 12.2",),
                     rejected=(Rejection("2.18.0", ("CUDA 12.5 > 12.2",)),), options=("o",), remedies=(),
                     warnings=("w",))
    return {**res.to_json(), "added": ["pandas>=2"]}


RECORDED = S.dumps(make(id="20261201T000000Z-known-good-aaaaaa", resolution=_recorded_resolution()))


@pytest.mark.parametrize("old, new, where", [
    ("      nvidia-cudnn-cu12:\n      - sha256:", "      nvidia-cudnn-cu12: 12\n      x:\n      - sha256:",
     "resolution.choice.hashes.nvidia-cudnn-cu12"),
    ("      - sha256:", "      - md5:", "resolution.choice.hashes.nvidia-cudnn-cu12[0]"),
    ("    sonames:\n    - libcudart.so.12", "    sonames: 5", "resolution.choice.sonames"),
    ("    sonames:\n    - libcudart.so.12", "    sonames:\n    - 5", "resolution.choice.sonames[0]"),
    ("  reasons:\n  - driver 535", "  reasons: 7\n  x:\n  - driver 535", "resolution.reasons"),
    ("  - tensorflow: 2.18.0", "  - tensorflow: [2]", "resolution.rejected[0].tensorflow"),
    ("    reasons:\n    - CUDA 12.5", "    reasons: {a: 1}\n    x:\n    - CUDA 12.5", "resolution.rejected[0].reasons"),
    ("  options:\n  - o", "  options: 3", "resolution.options"),
    ("  remedies: []", "  remedies: [{a: 1}]", "resolution.remedies[0]"),
    ("  warnings:\n  - w", "  warnings: true", "resolution.warnings"),
    ("  profile: stable", "  profile: [1]", "resolution.profile"),
    ("  cpu_only: false", "  cpu_only: 'no'", "resolution.cpu_only"),
    ("    jit_only: false", "    jit_only: 0", "resolution.choice.jit_only"),
])
def test_every_field_of_a_recorded_resolution_is_typed(old: str, new: str, where: str) -> None:
    assert old in RECORDED, old
    with pytest.raises(BadInputError) as info:
        S.loads(RECORDED.replace(old, new, 1), "f.yaml")
    assert info.value.code == ExitCode.BAD_INPUT and f"{where}:" in info.value.message, info.value.message


def test_a_recorded_resolution_loads_and_writes_back_the_same_bytes() -> None:
    """The control: the document as the tool writes it loads, and is written back byte for byte."""
    assert S.dumps(S.loads(RECORDED, "f.yaml")) == RECORDED


def test_restore_dry_run_refuses_a_hash_of_the_wrong_type(
    tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`resolution.choice.hashes: 12` was accepted by `snapshot restore --dry-run` (exit 0)."""
    from tfgpu_install.cli import main

    bad = tmp_path / "bad.yaml"
    bad.write_text(RECORDED.replace("    hashes:\n    ", "    hashes: 12\n    x:\n    ", 1))
    code = main(["snapshot", "restore", str(bad), "--env", str(tmp_path / "new"), "--dry-run", "--json"],
                environ=tmp_env)
    doc = json.loads(capsys.readouterr().out)
    assert code == ExitCode.BAD_INPUT and "resolution.choice.hashes: expected a mapping" in doc["message"], doc
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("old, new, where", [
    ("  ok: true", "  ok: 'yes'", "verification.ok"),
    ("  gpu_verified: false", "  gpu_verified: 0", "verification.gpu_verified"),
    ("  ok: true", "  ok: true\n  report: 5", "verification.report"),
    ("  ok: true", "  ok: true\n  verified_at: [1]", "verification.verified_at"),
])
def test_every_field_of_the_verification_is_typed(old: str, new: str, where: str) -> None:
    """The verification block was any plain data: `ok: 'yes'` loaded, and the list called it verified."""
    assert old in RECORDED, old
    with pytest.raises(BadInputError) as info:
        S.loads(RECORDED.replace(old, new, 1), "f.yaml")
    assert f"{where}:" in info.value.message, info.value.message
