"""`snapshot diff`: exit 0 when the same, 11 (DRIFT) when they differ; two envs installed from one
plan compare equal (activation compared as what it sets, not as each env's own path)."""

from __future__ import annotations

import sys
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
from tfgpu_install.snapshot.drift import relative_activation

pytestmark = needs_gcc


def _good(environ: dict[str, str], env: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code, doc = cli(["snapshot", "list"], environ, capsys)
    assert code == 0
    found = [s["id"] for s in doc["snapshots"] if s["kind"] == "known-good" and s["env"] == str(env)]
    assert found
    return str(found[-1])


def test_same_is_0_and_different_is_11(
    source_env: Provisioned, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    environ = source_env.environ
    twin = source_env.tmp / "data" / "twin-env"
    code, doc = cli(["--profile", "stable", "--allow-cpu", "-y", "--python", sys.executable, "--env", str(twin)],
                    environ, capsys)
    assert code == 0, doc
    a, b = _good(environ, source_env.env, capsys), _good(environ, twin, capsys)
    code, doc = cli(["snapshot", "diff", a, b], environ, capsys)
    assert code == 0 and doc["clean"] is True and doc["activation_changed"] == [], doc

    # A real difference: an edited activation line in the twin, seen as what it sets.
    act = twin / "bin" / "activate"
    new = act.with_name("activate.new")
    new.write_text(act.read_text().replace("export LD_LIBRARY_PATH", "export LD_LIBRARY_PATH=/elsewhere; #", 1))
    new.replace(act)
    code, exp = cli(["snapshot", "export", "--env", str(twin), "--no-hashes"], environ, capsys)
    assert code == 0
    code, doc = cli(["snapshot", "diff", a, exp["id"]], environ, capsys)
    assert code == ExitCode.DRIFT == 11 and doc["clean"] is False and doc["activation_changed"] == ["bin/activate"]


def test_relative_activation_takes_out_only_the_env_path() -> None:
    a = relative_activation({"bin/activate": 'LD_LIBRARY_PATH="/x/env-a/lib/nvidia/cudnn/lib"'}, "/x/env-a")
    b = relative_activation({"bin/activate": 'LD_LIBRARY_PATH="/x/env-b/lib/nvidia/cudnn/lib"'}, "/x/env-b/")
    c = relative_activation({"bin/activate": 'LD_LIBRARY_PATH="/x/env-b/lib/nvidia/cublas/lib"'}, "/x/env-b")
    assert a == b != c
    assert relative_activation({"f": "/x"}, None) == {"f": "/x"}  # no path on record: compared as it is
