"""What docs/guides/conda.md says the conda backend serves, held to the knowledge files (#43 item 8: the
README filed `--backend conda` under TF 2.0-2.13): which releases take their CUDA from conda packages
(`cuda_from: system`), that each of them has a row in profiles/conda.yaml, and that every other release
brings its CUDA as wheels."""

from __future__ import annotations

from pathlib import Path

import yaml
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]


def _load(name: str) -> dict:
    return dict(yaml.safe_load((REPO / "profiles" / name).read_text()))


def test_the_conda_guides_table_is_the_knowledge() -> None:
    releases = _load("matrix.yaml")["releases"]
    rows = {r["cuda"] for r in _load("conda.yaml")["recipes"]}
    system = [r for r in releases if r.get("cuda_from") == "system"]
    assert system and all(r["cuda"] in rows for r in system)  # each has its conda packages
    lines = sorted({Version(r["tensorflow"]).release[:2] for r in system})
    assert (lines[0], lines[-1]) == ((2, 0), (2, 4))
    newest_system = max(Version(r["tensorflow"]) for r in system)
    assert all(r.get("cuda_from") == "pip" for r in releases if Version(r["tensorflow"]) > newest_system)
    assert sorted({r["cuda"] for r in system}) == ["10.0", "10.1", "11.0"]
    guide = (REPO / "docs" / "guides" / "conda.md").read_text()
    assert "| 2.0–2.4 | `system` (CUDA 10.0, 10.1, 11.0) |" in guide and "| 2.5 and newer | `pip`" in guide
