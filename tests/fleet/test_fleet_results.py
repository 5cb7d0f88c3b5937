"""Per-host rows from the role's result files and ansible-playbook's recap (recorded output)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tfgpu_install.fleet.results import collect, host_result, parse_recap
from tfgpu_install.fleet.table import LiveTable, row, summary, summary_line

# The tail of a real run of scripts/fleet-demo (ansible-core 2.19).
RECAP = """\
TASK [tfgpu.install.node : Fail this host when tfgpu-install failed] ***********
skipping: [node1]

PLAY RECAP *********************************************************************
ghost                      : ok=0    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0
node1                      : ok=5    changed=0    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0
node3                      : ok=5    changed=0    unreachable=0    failed=1    skipped=1    rescued=0    ignored=1
"""

INSTALLED = {
    "host": "node1", "mode": "install", "check_mode": False,
    "result": {"changed": True, "applied": ["env.create", "packages.install", "verify.run"],
               "tensorflow": {"tensorflow": "2.99.0", "cuda": "12.3", "cudnn": "9.1", "python": "3.11"},
               "verified": True, "seconds": 12.3,
               "host": {"machine_id": "ab" * 16, "driver": "550.54.14", "gpus": [], "glibc": "2.36"}},
}
REFUSED = {
    "host": "node2", "mode": "restore", "check_mode": False,
    "result": {"failed": True, "changed": False, "refused": True, "error": "incompatible-host", "exit_code": 12,
               "msg": "snapshot x cannot be restored on this host:\n  - glibc 2.17 (override:env) is older ...",
               "hint": "restore it on a machine that meets its contract", "restored": False,
               "reasons": ["glibc 2.17 (override:env) is older than the 2.28 TensorFlow 2.99.0's wheels need"],
               "host": {"machine_id": "cd" * 16, "driver": "535.104.05", "gpus": ["NVIDIA A100-SXM4-40GB"]}},
}


def test_recap_counts_per_host() -> None:
    recap = parse_recap(RECAP)
    assert recap["ghost"]["unreachable"] == 1
    assert recap["node1"] == {"ok": 5, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 1, "rescued": 0,
                              "ignored": 0}
    assert recap["node3"]["failed"] == 1
    assert "TASK [tfgpu.install.node" not in recap  # only lines after PLAY RECAP


def test_installed_host_row() -> None:
    r = host_result("node1", INSTALLED)
    assert ((r.state, r.ok, r.changed, r.tensorflow, r.cuda, r.verified)
            == ("changed", True, True, "2.99.0", "12.3", True))
    # The node's tool did not say whether the GPU or only the CPU was checked: the row does not claim either
    # (it read a plain "yes", which a CPU-only check also got: #38).
    assert row(r) == ("node1", "none", "550.54.14", "2.99.0", "12.3", "9.1", "changed", "yes (GPU ?)", "12.3")


def test_refused_restore_keeps_reasons_and_exit_code() -> None:
    r = host_result("node2", REFUSED)
    assert (r.state, r.ok, r.restored, r.exit_code, r.error) == ("refused", False, False, 12, "incompatible-host")
    assert r.reasons == ("glibc 2.17 (override:env) is older than the 2.28 TensorFlow 2.99.0's wheels need",)
    assert r.to_json()["reasons"] == list(r.reasons)


def test_collect_marks_hosts_without_a_file(tmp_path: Path) -> None:
    (tmp_path / "node1.json").write_text(json.dumps(INSTALLED))
    (tmp_path / "node3.json").write_text("{not json")  # a torn file reads as no result
    rows = collect(tmp_path, ["node1", "ghost", "node3"], parse_recap(RECAP))
    assert [(r.name, r.state) for r in rows] == [("node1", "changed"), ("ghost", "unreachable"), ("node3", "unknown")]
    assert rows[1].hint and "ssh" in rows[1].hint
    assert summary(rows) == {"hosts": 3, "ok": 1, "changed": 1, "failed": 1, "refused": 0, "unreachable": 1,
                             "not_finished": 0}
    assert summary_line(rows).startswith("3 host(s): 1 ok (1 changed), 1 failed, 0 refused, 1 unreachable")


def test_live_table_prints_each_host_once(tmp_path: Path) -> None:
    out = tmp_path / "live.txt"
    with out.open("w") as stream:
        live = LiveTable(stream)
        live.start("fleet install: hosts.ini")
        r = host_result("node1", INSTALLED)
        live.add(r)
        live.add(r)
    lines = out.read_text().splitlines()
    assert lines[0] == "fleet install: hosts.ini"
    assert lines[1].split() == ["host", "GPUs", "driver", "TF", "CUDA", "cuDNN", "state", "verified", "seconds"]
    assert len(lines) == 3 and lines[2].split()[:4] == ["node1", "none", "550.54.14", "2.99.0"]


def test_check_mode_rows_say_would_change_and_verify_nothing() -> None:
    planned = {"host": "node1", "mode": "install", "check_mode": True,
               "result": {"changed": True, "dry_run": True, "verified": False, "pending": ["env.create"],
                          "tensorflow": {"tensorflow": "2.98.0"}, "host": {"machine_id": "ef" * 16}}}
    r = host_result("node1", planned)
    assert (r.state, r.ok, r.changed, r.verified, r.tensorflow) == ("would change", True, True, None, "2.98.0")


# Ansible's messages (its wording in ansible-core 2.19's ssh connection and copy action) when the ssh
# login works but the home is read-only, and when the node's disk fills during the wheel's copy.
READ_ONLY_HOME = {
    "host": "node2", "mode": "install", "check_mode": False,
    "result": {"failed": True, "unreachable": True, "changed": False,
               "task": "A directory for what the controller ships",
               "msg": "Failed to create temporary directory. In some cases, you may have been able to authenticate and "
                      "did not have permissions on the target directory. Consider changing the remote tmp path in "
                      "ansible.cfg to a path rooted in \"/tmp\", for more error information use -vvv. Failed command "
                      "was: ( umask 77 && mkdir -p \"` echo ~/.ansible/tmp `\" ), exited with result 1, stderr "
                      "output: mkdir: cannot create directory '/root/.ansible': Read-only file system\n"},
}
DISK_FULL = {
    "host": "node3", "mode": "install", "check_mode": False,
    "result": {"failed": True, "changed": False, "error": "ansible-task",
               "msg": "Ship the tfgpu-install wheel: [Errno 28] No space left on device: b'/root/.cache/tfgpu-fleet/"
                      "tfgpu_install-0.1.0-py3-none-any.whl'"},
}


def test_a_read_only_home_is_not_an_ssh_problem() -> None:
    r = host_result("node2", READ_ONLY_HOME)
    assert (r.state, r.error) == ("failed", "read-only-fs")
    assert r.message and "Read-only file system" in r.message  # Ansible's own words on the row
    assert r.hint and "ansible_remote_tmp" in r.hint and "ssh" not in r.hint


def test_a_full_disk_is_named_with_ansibles_message() -> None:
    r = host_result("node3", DISK_FULL)
    assert (r.state, r.error) == ("failed", "disk-full")
    assert r.message and "No space left on device" in r.message and "Ship the tfgpu-install wheel" in r.message


def test_a_real_ssh_failure_stays_unreachable() -> None:
    doc = {"host": "ghost", "mode": "install", "result": {
        "unreachable": True, "msg": "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.9 port 22: "
        "No route to host"}}
    r = host_result("ghost", doc)
    assert (r.state, r.error) == ("unreachable", "unreachable")
    assert r.message and "No route to host" in r.message


def test_hosts_without_a_row_after_a_stopped_run_are_not_finished(tmp_path: Path) -> None:
    (tmp_path / "node1.json").write_text(json.dumps(INSTALLED))
    rows = collect(tmp_path, ["node1", "node2"], {}, stopped="the whole run reached its bound (60 s, --timeout)")
    assert [(r.name, r.state) for r in rows] == [("node1", "changed"), ("node2", "not finished")]
    assert rows[1].message and "--timeout" in rows[1].message and not rows[1].ok
    assert summary(rows)["not_finished"] == 1 and summary(rows)["failed"] == 0
    assert "1 not finished" in summary_line(rows)


def test_hosts_never_started_by_ansible_are_not_finished_not_failed(tmp_path: Path) -> None:
    """A --serial batch that failed whole ends the play: later hosts never ran (no recap line)."""
    rows = collect(tmp_path, ["node1", "node9"], {"node1": {"failed": 1, "ok": 2}})
    assert [(r.name, r.state) for r in rows] == [("node1", "unknown"), ("node9", "not finished")]


def test_an_oversized_result_file_is_no_result(tmp_path: Path) -> None:
    from tfgpu_install.fleet.results import MAX_RESULT_BYTES, read_result

    path = tmp_path / "node1.json"
    with path.open("wb") as f:
        f.truncate(MAX_RESULT_BYTES + 10)  # sparse: no memory, no disk
    assert read_result(path) is None


def _with(result: dict, **changes: object) -> dict:
    return {**INSTALLED, "result": {**INSTALLED["result"], **changes}}


@pytest.mark.parametrize("gpu, cell", [(False, "CPU only"), (True, "GPU")])
def test_a_row_says_what_the_verification_checked(gpu: bool, cell: str) -> None:
    """#38: a host verified on the CPU (--allow-cpu) read "verified yes" in the table and the JSON."""
    r = host_result("node1", _with(INSTALLED, gpu_verified=gpu, layers_passed=["python", "tensorflow"]))
    assert row(r)[7] == cell
    doc = r.to_json()
    assert (doc["verified"], doc["gpu_verified"], doc["layers_passed"]) == (True, gpu, ["python", "tensorflow"])


