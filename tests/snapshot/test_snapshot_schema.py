"""Malformed and hostile snapshots: one BAD_INPUT (exit 5) naming file:line and what was
expected, never another exception; the store skips a damaged file with a warning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.snapshot_doc import make
from tfgpu_install.cli import main
from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.snapshot import model as S
from tfgpu_install.snapshot.contract import choice_of

VALID = S.dumps(make(id="20261201T000000Z-known-good-aaaaaa"))


def _line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def _edit(old: str, new: str) -> tuple[str, int]:
    """The valid document with one edit, and the line the edit is on."""
    assert old in VALID, old
    text = VALID.replace(old, new, 1)
    return text, _line_of(text, new.strip().split("\n")[0])


def _refused(text: str, *words: str) -> BadInputError:
    with pytest.raises(BadInputError) as info:
        S.loads(text, "f.yaml")
    err = info.value
    assert err.code == ExitCode.BAD_INPUT and err.hint, err.message
    for word in words:
        assert word in err.message, err.message
    return err


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ("packages:\n", "packages: {numpy: 1}\nxpackages:\n", "packages: expected a list, found a mapping"),
        ("host:\n", "host: [1, 2]\nxhost:\n", "host: expected a mapping, found a list"),
        ("env:\n", "env: /envs/tf\nxenv:\n", "env: expected a mapping, found a string"),
        ("  hashes:\n  - sha256:" + "a" * 64, "  hashes: 5", "packages[0].hashes: expected a list of strings, found a "
                                                             "number"),
        ("  sha256: " + "b" * 64, "  sha256: [1]", "files[0].sha256: expected a string, found a list"),
        ("  size: 10", "  size: ten", "files[0].size: expected a whole number >= 0, found a string"),
        ("  driver: 535.104.05", "  driver: 535.104", "host.driver: expected a string"),
        ("verification:\n", "verification: yes\nxverification:\n",
         "verification: expected a mapping, found true/false"),
        ("  python: 3.11.7", "  python: {a: 1}", "env.python: expected a string or null, found a mapping"),
        ("  tensorflow: 2.17.1", "  tensorflow: [2, 17]", "resolution.tensorflow: expected a string"),
        ("- name: numpy", "- name: \"num\\0py\"", "packages[0].name: contains a NUL byte"),
    ],
)
def test_wrong_types_name_the_line_and_what_was_expected(old: str, new: str, expected: str) -> None:
    text, line = _edit(old, new)
    err = _refused(text, expected)
    assert err.message.startswith(f"f.yaml:{line}: "), err.message


def test_nul_byte_in_a_path_is_refused_with_its_line() -> None:
    text, line = _edit("- path: lib/", '- path: "lib/\\0/../../etc/x"\n  xpath: lib/')
    _refused(text, f"f.yaml:{line}: files[0].path: contains a NUL byte")


@pytest.mark.parametrize("path", ["/etc/passwd", "lib/../../../etc/passwd", ""])
def test_library_paths_outside_the_env_are_refused(path: str) -> None:
    text, line = _edit("- path: lib/", f"- path: '{path}'\n  xpath: lib/")
    _refused(text, f"f.yaml:{line}: files[0].path: expected a path inside the env")


def test_an_id_that_is_not_a_file_name_is_refused() -> None:
    """The id names the file in the store: '../' would write outside it."""
    text, line = _edit("id: 20261201T000000Z-known-good-aaaaaa", "id: ../../home/u/.bashrc")
    _refused(text, f"f.yaml:{line}: id: expected something like")


@pytest.mark.parametrize("levels, words", [(40, "nested more than"), (5000, "nesting depth")])
def test_deep_nesting_is_refused_at_its_line(levels: int, words: str) -> None:
    deep = "[" * levels + "]" * levels  # 5000: libyaml's own limit answers first
    text, line = _edit("verification:\n", f"xverification: {deep}\nverification:\n")
    _refused(text, f"f.yaml:{line}: ", words)


def test_huge_strings_are_refused() -> None:
    text, line = _edit("notes: []", "notes: ['" + "x" * (S.reader.MAX_SCALAR + 1) + "']")
    _refused(text, f"f.yaml:{line}: a value of")


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    # 15 KB that PyYAML's own loader would expand to 10**9 list items (billion laughs).
    lines = ["lol0: &lol0 [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"lol{i}: &lol{i} [" + ", ".join([f"*lol{i - 1}"] * 10) + "]" for i in range(1, 9)]
    bomb = VALID + "\n".join(lines) * 30
    assert 14_000 < len(bomb.encode()) < 40_000
    _refused(bomb, f"f.yaml:{_line_of(bomb, 'lol0: &lol0')}: YAML anchor &lol0: anchors are not allowed")
    text, line = _edit("notes: []", "notes: *x")
    _refused(text, f"f.yaml:{line}: YAML alias *x")


def test_tags_that_would_build_objects_are_refused() -> None:
    text, line = _edit("tool: ''", "tool: !!python/object/apply:os.system ['true']")
    _refused(text, f"f.yaml:{line}: YAML tag tag:yaml.org,2002:python/object/apply:os.system")


def test_duplicate_keys_are_refused() -> None:
    text, line = _edit("kind: known-good", "kind: known-good\nkind: export")
    _refused(text, f"f.yaml:{line + 1}: kind: duplicate key")


def test_non_utf8_bytes_name_their_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    raw = VALID.encode()
    cut = raw.index(b"kind:")
    path.write_bytes(raw[:cut] + b"\xff\xfe" + raw[cut:])
    with pytest.raises(BadInputError) as info:
        S.load(path)
    assert info.value.message.startswith(f"{path}:{_line_of(VALID, 'kind:')}: not UTF-8 text")
    assert info.value.code == ExitCode.BAD_INPUT


def test_a_truncated_file_is_bad_input_at_every_cut() -> None:
    for cut in range(0, len(VALID), 7):
        try:
            S.loads(VALID[:cut], "f.yaml")
        except BadInputError as err:
            assert err.message.startswith("f.yaml:"), err.message
    err = _refused(VALID[: VALID.index("packages:")], "missing key 'packages'")
    assert err.message.startswith("f.yaml:")


# --- property: any mutation loads or is BAD_INPUT; what loads is usable ----------------------

_leaves = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=False), st.text(max_size=30))
_values = st.recursive(_leaves, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                       max_leaves=12)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(data, dict):
        for k, v in data.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            out += _paths(v, prefix + (i,))
    return out


def _replace(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    data[path[0]] = _replace(data[path[0]], path[1:], value)
    return data


def _usable(snap: S.Snapshot) -> None:
    """What the commands do with a loaded snapshot must not raise either."""
    assert S.loads(S.dumps(snap)) == snap
    choice_of(snap)
    snap.package_map()
    json.dumps(snap.to_dict(), default=str)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_document_loads_or_is_bad_input(data: st.DataObject) -> None:
    doc = yaml.safe_load(VALID)
    path = data.draw(st.sampled_from(_paths(doc)))
    doc = _replace(doc, path, data.draw(_values))
    try:
        snap = S.loads(yaml.safe_dump(doc), "f.yaml")
    except BadInputError as err:
        assert err.code == ExitCode.BAD_INPUT and err.message.startswith("f.yaml")
        return
    _usable(snap)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_mangled_text_loads_or_is_bad_input(data: st.DataObject) -> None:
    raw = bytearray(VALID.encode())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw)))
        raw[at:at + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=4))
    try:
        snap = S.loads(S.reader.decode(bytes(raw), "f.yaml"), "f.yaml")
    except BadInputError as err:
        assert err.message.startswith("f.yaml")
        return
    _usable(snap)


def test_from_dict_checks_plain_data_the_same_way() -> None:
    doc = make().to_dict()
    doc["packages"] = 7
    with pytest.raises(BadInputError, match="packages: expected a list"):
        S.from_dict(doc)
    snap = make()
    assert S.from_dict(snap.to_dict()) == snap == S.from_dict(yaml.safe_load(S.dumps(snap)))


# --- the store, through the CLI -----------------------------------------------------------


def _cli(args: list[str], environ: dict[str, str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main([*args, "--json"], environ=environ)
    return code, json.loads(capsys.readouterr().out)


def test_a_damaged_file_in_the_store_is_skipped_with_a_warning(
    tmp_env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = Path(tmp_env["TFGPU_STATE_DIR"])
    env = tmp_path / "env"
    env.mkdir()
    good = make(id="20261201T000000Z-known-good-aaaaaa", env={"path": str(env), "backend": "venv"},
                host=S.HostContract(), packages=(), files=(), activation={})
    S.save(state, good)
    store = S.store_dir(state)
    # Each of these crashed `snapshot list` / `check` for every env (TypeError: exit 1) or ate memory.
    (store / "types.yaml").write_text(VALID.replace("packages:\n", "packages: 5\nx:\n", 1))
    (store / "bomb.yaml").write_text('format: 2\na: &a ["x","x"]\nb: [*a,*a]\n')
    (store / "bytes.yaml").write_bytes(b"format: 2\nid: \xff\n")

    code, doc = _cli(["snapshot", "list"], tmp_env, capsys)
    assert code == 0, doc
    assert [s["id"] for s in doc["snapshots"]] == [good.id]
    assert len(doc["skipped"]) == 3 and all(str(store) in why for why in doc["skipped"]), doc["skipped"]
    assert any(f"{store / 'types.yaml'}:" in why and "packages: expected a list" in why for why in doc["skipped"])

    code, doc = _cli(["check", "--env", str(env)], tmp_env, capsys)
    assert code == 0 and doc["clean"] is True and len(doc["skipped"]) == 3, doc

    assert main(["snapshot", "list"], environ=tmp_env) == 0
    out = capsys.readouterr().out.replace("\n", "")  # rich wraps long lines
    assert "skipped a damaged snapshot" in out and "types.yaml:25: packages: expected a list" in out, out

    # Named directly, a damaged file is the error itself: exit 5 with file:line, for every command.
    bad = str(store / "types.yaml")
    for args in (["snapshot", "show", bad], ["snapshot", "diff", bad, good.id],
                 ["snapshot", "restore", bad, "--env", str(tmp_path / "new"), "--dry-run"],
                 ["snapshot", "bundle", bad, "-o", str(tmp_path / "bundle")]):
        code, doc = _cli(args, tmp_env, capsys)
        assert code == ExitCode.BAD_INPUT and doc["message"].startswith(f"{bad}:25: packages: "), (args, doc)
    assert not (tmp_path / "new").exists() and not (tmp_path / "bundle").exists()
