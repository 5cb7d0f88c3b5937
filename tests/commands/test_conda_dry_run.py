"""`--backend conda --dry-run` checks the conda engine and fails the way the real run does (#43 item 8): on
a machine with no conda, mamba or micromamba and no py-rattler, the dry run passed and the real run then
failed after the question; both now exit 6 (conda-missing) before anything, with a fix that names what
installs the engine (`--with-conda`: scripts/install alone does not). py-rattler's absence is a real
import failure: a package of that name on PYTHONPATH that raises ImportError as a missing one does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.install_kit import cli_env, run_cli


def _no_rattler(tmp_path: Path) -> str:
    site = tmp_path / "no-rattler"
    (site / "rattler").mkdir(parents=True)
    (site / "rattler" / "__init__.py").write_text('raise ImportError("No module named \'rattler\'")\n')
    return str(site)


def test_the_dry_run_fails_as_the_run_does_without_a_conda_engine(
    tmp_path: Path, tmp_env: dict[str, str], index: Any, knowledge: Path
) -> None:
    env = cli_env(tmp_env, knowledge, index.url, PATH="/usr/bin:/bin")  # no conda/mamba/micromamba there
    assert not any((Path(d) / t).exists() for d in ("/usr/bin", "/bin") for t in ("conda", "mamba", "micromamba"))
    bare = dict(env, PYTHONPATH=f"{_no_rattler(tmp_path)}:{env['PYTHONPATH']}")
    target = tmp_path / "data" / "cenv"
    args = ["--profile", "stable", "--backend", "conda", "--allow-cpu", "--python", sys.executable,
            "--env", str(target), "--json"]
    runs = [run_cli([*args, "--dry-run"], bare), run_cli([*args, "-y"], bare)]
    docs = [json.loads(r.stdout) for r in runs]
    for done, doc in zip(runs, docs):
        assert done.returncode == 6 and doc["error"] == "conda-missing", done.stdout + done.stderr
        assert "scripts/install --with-conda" in doc["hint"] and "includes it" not in doc["hint"]
    assert docs[0]["message"] == docs[1]["message"]
    assert not target.exists()
    # control: with py-rattler importable, the same dry run passes
    ok = run_cli([*args, "--dry-run"], env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
