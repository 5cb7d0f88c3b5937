"""The cluster flow's decisions, from what Slurm said on the demo cluster (scripts/cluster-demo, Slurm 22.05)
around a network partition of o1: how long to wait for a job, what was seen of it, and what the runs of a
job Slurm ran twice say together."""

from __future__ import annotations

from tfgpu_install.cluster import jobs, slurm
from tfgpu_install.cluster.flow import RunEntry, TypeRow, keep_waiting, runs_summary, seen

# squeue -h -j 9 -o '%i|%T|%N|%r' while o1 was cut off from slurmctld and healed again (recorded).
RUNNING = slurm.parse_squeue("9|RUNNING|o1|None\n")
REQUEUED = slurm.parse_squeue("9|PENDING||BeginTime\n")
NEVER_STARTED = slurm.parse_squeue("4|PENDING||Resources\n")


def test_a_requeued_job_that_had_started_is_waited_for_past_the_deadline() -> None:
    """Slurm requeued job 9 after o1 was lost: it is pending again, but it ran; its answers are coming.
    Fails on the wait that stopped at --wait for every pending job (the row read 'pending')."""
    assert keep_waiting(REQUEUED, {"9"}, now=100.0, deadline=60.0, cap=4000.0)


def test_a_job_that_never_started_is_pending_at_the_deadline() -> None:
    """The control: a job the scheduler never started is given up at --wait (the row says 'pending')."""
    assert not keep_waiting(NEVER_STARTED, {"9"}, now=100.0, deadline=60.0, cap=4000.0)
    assert keep_waiting(NEVER_STARTED, set(), now=10.0, deadline=60.0, cap=4000.0)  # before the deadline: wait


def test_the_cap_ends_every_wait_and_an_empty_queue_ends_it_at_once() -> None:
    assert keep_waiting(RUNNING, set(), now=100.0, deadline=60.0, cap=4000.0)  # running: waited for
    assert not keep_waiting(RUNNING, {"9"}, now=4000.0, deadline=60.0, cap=4000.0)
    assert not keep_waiting({}, set(), now=0.0, deadline=60.0, cap=4000.0)


def test_what_was_seen_of_a_job_in_order_once_each_bounded() -> None:
    states: list[str] = []
    for q in (RUNNING, RUNNING, REQUEUED, REQUEUED, RUNNING):
        seen(states, q["9"])
    assert states == ["RUNNING on o1", "PENDING (BeginTime)", "RUNNING on o1"]
    for i in range(100):  # a job requeued in a loop
        seen(states, slurm.JobState("PENDING", f"r{i}"))
    assert len(states) == 24


def _run(restarts: int | None, finished: bool = True, changed: bool | None = None, node: str = "o1") -> jobs.JobResult:
    install = {} if changed is None else {"changed": changed}
    return jobs.JobResult("9", finished, host="vm", restarts=restarts, node=node, install_rc=0 if finished else None,
                          verify_rc=0 if finished else None, install=install)


def test_a_job_run_twice_changed_the_env_if_its_first_run_did() -> None:
    """The first run built the env unseen behind the partition; the requeued run found it in place. The
    job changed the env, ran twice, counts once; the note says so."""
    changed, entries, note = runs_summary("9", [_run(0, changed=True), _run(1, changed=False)])
    assert changed is True
    assert entries == [RunEntry(1, "o1", True, True, 0, 0), RunEntry(2, "o1", True, False, 0, 0)]
    assert note == ("requeued by Slurm: job 9 ran 2 times (run 1 on o1 finished, changed the env; run 2 on o1 "
                    "finished); its answers count once")


def test_a_reused_job_does_not_claim_what_its_earlier_runs_changed() -> None:
    """`cluster slurm` again while the last run's job is requeued (Restarts=1 when it is reused): run 1 built
    the env and was reported by the run that submitted it; this run's part (run 2) changed nothing. Fails
    on a summary that counted every run's change ('a second run changes nothing' read changed)."""
    runs = [_run(0, changed=True), _run(1, changed=False)]
    changed, entries, note = runs_summary("9", runs, since=1)
    assert changed is False and len(entries) == 2 and note is not None  # the history is still told
    assert runs_summary("9", runs, since=0)[0] is True  # the control: the job this run submitted


def test_a_job_run_once_says_nothing_more() -> None:
    """The control: one run, no note; a run that found everything in place did not change it."""
    assert runs_summary("9", [_run(0, changed=False)]) == (False, [RunEntry(1, "o1", True, False, 0, 0)], None)


def test_a_killed_run_is_said_unfinished() -> None:
    _, entries, note = runs_summary("9", [_run(0, finished=False, node="a1"), _run(1, changed=True, node="a2")])
    assert [e.finished for e in entries] == [False, True]
    assert note is not None and "run 1 on a1 did not finish; run 2 on a2 finished, changed the env" in note


def test_a_rows_runs_go_out_as_json_objects() -> None:
    row = TypeRow("v100", ["o1"], ["gpu"], ["v100"], "v100", "verified", job_runs=[RunEntry(1, "o1", True, True, 0, 0)])
    assert row.to_json()["job_runs"] == [{"run": 1, "node": "o1", "finished": True, "changed": True,
                                          "install_rc": 0, "verify_rc": 0}]
