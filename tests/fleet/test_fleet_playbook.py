"""The pure parts of driving ansible-playbook: hosts from `ansible-inventory --list`, the argv, the
environment, and the module helpers that map tfgpu-install's JSON to Ansible's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.tfgpu.install.plugins.module_utils.tfgpu import steps_applied
from tfgpu_install.errors import EnvironmentProblem
from tfgpu_install.fleet.inventory import hosts_in
from tfgpu_install.fleet.playbook import (
    PlaybookRun,
    collections_root,
    default_forks,
    playbook_argv,
    playbook_env,
    run_timeout,
    site_playbook,
)

REPO = Path(__file__).resolve().parents[2]

# `ansible-inventory -i hosts.ini --list` of the demo's inventory (groups nest through children).
INVENTORY = {
    "_meta": {"hostvars": {}},
    "all": {"children": ["ungrouped", "gpu", "old"]},
    "gpu": {"hosts": ["node1", "node2", "node3", "ghost"]},
    "old": {"hosts": ["node2"], "children": ["gpu"]},
    "ungrouped": {},
}


def test_hosts_in_inventory_order_once_each() -> None:
    assert hosts_in(INVENTORY) == ["node1", "node2", "node3", "ghost"]
    assert hosts_in({"all": {"children": ["ungrouped"]}, "ungrouped": {}}) == []


def test_playbook_argv_carries_mode_results_and_ansible_flags(tmp_path: Path) -> None:
    run = PlaybookRun(tmp_path / "hosts", "install", tmp_path / "results", {"tfgpu_profile": "stable"},
                      limit="node1:node2", forks=8, serial=2, check=True)
    argv = playbook_argv("ansible-playbook", Path("site.yml"), run)
    assert argv[:4] == ["ansible-playbook", "-i", str(tmp_path / "hosts"), "site.yml"]
    extra = json.loads(argv[argv.index("-e") + 1])
    assert extra == {"tfgpu_profile": "stable", "tfgpu_mode": "install", "tfgpu_results_dir": str(tmp_path / "results"),
                     "tfgpu_serial": 2}
    assert argv[argv.index("--limit") + 1] == "node1:node2" and argv[argv.index("--forks") + 1] == "8"
    assert argv[-1] == "--check"


def test_playbook_env_finds_the_collection_and_bounds_ssh() -> None:
    root = collections_root({})
    assert site_playbook(root).is_file()
    env = playbook_env(root, {})
    assert env["ANSIBLE_COLLECTIONS_PATH"] == str(REPO) and env["ANSIBLE_TIMEOUT"] == "20"
    assert playbook_env(root, {"ANSIBLE_TIMEOUT": "5"})["ANSIBLE_TIMEOUT"] == "5"


def test_a_missing_collection_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentProblem) as err:
        collections_root({"TFGPU_ANSIBLE_COLLECTIONS": str(tmp_path)})
    assert str(tmp_path) in err.value.message and "TFGPU_ANSIBLE_COLLECTIONS" in (err.value.hint or "")


def test_changed_only_when_a_step_applied() -> None:
    doc = {"steps": [{"id": "env.create", "status": "unchanged"}, {"id": "packages.install", "status": "applied"},
                     {"id": "verify.run", "status": "done"}]}
    assert steps_applied(doc) == ["packages.install"]
    assert steps_applied({"steps": [{"id": "verify.run", "status": "done"}]}) == []
    assert steps_applied({"error": "usage"}) == []


def test_an_interrupted_run_stops_the_playbook_process_group(tmp_path: Path) -> None:
    """The runner starts programs in their own session (Ctrl-C at the terminal does not reach them):
    stop_playbook, called on KeyboardInterrupt, ends the one run_playbook started, SIGINT then SIGKILL."""
    import os
    import threading

    from tfgpu_install.fleet.playbook import stop_playbook
    from tfgpu_install.runner import SubprocessRunner

    pidfile = tmp_path / "results.pid"
    # What run_playbook runs, with a play that only sleeps (and ignores SIGINT, as a stuck one might).
    argv = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(pidfile), "sh", "-c", "trap '' INT; exec sleep 300"]
    worker = threading.Thread(target=lambda: SubprocessRunner().run(argv), daemon=True)
    worker.start()
    while not (pidfile.exists() and pidfile.read_text().strip()):
        worker.join(0.05)
    pid = int(pidfile.read_text())
    stop_playbook(pidfile, worker, grace_s=1.0)
    assert not worker.is_alive()  # the runner's call returned: the process was reaped
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
    stop_playbook(tmp_path / "missing.pid", worker)  # nothing started: nothing to stop


def test_results_as_hosts_finish_free_strategy_pipelining_unless_the_user_chose() -> None:
    root = collections_root({})
    env = playbook_env(root, {})
    assert env["ANSIBLE_STRATEGY"] == "free" and env["ANSIBLE_PIPELINING"] == "True"
    assert env["ANSIBLE_CALLBACKS_ENABLED"] == "tfgpu.install.tfgpu_results"
    theirs = playbook_env(root, {"ANSIBLE_STRATEGY": "linear", "ANSIBLE_CALLBACKS_ENABLED": "profile_tasks"})
    assert theirs["ANSIBLE_STRATEGY"] == "linear"
    assert theirs["ANSIBLE_CALLBACKS_ENABLED"] == "profile_tasks,tfgpu.install.tfgpu_results"


def test_forks_follow_the_inventory_and_the_run_bound_its_waves() -> None:
    assert (default_forks(1), default_forks(40), default_forks(1000)) == (1, 40, 64)
    one_wave = run_timeout(3600, 40, 40)
    assert run_timeout(3600, 1000, 64) == 16 * (3600 + 300) + 120  # ceil(1000 / 64) waves
    assert run_timeout(3600, 40, 40, serial=10) == 4 * (3600 + 300) + 120 > one_wave


def test_max_fail_percentage_reaches_the_play(tmp_path: Path) -> None:
    run = PlaybookRun(tmp_path / "hosts", "install", tmp_path / "results", {}, serial=10, max_fail_percentage=20)
    extra = json.loads(playbook_argv("ansible-playbook", Path("site.yml"), run)[5])
    assert (extra["tfgpu_serial"], extra["tfgpu_max_fail_percentage"]) == (10, 20)


def test_ctrl_c_keeps_the_rows_already_written_and_stops_the_run(tmp_path: Path) -> None:
    """A stand-in ansible-playbook writes node1's row, then hangs; Ctrl-C arrives as node1 reports:
    the run is stopped, node1's row is kept, node2 reads "not finished"."""
    import os

    from tfgpu_install.fleet.playbook import INTERRUPTED, run_playbook
    from tfgpu_install.fleet.results import HostResult, collect
    from tfgpu_install.runner import SubprocessRunner

    results = tmp_path / "results"
    tool = tmp_path / "ansible-playbook"
    tool.write_text('#!/bin/sh\necho $$ > "$PIDS/tool.pid"\n'
                    'echo \'{"host": "node1", "mode": "install", "result": {"changed": true}}\''
                    ' > "$RESULTS/node1.json"\n'
                    "exec sleep 300\n")
    tool.chmod(0o755)
    seen: list[str] = []

    def on_result(r: HostResult) -> None:
        seen.append(r.name)
        raise KeyboardInterrupt  # the user's Ctrl-C, right after the first row

    run = PlaybookRun(tmp_path / "hosts", "install", results)
    done = run_playbook(SubprocessRunner(), str(tool), Path("site.yml"), run,
                        {**os.environ, "RESULTS": str(results), "PIDS": str(tmp_path)}, ["node1", "node2"], on_result)
    assert done.returncode == INTERRUPTED and seen == ["node1"]
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "tool.pid").read_text()), 0)
    rows = collect(results, ["node1", "node2"], {}, "interrupted")
    assert [(r.name, r.state) for r in rows] == [("node1", "changed"), ("node2", "not finished")]