def test_nothing_verified_claims_no_gpu_or_layers() -> None:
    r = host_result("node1", _with(INSTALLED, verified=False, gpu_verified=True, layers_passed=["python"]))
    assert (row(r)[7], r.gpu_verified, r.layers_passed) == ("no", None, ())


# A hostile (or broken) node's result: every field of the wrong type, control characters in its strings.
HOSTILE = {"host": "node2", "mode": ["install"], "check_mode": "no", "result": {
    "changed": "yes", "seconds": "slow", "verified": "true", "gpu_verified": 1, "exit_code": "12",
    "reasons": "a string", "applied": [1, None, "env.create"], "layers_passed": {"a": 1},
    "tensorflow": {"tensorflow": 2.99, "cuda": ["12"], "cudnn": None, "python": "\x1b]0;pwned\x07 3.11"},
    "unreported": {"runs": "abc", "applied": "all"}, "ledger_run": 7,
    "host": {"machine_id": {"x": 1}, "driver": "\x1b[2J\x1b[31m550.54.14\x1b[0m", "gpus": 5}}}


@pytest.mark.parametrize("changes", [
    {"seconds": "slow"}, {"gpus": 5}, {"seconds": float("nan")}, {"seconds": -3}, {"seconds": True},
    {"host": "node"}, {"tensorflow": "2.99.0"}, {"reasons": [{"x": 1}]},
])
def test_one_wrong_field_is_unknown_and_the_row_stays(changes: dict) -> None:
    """#39: `"seconds": "slow"` or `"gpus": 5` crashed the controller's table and lost every row."""
    if "gpus" in changes:
        doc = _with(INSTALLED, host={**INSTALLED["result"]["host"], "gpus": changes["gpus"]})
    else:
        doc = _with(INSTALLED, **changes)
    r = host_result("node1", doc)
    assert r.state == "changed" and len(row(r)) == 9
    json.dumps(r.to_json())


