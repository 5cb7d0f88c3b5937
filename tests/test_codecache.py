"""codecache: dataclass methods compiled once and kept; the classes behave exactly as without it,
and a damaged, foreign or unwritable cache never fails a command."""

from __future__ import annotations

import dataclasses
import json
import marshal
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Iterator

import pytest

from tfgpu_install import codecache

REPO = Path(__file__).resolve().parents[1]

SOURCE = '''
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Optional

@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = ()

@dataclass(order=True)
class Item:
    name: str
    qty: int = 1
    extra: dict = field(default_factory=dict)
    note: Optional[str] = field(default=None, repr=False, compare=False)

@dataclass(frozen=True)
class Opts:
    a: int
    b: str = "b"
'''
if sys.version_info >= (3, 10):  # keyword-only fields: dataclasses writes a different __init__
    SOURCE = SOURCE.replace("@dataclass(frozen=True)\nclass Opts", "@dataclass(frozen=True, kw_only=True)\nclass Opts")


def _module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name)
    sys.modules[name] = mod
    exec(compile(SOURCE, name, "exec"), mod.__dict__)
    return mod


@pytest.fixture
def cached(tmp_path: Path) -> Iterator[Path]:
    assert codecache.enable(tmp_path)
    try:
        yield tmp_path
    finally:
        codecache.disable()


def _behaviour(mod: types.ModuleType) -> dict[str, Any]:
    p, q = mod.Point(1, 2, ("a",)), mod.Point(1, 2, ("a",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3
    i, j = mod.Item("a", 2, note="x"), mod.Item("b")
    i.qty = 5
    if sys.version_info >= (3, 10):
        with pytest.raises(TypeError):
            mod.Opts(1)  # keyword-only
    return {"eq": p == q, "hash": hash(p) == hash(q), "repr": [repr(p), repr(i), repr(mod.Opts(a=1))],
            "order": i < j, "factory": j.extra == {} and j.extra is not mod.Item("c").extra,
            "compare": mod.Item("a", 5, note="y") == i, "defaults": (p.tags, j.qty, j.note),
            "replace": repr(dataclasses.replace(p, y=9)), "fields": [f.name for f in dataclasses.fields(mod.Item)]}


def test_classes_behave_the_same_with_the_cache(cached: Path) -> None:
    with_cache = _behaviour(_module("cc_first"))
    assert codecache._state["dirty"]
    codecache.save()
    assert codecache.cache_file(cached).is_file()
    again = _behaviour(_module("cc_second"))  # every method now from the kept code
    codecache.disable()
    without = _behaviour(_module("cc_plain"))
    assert with_cache == again
    assert {k: v for k, v in with_cache.items() if k not in ("repr", "replace")} == \
        {k: v for k, v in without.items() if k not in ("repr", "replace")}
    assert [r.replace("cc_first", "m") for r in with_cache["repr"]] == \
        [r.replace("cc_plain", "m") for r in without["repr"]]


def test_a_new_process_reads_the_kept_code_back(tmp_path: Path) -> None:
    codecache.enable(tmp_path)
    try:
        _module("cc_kept")
        codecache.save()
    finally:
        codecache.disable()
    kept = codecache.load(codecache.cache_file(tmp_path))
    assert kept and all(isinstance(c, types.CodeType) for c in kept.values())
    codecache.enable(tmp_path)
    try:
        _module("cc_kept_again")
        assert not codecache._state["dirty"]  # nothing compiled: all found
    finally:
        codecache.disable()


@pytest.mark.parametrize("junk", [b"", b"\x00garbage\xff" * 50, marshal.dumps([1, 2]),
                                  marshal.dumps({"text": 3, 4: "x"}), marshal.dumps({"a": 1})[:-1]])
def test_a_damaged_cache_file_is_ignored_and_rewritten(tmp_path: Path, junk: bytes) -> None:
    path = codecache.cache_file(tmp_path)
    path.write_bytes(junk)
    assert codecache.load(path) == {}
    codecache.enable(tmp_path)
    try:
        assert _behaviour(_module(f"cc_junk_{len(junk)}"))["eq"]
        codecache.save()
    finally:
        codecache.disable()
    assert codecache.load(path)


def test_an_oversized_file_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = codecache.cache_file(tmp_path)
    path.write_bytes(marshal.dumps({"def f(): pass": compile("def f(): pass", "<string>", "exec")}))
    assert codecache.load(path)
    monkeypatch.setattr(codecache, "MAX_BYTES", 10)
    assert codecache.load(path) == {}


def _plan(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tfgpu_install", "plan", "--json", "--profile", "stable", "--allow-cpu",
            "--assume-driver", "570.86.10", "--assume-gpu", "8.9", "--assume-glibc", "2.35", "--assume-python", "3.11"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, cwd=REPO, timeout=120)


def test_the_real_entry_keeps_its_code_and_survives_a_bad_cache_dir(tmp_env: dict[str, str]) -> None:
    env = {**tmp_env, "PYTHONPATH": str(REPO)}
    first = _plan(env)
    assert first.returncode == 0, first.stderr
    files = list(Path(env["TFGPU_CACHE_DIR"]).glob("dataclass-code-*.marshal"))
    assert len(files) == 1
    before = files[0].stat().st_mtime_ns
    second = _plan(env)
    assert second.returncode == 0 and json.loads(second.stdout) == json.loads(first.stdout)
    assert files[0].stat().st_mtime_ns == before  # nothing new compiled: not rewritten
    files[0].write_bytes(b"not marshal")
    assert _plan(env).returncode == 0
    assert codecache.load(files[0])  # rewritten whole
    # a cache dir that cannot be written (a file in its place): the command is unaffected
    blocked = Path(env["TFGPU_CACHE_DIR"]).parent / "blocked"
    blocked.write_text("a file, not a dir")
    bad = {**env, "TFGPU_CACHE_DIR": str(blocked)}
    run = _plan(bad)
    assert run.returncode == 0 and json.loads(run.stdout)["choice"] == json.loads(first.stdout)["choice"]
    assert not os.path.isdir(blocked)


def test_an_unknown_call_shape_goes_to_the_builtin_untouched(cached: Path) -> None:
    ns: dict[str, Any] = {}
    codecache._cached_exec("x = 1", ns, ns)
    assert ns["x"] == 1 and "x = 1" in codecache._codes
    with pytest.raises(TypeError):  # what the builtin says to a keyword it does not take
        codecache._cached_exec("y = 2", ns, ns, no_such_keyword=True)
    assert "y = 2" not in codecache._codes


def test_a_file_another_user_could_have_written_is_not_run(tmp_path: Path) -> None:
    path = codecache.cache_file(tmp_path)
    path.write_bytes(marshal.dumps({"x = 1": compile("x = 1", "<string>", "exec")}))
    assert codecache.load(path)
    path.chmod(0o666)  # anyone may change it
    assert codecache.load(path) == {}
    path.chmod(0o644)
    if os.getuid() == 0:  # another owner (root can hand the file to nobody)
        os.chown(path, 65534, 65534)
        assert codecache.load(path) == {}
