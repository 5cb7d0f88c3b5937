"""doctor follows verify: on a machine without a GPU, `verify --env E` fails at `import tensorflow`
(numpy gone from a real env) and names `tfgpu-install doctor --env E`; that command explains it
(exit 13), instead of "nothing is broken"."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.restore_kit import (  # noqa: F401 (fixtures)
    Provisioned,
    cli,
    needs_gcc,
    served_index,
    source_env,
)
from tfgpu_install.errors import ExitCode

pytestmark = needs_gcc


def test_missing_numpy_is_diagnosed_without_a_gpu(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = source_env.env
    sp = sorted(env.glob("lib/python3*/site-packages"))[-1]
    moved = [p for p in sp.iterdir() if p.name == "numpy" or p.name.startswith("numpy-")]
    assert len(moved) == 2
    for p in moved:
        shutil.move(str(p), str(tmp_path / p.name))
    try:
        code, doc = cli(["verify", "--env", str(env)], source_env.environ, capsys)
        assert code == ExitCode.VERIFY_FAILED, doc
        failed = [lay for lay in doc["layers"] if lay["status"] == "fail"]
        assert failed and "numpy" in failed[0]["summary"], doc
        assert f"tfgpu-install doctor --env {env}" in (failed[0]["hint"] or ""), failed[0]

        code, doc = cli(["doctor", "--env", str(env)], source_env.environ, capsys)
        assert code == ExitCode.DIAGNOSED == 13, doc
        assert doc["status"] == "broken" and doc["broken"]["name"] == "import tensorflow", doc
        assert "'numpy'" in doc["broken"]["cause"] and "install" in doc["broken"]["fix"]
        assert any(c["status"] == "absent" for c in doc["checks"])  # and no GPU was seen: said, not hidden
    finally:
        for p in moved:
            shutil.move(str(tmp_path / p.name), str(p))
    code, doc = cli(["doctor", "--env", str(env)], source_env.environ, capsys)
    assert code == ExitCode.NO_GPU, doc  # the env is fine again: nothing of it to diagnose here
