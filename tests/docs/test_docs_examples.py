"""The examples in the docs are real: the snapshot-format page's example is read by the real reader and
schema, and each key the JSON-output page lists for a command is in that command's real `--json`
document (run here in a temp world without a GPU)."""

from __future__ import annotations

import json
import re
import shlex

import pytest

from tests.docs.reference_gen import REPO
from tfgpu_install.cli import main
from tfgpu_install.errors import BadInputError
from tfgpu_install.snapshot.model import loads

DOCS = REPO / "docs" / "reference"


def _example() -> str:
    found = re.search(r"```yaml\n(.*?)```", (DOCS / "snapshot-format.md").read_text(), re.S)
    assert found
    return found.group(1)


def test_the_snapshot_format_example_is_a_valid_snapshot() -> None:
    snap = loads(_example(), "docs/reference/snapshot-format.md")
    assert snap.kind == "known-good" and snap.host.gpus and snap.packages[0].name == "tensorflow"


def test_a_damaged_example_would_be_refused() -> None:
    """The control: the reader does judge the text (a hash that is not one is refused)."""
    with pytest.raises(BadInputError):
        loads(_example().replace("sha256:", "md5:", 1), "docs")


def _documented() -> dict[str, list[str]]:
    rows = {}
    for line in (DOCS / "json-output.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = re.findall(r"`([a-z_]+)`", cells[1].split(";")[0])
    return rows


RUNNABLE = {
    "probe": "probe",
    "plan": "plan --assume-driver 550.54.14 --assume-gpu A100 --assume-python 3.11 --assume-glibc 2.36",
    "profiles": "profiles",
    "envs": "envs",
    "knowledge show": "knowledge show",
    "snapshot list": "snapshot list",
    "verify": "verify",
    "doctor": "doctor",
}


@pytest.mark.parametrize("command", list(RUNNABLE))
def test_the_documented_keys_are_in_the_real_output(command: str, tmp_env: dict[str, str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    keys = _documented()[command]
    assert keys, command
    main([*shlex.split(RUNNABLE[command]), "--json"], environ=tmp_env)
    doc = json.loads(capsys.readouterr().out)
    assert "error" not in doc, doc
    missing = [k for k in keys if k not in doc]
    assert not missing, f"{command}: documented but not in the output: {missing}"
