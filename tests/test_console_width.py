"""Tables at 80 columns, as a user at a terminal sees them (a real pty through util-linux `script`):
a path breaks only after a `/`, the path column gets the room; off a terminal one whole line a row."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.promised import require_tool
from tfgpu_install.report import fit_widths, wrap_cell

REPO = Path(__file__).resolve().parents[1]
ENV = "/tmp/a-rather-long-directory-name/another-level/data/envs/tensorflow-gpu-environment"
SHOW = f"""
from tfgpu_install.console import render
from tfgpu_install.report import Result, table
rows = [("packages.install", "pending", "install tensorflow==2.16.1 and 3 more into {ENV}"),
        ("activation.write", "done", "{ENV}/bin/activate")]
render(Result(data={{}}, blocks=[table("steps", ("step", "state", "what"), rows)]), as_json=False)
"""


def _pty(code: str, columns: int) -> str:
    require_tool("script", "util-linux's script gives the tool a terminal")
    cmd = f"stty cols {columns}; {sys.executable} -c '{code}'"
    env = {**os.environ, "PYTHONPATH": str(REPO), "TERM": "dumb"}
    done = subprocess.run(["script", "-qfec", cmd, "/dev/null"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.replace("\r", "")


def _cells(out: str, column: int) -> list[str]:
    """The text of one column, line by line (rich's box: cells between │)."""
    return [line.split("│")[column + 1].strip() for line in out.splitlines() if line.startswith("│")]


def test_at_80_columns_paths_break_only_after_a_slash() -> None:
    out = _pty(SHOW, 80)
    lines = [line for line in out.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, out
    what = _cells(out, 2)
    assert len(what) > 2, out  # it did wrap
    for piece in what:
        assert piece.endswith("/") or piece.endswith(("environment", "activate", "into")), out
    for segment in ENV.strip("/").split("/"):
        assert any(segment in piece for piece in what), (segment, out)
    assert "".join(p for p in what[-3:]) == f"{ENV}/bin/activate", out  # the second row's path, whole again
    assert _cells(out, 0)[0] == "packages.install" and _cells(out, 1)[0] == "pending"  # narrow columns kept


def test_off_a_terminal_a_row_is_one_whole_line() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SHOW], capture_output=True, text=True, env=env, timeout=120)
    rows = [line for line in done.stdout.splitlines() if "activation.write" in line]
    assert len(rows) == 1 and rows[0].rstrip().endswith(f"{ENV}/bin/activate"), done.stdout


def test_wrap_cell_breaks_paths_at_slashes_and_text_at_spaces() -> None:
    assert wrap_cell("/home/someone/.local/share/envs/tf", 16) == ["/home/someone/", ".local/share/", "envs/tf"]
    assert wrap_cell("write the activation script", 12) == ["write the", "activation", "script"]
    assert wrap_cell("a-segment-longer-than-the-width", 10) == ["a-segment-", "longer-tha", "n-the-widt", "h"]
    assert wrap_cell("", 5) == [""]


def test_fit_widths_gives_the_room_to_the_path_column() -> None:
    rows = [["packages.install", "pending", "install into /home/someone/.local/share/tfgpu-install/envs/tf-2.16"],
            ["verify.run", "pending", "import tensorflow and list the GPUs, then run a small matmul on each of them"]]
    cols = ("step", "state", "what")
    assert fit_widths(cols, rows, 200) == [16, 7, 76]  # everything fits: natural widths
    widths = fit_widths(cols, rows, 60)
    assert sum(widths) == 60 and widths[:2] == [16, 7]
    assert fit_widths(cols, rows, 10) == [16, 7, 14]  # not even the unbreakable pieces fit: their widths
