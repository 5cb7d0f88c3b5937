"""scripts/cluster-demo --slurm --json: a real Slurm (Debian's slurm-wlm and munge) in network namespaces,
three node types on their own Debian roots, driven by `tfgpu-install cluster slurm` (#42): one row per type,
verified on the CPU (said so) or pending with the scheduler's reason; a killed slurmd; a partition; a job
Slurm ran twice counted once; a second run changes nothing; `--same` over the node types (one release), run
with a network partition of one type's node while its job runs, then again: nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.promised import CI

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scripts" / "cluster_demo.py"

pytestmark = pytest.mark.fleet


@pytest.fixture(scope="module")
def demo() -> dict:
    done = subprocess.run([sys.executable, str(DEMO), "--slurm", "--check"], capture_output=True, text=True,
                          timeout=60)
    if done.returncode != 0:
        if CI:
            pytest.fail(f"CI installs slurm-wlm and munge (.ci/run), yet: {done.stdout.strip()}")
        pytest.skip(f"cannot run a Slurm cluster here: {done.stdout.strip()}")
    done = subprocess.run([sys.executable, str(DEMO), "--slurm", "--json"], capture_output=True, text=True,
                          timeout=3600, env=dict(os.environ), stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-4000:]
    doc: dict = json.loads(done.stdout)
    return doc


def _types(demo: dict) -> dict[str, dict]:
    return {t["type"]: t for t in demo["types"]}


def test_one_row_per_node_type(demo: dict) -> None:
    assert demo["scheduler"].startswith("slurm ")
    t = _types(demo)
    assert set(t) == {"a100", "t4", "v100"}
    assert (t["a100"]["partitions"], t["t4"]["partitions"], t["v100"]["partitions"]) == (["gpu"], ["inference"],
                                                                                          ["gpu"])


def test_types_verified_on_the_cpu_say_so_with_their_own_python(demo: dict) -> None:
    t = _types(demo)
    for name, tf, py in (("a100", "2.99.0", "3.11"), ("v100", "2.98.0", "3.9")):
        row = t[name]
        assert (row["first_run"], row["state"], row["verified"], row["gpu_verified"]) == (
            "verified", "verified", True, False), row
        assert (row["tensorflow"], row["python"]) == (tf, py)  # glibc 2.31 on Debian 11: TF 2.98.0
        assert "tensorflow" in row["layers_passed"]
    assert sorted(demo["modulefiles"]) == ["tfgpu/a100.lua", "tfgpu/v100.lua"]


def test_a_type_with_a_killed_slurmd_runs_on_its_other_node(demo: dict) -> None:
    a100 = _types(demo)["a100"]
    assert a100["unusable_nodes"].keys() == {demo["killed_slurmd"]}
    assert "Not responding" in a100["unusable_nodes"][demo["killed_slurmd"]] or "*" in a100["unusable_nodes"][
        demo["killed_slurmd"]]


def test_a_type_without_a_free_node_is_pending_with_the_schedulers_reason(demo: dict) -> None:
    t4 = _types(demo)["t4"]
    assert (t4["first_run"], t4["state"]) == ("pending", "pending")
    assert t4["reason"] == "Resources" and t4["verified"] is None


def test_a_job_slurm_ran_twice_counts_once(demo: dict) -> None:
    rq = demo["requeued"]
    assert rq["second_run_job"] == rq["job"]  # waited for, not submitted again
    assert rq["restarts"] == 1 and rq["answer_sets"] == 1
    a100 = _types(demo)["a100"]
    assert a100["runs"] == 2 and a100["jobs_counted"] == 1


def test_a_second_run_changes_nothing(demo: dict) -> None:
    t = _types(demo)
    assert t["a100"]["first_changed"] is True and t["v100"]["first_changed"] is True
    assert demo["second_run_changed"] == 0
    # Only v100 got a new job: a100's requeued job and t4's pending one were waited for.
    assert demo["second_run_submitted"] == 1
    assert demo["exit_codes"] == [7, 7]  # a pending type is not a verified one


def test_same_runs_one_release_on_every_node_type(demo: dict) -> None:
    """`cluster slurm --same --partition gpu`: plan jobs on a100 (Debian 12: TF 2.99.0) and v100 (Debian 11:
    2.98.0), a second plan round under the ceiling, then one release for both, each verified on its own
    Python. The whole flow, end to end on Slurm."""
    same = demo["same"]
    assert same["chosen"]["tensorflow"] == "2.98.0" and same["chosen"]["rounds"] == 2
    assert any("v100" in line for line in same["chosen"]["explain"])  # who held the others back
    for name, py in (("a100", "3.11"), ("v100", "3.9")):
        row = same["types"][name]
        assert (row["state"], row["tensorflow"], row["python"], row["verified"], row["gpu_verified"]) == (
            "verified", "2.98.0", py, True, False), row
        assert row["changed"] is True  # a new env per type (the --same key)
    assert set(same["types"]) == {"a100", "v100"} and same["exit_codes"][0] == 0


def test_a_second_same_run_changes_nothing(demo: dict) -> None:
    same = demo["same"]
    assert same["second_chosen"] == "2.98.0" and same["exit_codes"] == [0, 0]
    assert same["second_run_changed"] == 0
    assert all((t["second_run"], t["second_changed"]) == ("verified", False) for t in same["types"].values())


def test_a_partition_requeues_the_job_and_it_counts_once(demo: dict) -> None:
    """o1 (v100) cut off from slurmctld while its job runs: Slurm marks o1 down and requeues the job; the
    cut-off run finishes unseen (Slurm still has the job pending); healed, o1 returns and Slurm runs the job
    again under the same id. One answer set; the row says the job ran twice, that its first run built the
    env (changed), and counts it once."""
    cut = demo["partition"]
    assert (cut["node"], cut["type"]) == ("o1", "v100")
    assert cut["node_state"].startswith("down") and (cut["job_state"], cut["restarts"]) == ("PENDING", "1")
    assert cut["first_run"] == {"restarts": "0", "node": "o1", "job_state_then": "PENDING"}
    assert cut["node_state_after"] == "idle"
    assert cut["answer_sets"] == 1 and cut["runs_read"] == 2
    row = cut["row"]
    assert (row["state"], row["job_id"], row["runs"], row["jobs_counted"], row["changed"], row["verified"]) == (
        "verified", cut["job"], 2, 1, True, True), row
    assert [(r["run"], r["node"], r["finished"], r["changed"]) for r in row["job_runs"]] == [
        (1, "o1", True, True), (2, "o1", True, False)]
    assert row["reason"].startswith(f"requeued by Slurm: job {cut['job']} ran 2 times") and "count once" in row[
        "reason"]
    states = row["job_states"]
    ran = states.index("RUNNING on o1")
    assert any(s.startswith("PENDING") for s in states[ran + 1:]), states  # requeued after it ran
