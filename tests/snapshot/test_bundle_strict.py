"""A bundle's manifest is untrusted input: file names only of the shapes a bundle holds, digests
64 hex; anything else is BAD_INPUT (exit 5) before any file is opened by a name it gave."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.snapshot.bundle import verify


@pytest.mark.parametrize("files", [
    {"../../../etc/passwd": "a" * 64},
    {"/etc/passwd": "a" * 64},
    {"wheels/../../x.whl": "a" * 64},
    {"wheels/x.whl": "not-a-digest"},
    {"wheels/x.whl\n": "a" * 64},
    {"wheels/x.whl": 5},
    ["wheels/x.whl"],
])
def test_a_hostile_manifest_is_bad_input(tmp_path: Path, files: object) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"format": 1, "snapshot_id": "x", "files": files}))
    with pytest.raises(BadInputError) as info:
        verify(tmp_path)
    assert info.value.code == ExitCode.BAD_INPUT and "manifest.json" in info.value.message
