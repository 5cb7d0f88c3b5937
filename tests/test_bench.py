"""scripts/bench.py: the harness logic (statistics, targets, table, JSON, disk accounting) and
one real `--quick --only plan` run. No timing is asserted: the benchmark reports, never judges."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.promised import absent

REPO = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench", REPO / "scripts" / "bench.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench"] = mod  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


bench = _load()


def _results() -> dict[str, Any]:
    s = bench.summarize
    return {
        "mode": "quick", "reps": 3, "when": "now", "failures": [],
        "measures": {
            "cold": {"ours": s([2.0, 2.2, 2.4]), "uv": s([2.0, 2.0, 2.1]), "pip": s([10.0, 11.0, 12.0])},
            "warm": {"ours": s([1.5]), "uv": s([0.5]), "pip": s([9.0]), "ours.verify": s([1.0])},
            "noop": {"ours": s([0.3]), "uv": s([0.01]), "pip": s([1.0])},
            "restore": {"ours": s([3.0]), "cold": s([2.0])},
            "plan": {"ours": s([0.4]), "bare": s([0.02])},
            "disk": {"ours.first": s([100 * 2**20]), "ours.second": s([512 * 2**10]),
                     "uv.first": s([100 * 2**20]), "uv.second": s([512 * 2**10]),
                     "pip.first": s([120 * 2**20]), "pip.second": s([120 * 2**20])},
        },
    }


def test_summarize_ratio_and_rotations() -> None:
    st = bench.summarize([3.0, 1.0, 2.0, 10.0])
    assert (st["n"], st["median"], st["min"], st["max"]) == (4, 2.5, 1.0, 10.0)
    assert bench.summarize([])["median"] is None
    assert bench.ratio(1.0, 4.0) == 0.25 and bench.ratio(None, 1.0) is None and bench.ratio(1.0, 0.0) is None
    orders = [bench.rotations(["a", "b", "c"], i) for i in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    # interleaved: every contender takes every position once in len(contenders) reps
    assert all(sorted(o[k] for o in orders) == ["a", "b", "c"] for k in range(3))


def test_targets_are_evaluated_within_the_run() -> None:
    by = {t["target"]: t for t in bench.evaluate(_results())}
    assert by["cold provision"]["value"] == pytest.approx(2.2 / 2.0) and by["cold provision"]["met"] is True
    # warm: the verification's own cost comes off before comparing with uv
    assert by["warm provision minus verification"]["value"] == pytest.approx((1.5 - 1.0) / 0.5)
    # the no-op and the plan against Python's own start (`python -c pass`)
    assert by["no-op re-run"]["value"] == pytest.approx(0.3 / 0.02) and by["no-op re-run"]["met"] is False
    assert by["probe + plan"]["value"] == pytest.approx(20.0) and by["probe + plan"]["met"] is False
    assert by["probe + plan (real probe)"]["met"] is None  # not measured in these results
    # python's start timed next to the no-op, when there, is the no-op's reference
    res = _results()
    res["measures"]["noop"]["bare"] = bench.summarize([0.1])
    assert {t["target"]: t for t in bench.evaluate(res)}["no-op re-run"]["value"] == pytest.approx(3.0)
    assert by["second env on disk"]["value"] == pytest.approx(0.5 / 100) and by["second env on disk"]["met"] is True
    assert by["restore from snapshot"]["met"] is None  # reported, no target
    # the install's own verify.run (from its journal), when measured, is what comes off
    res["measures"]["warm"]["ours.verify_step"] = bench.summarize([1.2])
    by2 = {t["target"]: t for t in bench.evaluate(res)}
    assert by2["warm provision minus verification"]["value"] == pytest.approx((1.5 - 1.2) / 0.5)
    assert "verification inside the install" in bench.render_markdown(res)
    empty = bench.evaluate({"measures": {}})
    assert all(t["value"] is None and t["met"] is None for t in empty)


def test_markdown_table_and_json_are_written_atomically(tmp_path: Path) -> None:
    res = _results()
    md = bench.render_markdown(res)
    assert "| cold provision (empty caches) | 2.20 s (2.00 s–2.40 s) | 2.00 s (2.00 s–2.10 s) |" in md
    assert "| 1.10× | 0.20× |" in md
    assert "| probe + plan | ours / python -c pass | 20.00× | ≤ 5.00× | **no** |" in md
    assert "512.0 KiB" in md and "100.0 MiB" in md
    assert "| second env on disk | second / first | 0.500% | < 1% | yes |" in md
    doc = bench.with_targets(res)
    assert [t["met"] for t in doc["targets"]] == [t["met"] for t in bench.evaluate(res)]
    assert {t["target"]: t["met"] for t in doc["targets"]}["cold provision"] is True
    js, mdp = bench.write_results(tmp_path / "out", res, stem="r")
    assert json.loads(js.read_text()) == json.loads(json.dumps(res))
    assert mdp.read_text() == md
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["r.json", "r.md"]  # no temp files left


def test_disk_usage_counts_a_hardlinked_file_once(tmp_path: Path) -> None:
    cache, first, second = (tmp_path / n for n in ("cache", "first", "second"))
    for d in (cache, first, second):
        d.mkdir()
    blob = cache / "blob"
    blob.write_bytes(os.urandom(256 * 1024))
    os.link(blob, first / "lib.so")
    os.link(blob, second / "lib.so")
    (second / "own").write_bytes(os.urandom(64 * 1024))
    whole = bench.disk_usage([first])
    assert whole >= 256 * 1024
    assert bench.disk_usage([first, second]) == whole + bench.disk_usage([second], exclude=[first])
    extra = bench.disk_usage([second], exclude=[first, cache])
    assert 64 * 1024 <= extra < 256 * 1024  # only its own file; the linked one belongs to the cache


@pytest.mark.skipif(absent("gcc"), reason="the wheelhouse's libraries need gcc")
def test_quick_plan_only_runs_for_real(tmp_path: Path) -> None:
    """The real harness against the real CLI: the tests' wheelhouse and knowledge, probe + plan only,
    with pytest made unimportable (the bench runs from the tool's install, not the test extras)."""
    no_pytest = ("import runpy, sys; sys.modules['pytest'] = sys.modules['_pytest'] = None; "
                 "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    out = subprocess.run(
        [sys.executable, "-c", no_pytest, str(REPO / "scripts" / "bench.py"), "--quick", "--reps", "1",
         "--only", "plan", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(next((tmp_path / "out").glob("bench-quick-*.json")).read_text())
    assert doc["failures"] == [] and doc["requirements"][0] == "tensorflow==2.99.0"
    plan = doc["measures"]["plan"]
    assert plan["ours"]["n"] == plan["bare"]["n"] == plan["ours.probed"]["n"] >= 3
    assert "| probe + plan (--assume) vs `python -c pass` |" in out.stdout
    targets = {t["target"]: t for t in doc["targets"]}  # the markdown's targets table, in the JSON
    assert targets["probe + plan"]["met"] in (True, False) and targets["probe + plan"]["limit"] == 5.0
    assert targets["cold provision"]["met"] is None  # not measured in this run


def test_unknown_scenario_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench.main(["--only", "cold,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_journal_seconds_reads_the_newest_run_on_that_env(tmp_path: Path) -> None:
    import json

    j = tmp_path / "state" / "envs" / "e-1" / "journal.jsonl"
    j.parent.mkdir(parents=True)
    lines = [{"event": "run", "env": "/other"}, {"event": "done", "step": "verify.run", "seconds": 9.0},
             {"event": "run", "env": "/env"}, {"event": "done", "step": "verify.run", "seconds": 0.5},
             {"event": "run", "env": "/env"}, {"event": "done", "step": "verify.run", "seconds": 0.25}]
    j.write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn")
    assert bench.journal_seconds(tmp_path / "state", Path("/env"), "verify.run") == 0.25
    assert bench.journal_seconds(tmp_path / "state", Path("/env"), "snapshot.record") is None
    assert bench.journal_seconds(tmp_path / "state", Path("/nowhere"), "verify.run") is None
