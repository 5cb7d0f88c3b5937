"""Snapshot documents: round trip, older formats, damaged files, the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.snapshot_doc import make
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.contract import choice_of


def test_round_trip_is_exact(tmp_path: Path) -> None:
    snap = make()
    path = tmp_path / "s.yaml"
    S.write(path, snap)
    assert path.read_text().startswith("# tfgpu-install snapshot (format 2)")
    assert S.load(path) == snap


def test_format_1_still_loads() -> None:
    text = "format: 1\nenv: /envs/old\nresolution: {tensorflow: 2.15.1}\npackages: ['numpy==1.26.4', 'six==1.16.0']\n"
    snap = S.loads(text)
    assert snap.format == 1
    assert [p.requirement() for p in snap.packages] == ["numpy==1.26.4", "six==1.16.0"]
    assert snap.env.path == "/envs/old" and choice_of(snap).tensorflow == "2.15.1"
    assert "format 1" in snap.notes[0]


@pytest.mark.parametrize(
    "text, words",
    [
        ("format: 2\nid: x\n", "missing key"),
        ("format: 9\n", "format 9"),
        ("- just a list\n", "not a snapshot"),
        ("format: 2\nid: x\nenv: {}\nhost: {}\npackages: [{name: numpy}]\n", "packages[0]"),
        ("format: [\n", "not valid YAML"),
    ],
)
def test_damaged_documents_get_one_clear_error(text: str, words: str) -> None:
    with pytest.raises(BadInputError) as info:
        S.loads(text, "f.yaml")
    assert words in info.value.message
    assert info.value.code == ExitCode.BAD_INPUT and info.value.hint


def test_store_find_by_prefix_and_latest(tmp_path: Path) -> None:
    a = make(id="20261201T000000Z-known-good-aaaaaa", created="2026-12-01T00:00:00Z")
    b = make(id="20261202T000000Z-known-good-bbbbbb", created="2026-12-02T00:00:00Z")
    S.save(tmp_path, a)
    S.save(tmp_path, b)
    (S.store_dir(tmp_path) / "broken.yaml").write_text("format: [")
    assert [s.id for _, s in S.scan(tmp_path).snapshots] == [a.id, b.id]
    assert S.find(tmp_path, "20261201")[1] == a
    with pytest.raises(BadInputError, match="matches 2"):
        S.find(tmp_path, "2026120")
    with pytest.raises(BadInputError, match="no snapshot"):
        S.find(tmp_path, "nope")
    latest = S.latest_for_env(tmp_path, Path("/envs/tf"))
    assert latest is not None and latest[1].id == b.id


def test_write_is_atomic_no_temp_left(tmp_path: Path) -> None:
    S.write(tmp_path / "s.yaml", make())
    assert [p.name for p in tmp_path.iterdir()] == ["s.yaml"]


def test_find_takes_any_existing_file_whatever_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = make(id="20261203T000000Z-known-good-cccccc")
    state = tmp_path / "state"
    for name in ("snap.tfgpu", "snapshot", "s.yaml.bak"):
        S.write(tmp_path / name, snap)
        assert S.find(state, str(tmp_path / name)) == (tmp_path / name, snap)
    monkeypatch.chdir(tmp_path)
    assert S.find(state, "snap.tfgpu")[1] == snap  # a bare name in the current dir is a file first
    with pytest.raises(BadInputError, match="not a regular file"):
        S.find(state, str(tmp_path))
    with pytest.raises(BadInputError, match="no snapshot file at"):
        S.find(state, str(tmp_path / "gone.tfgpu"))
    S.save(state, snap)
    assert S.find(state, "20261203")[1] == snap  # not a file: an id prefix
