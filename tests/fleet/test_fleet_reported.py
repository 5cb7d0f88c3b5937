"""A change whose result never reached the controller (a partition, a killed controller): the node's
ledger (module_utils) carries it into the next run's result until the controller passes that run's id
back; the controller's record of those ids (fleet/reported.py) is its own state file, read strictly."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.fleet import reported
from tfgpu_install.fleet.results import host_result

pytest.importorskip("ansible", reason="ansible-core is not installed (pip install '.[fleet]')")
from ansible_collections.tfgpu.install.plugins.module_utils import tfgpu  # noqa: E402

A, B, C = "a" * 32, "b" * 32, "c" * 32


class _Node:
    """What the ledger functions read of an AnsibleModule: its params and check mode."""

    def __init__(self, venv: Path, run_id: str, reported_run: str = "", check_mode: bool = False) -> None:
        self.params: dict[str, Any] = {"tool_venv": str(venv), "run_id": run_id, "reported_run": reported_run}
        self.check_mode = check_mode


def _run(venv: Path, run_id: str, reported_run: str, applied: Any, key: str = "") -> dict[str, Any]:
    node = _Node(venv, run_id, reported_run)
    unreported = tfgpu.ledger_start(node, key)
    return tfgpu.ledger_finish(node, key, applied, unreported)


def test_a_run_cut_off_before_it_could_say_is_reported_as_unknown(tmp_path: Path) -> None:
    node = _Node(tmp_path, A)
    tfgpu.ledger_start(node, "")  # the module died here (a partition took its ssh session)
    told = _run(tmp_path, B, "", [])
    assert told["unreported"] == {"runs": [A], "applied": None}


def test_lost_results_accumulate_until_one_arrives(tmp_path: Path) -> None:
    _run(tmp_path, A, "", ["env.create", "packages.install"])
    told = _run(tmp_path, B, "", ["cudnn.install"])  # A's result lost, and now B's too
    assert told["unreported"] == {"runs": [A], "applied": ["env.create", "packages.install"]}
    told = _run(tmp_path, C, "", [])
    assert told["unreported"] == {"runs": [A, B], "applied": ["env.create", "packages.install", "cudnn.install"]}
    assert "unreported" not in _run(tmp_path, "d" * 32, C, [])  # the controller got C: all told


def test_a_received_result_or_a_run_that_changed_nothing_leaves_nothing_to_tell(tmp_path: Path) -> None:
    _run(tmp_path, A, "", ["env.create"])
    assert "unreported" not in _run(tmp_path, B, A, [])
    assert "unreported" not in _run(tmp_path, C, "", [])  # B (lost) changed nothing


def test_each_env_has_its_own_entry_and_check_mode_or_no_run_id_keeps_no_ledger(tmp_path: Path) -> None:
    _run(tmp_path, A, "", ["env.create"], key="/envs/one")
    assert "unreported" not in _run(tmp_path, B, "", [], key="/envs/two")
    assert tfgpu.ledger_start(_Node(tmp_path / "x", A, check_mode=True), "") is None
    assert tfgpu.ledger_finish(_Node(tmp_path / "y", "", ""), "", [], None) == {}
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_a_garbled_ledger_is_no_ledger(tmp_path: Path) -> None:
    (tmp_path / ".tfgpu-fleet-ledger.json").write_text('{"": {"run_id": 5, "carried": "x"}}')
    assert "unreported" not in _run(tmp_path, A, "", [])
    (tmp_path / ".tfgpu-fleet-ledger.json").write_text("[not json")
    assert "unreported" not in _run(tmp_path, B, "", [])


def test_the_row_carries_the_ledger_run_and_what_was_unreported() -> None:
    r = host_result("n1", {"mode": "install", "result": {"changed": True, "applied": [], "ledger_run": B,
                                                         "unreported": {"runs": [A], "applied": None}}})
    assert (r.state, r.ledger_run, r.unreported) == ("changed", B, {"runs": [A], "applied": None})
    assert host_result("n1", {"result": {"unreported": "junk", "ledger_run": 3}}).unreported is None


def test_the_controller_keeps_the_last_received_run_per_host(tmp_path: Path) -> None:
    reported.record(tmp_path, [("n1", A), ("n2", None), ("n3", "../../etc/passwd")])
    assert reported.load(tmp_path) == {"n1": A}
    reported.record(tmp_path, [("n1", B), ("n2", C)])
    assert reported.load(tmp_path) == {"n1": B, "n2": C}
    assert os.stat(reported.path_in(tmp_path)).st_mode & 0o022 == 0


def test_a_junk_or_foreign_record_is_not_believed(tmp_path: Path) -> None:
    path = reported.path_in(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"n1": A, "n2": "not-an-id", "n3": ["x"]}))
    assert reported.load(tmp_path) == {"n1": A}
    path.write_text("{broken")
    assert reported.load(tmp_path) == {}  # the nodes then report what they hold once more
    path.chmod(0o666)
    with pytest.raises(EnvironmentProblem, match="another user could have written it"):
        reported.load(tmp_path)


def test_the_fleet_table_names_the_runs_that_changed_a_host_unseen() -> None:
    import io

    from tfgpu_install.commands.fleet import _result
    from tfgpu_install.console import render
    from tfgpu_install.fleet.run import FleetReport

    rows = [host_result("n1", {"result": {"changed": True, "applied": [], "ledger_run": C,
                                          "unreported": {"runs": [A, B], "applied": ["env.create"]}}}),
            host_result("n2", {"result": {"changed": True, "applied": [], "ledger_run": C,
                                          "unreported": {"runs": [A], "applied": None}}})]
    done = _result(FleetReport("ansible-playbook 2.19", "install", rows, 0, "/dev/null"))
    out = io.StringIO()
    render(done, as_json=False, stream=out)
    text = out.getvalue()
    assert "never reached this controller" in text
    assert "n1: run(s) aaaaaaaa, bbbbbbbb changed it (env.create)" in text
    assert "n2: run(s) aaaaaaaa changed it (what exactly is unknown: the run was cut off)" in text
    assert done.data["hosts"][0]["unreported"] == {"runs": [A, B], "applied": ["env.create"]}