def test_a_hostile_result_keeps_every_row_and_escapes_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "node1.json").write_text(json.dumps(INSTALLED))
    (tmp_path / "node2.json").write_text(json.dumps(HOSTILE))
    rows = collect(tmp_path, ["node1", "node2"], parse_recap(RECAP))
    assert [r.name for r in rows] == ["node1", "node2"]
    bad = rows[1]
    assert (bad.seconds, bad.gpus, bad.verified, bad.gpu_verified, bad.exit_code, bad.tensorflow) == (
        None, (), None, None, None, None)
    assert (bad.applied, bad.reasons, bad.layers_passed, bad.ledger_run, bad.machine_id) == (
        ("env.create",), (), (), None, None)
    assert bad.state == "ok" and not bad.changed  # "changed": "yes" is not True
    out = tmp_path / "live.txt"
    with out.open("w") as stream:
        live = LiveTable(stream)
        live.start("fleet install")
        for r in rows:
            live.add(r)
    text = out.read_text()
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in text  # the driver string is shown, escaped
    assert summary(rows)["hosts"] == 2


def test_a_result_that_breaks_the_parser_is_a_row_not_a_crash(tmp_path: Path) -> None:
    from tfgpu_install.fleet.results import safe_result

    class Exploding(dict):  # stands for any input the parser did not foresee
        def get(self, *a: object) -> object:
            raise RuntimeError("boom")

    r = safe_result("node9", Exploding())
    assert (r.name, r.state, r.error, r.ok) == ("node9", "unknown", "bad-result", False)
