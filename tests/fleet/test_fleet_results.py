"""Per-host rows from the role's result files and ansible-playbook's recap (recorded output)."""

from __future__ import annotations

import json
from pathlib import Path

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
    assert row(r) == ("node1", "none", "550.54.14", "2.99.0", "12.3", "9.1", "changed", "yes", "12.3")


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
    assert summary(rows) == {"hosts": 3, "ok": 1, "changed": 1, "failed": 1, "refused": 0, "unreachable": 1}
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
