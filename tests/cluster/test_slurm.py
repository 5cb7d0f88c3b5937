"""Slurm's own outputs, parsed (recorded from the namespace cluster of scripts/cluster-demo, Slurm 22.05),
and the job a node type runs: its sbatch argv, its script (run for real with sh, a stand-in python), what
it leaves behind (hostile files read typed and bounded), and the module files."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from tfgpu_install.cluster import jobs, modulefile, slurm

# `sinfo -h -N -o '%N|%P|%f|%G|%T|%E'` on the demo cluster, a2's slurmd killed, t1 busy.
SINFO = """\
a1|gpu*|a100,bookworm|gpu:a100:2|idle|none
a2|gpu*|a100,bookworm|gpu:a100:2|idle*|Not responding
o1|gpu*|v100,bullseye|gpu:v100:1|idle|none
t1|inference|t4,bookworm|gpu:t4:1(S:0)|allocated|none
cpu1|debug|(null)|(null)|idle|none
bad line without fields
x;rm -rf|gpu|a100|gpu:a100:1|idle|none
"""


def test_sinfo_gives_node_types_by_features_and_gpu_type() -> None:
    nodes = slurm.parse_sinfo(SINFO)
    assert [n.name for n in nodes] == ["a1", "a2", "o1", "t1", "cpu1"]  # the unparseable lines are left out
    types = {t.name: t for t in slurm.node_types(nodes)}
    assert set(types) == {"a100", "v100", "t4", "cpu"}
    a100 = types["a100"]
    assert (a100.nodes, a100.usable, a100.partitions, a100.gpus_per_node) == (("a1", "a2"), ("a1",), ("gpu",), 2)
    assert a100.down == {"a2": "idle* (Not responding)"} and a100.constraint == "a100&bookworm"
    assert types["t4"].partitions == ("inference",) and types["t4"].usable == ("t1",)  # busy is not down
    assert types["cpu"].gpu_type is None and types["cpu"].features == ()
    assert [t.name for t in slurm.node_types(nodes, partition="inference")] == ["t4"]


def test_sbatch_argv_places_one_job_on_one_type() -> None:
    t = {t.name: t for t in slurm.node_types(slurm.parse_sinfo(SINFO))}
    argv = slurm.sbatch_argv(t["a100"], "/shared/job.sh", "tfgpu-install-a100", "/shared/out-%j", time_limit="60")
    assert argv[:2] == ["sbatch", "--parsable"] and argv[-1] == "/shared/job.sh"
    pairs = {flag: argv[argv.index(flag) + 1] for flag in ("--constraint", "--gres", "--partition", "--export",
                                                           "--time")}
    assert "--requeue" in argv and pairs["--constraint"] == "a100&bookworm" and pairs["--gres"] == "gpu:a100:1"
    assert pairs["--partition"] == "gpu" and pairs["--export"] == "NONE" and pairs["--time"] == "60"
    assert "--gres" not in slurm.sbatch_argv(t["cpu"], "/j.sh", "n", "/o", gpus=0)


def test_squeue_says_where_a_job_runs() -> None:
    """What the flow asks squeue (%i|%T|%N|%r), recorded on the demo cluster around a partition of o1."""
    q = slurm.parse_squeue("9|RUNNING|o1|None\n10|PENDING||BeginTime\n11|PENDING||ReqNodeNotAvail, "
                           "UnavailableNodes:a2\n12|RUNNING|o1;rm -rf /|None\n")
    assert q["9"] == slurm.JobState("RUNNING", None, "o1") and q["9"].describe() == "RUNNING on o1"
    assert q["10"].describe() == "PENDING (BeginTime)" and q["10"].nodes is None
    assert q["11"].reason == "ReqNodeNotAvail, UnavailableNodes:a2"
    assert q["12"].nodes is None  # not a node list: left out
    assert slurm.SQUEUE_FORMAT == "%i|%T|%N|%r"


def test_job_ids_queue_and_final_states() -> None:
    assert slurm.parse_job_id("42\n") == "42" and slurm.parse_job_id("42;cluster1") == "42"
    assert slurm.parse_job_id("Submitted batch job 42") is None
    q = slurm.parse_squeue("7|PENDING|Resources\n8|RUNNING|None\ngarbage\n9|PENDING|ReqNodeNotAvail, "
                           "UnavailableNodes:a2\n")
    assert q["7"] == slurm.JobState("PENDING", "Resources") and q["8"].reason is None
    assert q["9"].reason == "ReqNodeNotAvail, UnavailableNodes:a2" and len(q) == 3
    rec = ("JobId=12 JobName=tfgpu-install-t4\n   UserId=root(0) Priority=1 JobState=FAILED Reason=NonZeroExitCode "
           "Dependency=(null)\n")
    assert slurm.parse_scontrol_job(rec) == slurm.JobState("FAILED", "NonZeroExitCode")
    requeued = slurm.parse_scontrol_job("JobId=11 JobName=tfgpu-install-v100\n   JobState=PENDING Reason=BeginTime "
                                        "Dependency=(null)\n   Requeue=1 Restarts=1 BatchFlag=1 Reboot=0\n")
    assert requeued == slurm.JobState("PENDING", "BeginTime", restarts=1)
    assert slurm.parse_scontrol_job("slurm_load_jobs error: Invalid job id specified") is None


def _spec(tmp_path: Path, **kw: object) -> jobs.JobSpec:
    base: dict = dict(mode="install", shared=tmp_path / "shared", key="profile-abc", type_name="a100",
                      wheel=tmp_path / "shared" / "wheels" / "t.whl", wheel_tag="0123456789ab",
                      index_url="http://10.0.0.1:8080/simple", profile="stable", allow_cpu=True,
                      env_vars={"TFGPU_OVERRIDE_DRIVER": "550.54.14"})
    base.update(kw)
    return jobs.JobSpec(**base)  # type: ignore[arg-type]


def _stand_in_python(tmp_path: Path, verify_ok: bool = True) -> Path:
    """A 'python' whose `-m venv DIR` makes DIR/bin/{python,tfgpu-install}: the stand-in tool prints the JSON
    a real install / verify prints, and records its argv."""
    verified = ('{"ok": ' + str(verify_ok).lower() + ', "gpu_verified": false, "layers": '
                '[{"name": "tensorflow", "status": "pass"}]}')
    # install changes the env the first time (it leaves a mark there), then finds it in place; with
    # KILL_THE_JOB set it answers, then kills the job's shell (a node lost mid-job: no .done).
    tool = f"""#!/bin/sh
echo "$@" >> {tmp_path}/argv.log
case "$1" in
  install) if [ -e "$4/.made" ]; then c=false; else mkdir -p "$4" && touch "$4/.made"; c=true; fi
           echo '{{"changed": '$c', "resolution": {{"choice": {{"tensorflow": "2.99.0", "cuda": "12.3"}}}}}}'
           if [ -n "${{KILL_THE_JOB:-}}" ]; then kill -KILL $PPID; sleep 5; fi ;;
  verify) echo '{verified}'
          {"" if verify_ok else "exit 9"} ;;
esac
"""
    py = tmp_path / "python3"
    py.write_text(f"""#!/bin/sh
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin" && printf '#!/bin/sh\\nexit 0\\n' > "$3/bin/python" && chmod +x "$3/bin/python"
  cat > "$3/bin/tfgpu-install" <<'TOOL'
{tool}TOOL
  chmod +x "$3/bin/tfgpu-install"
fi
""")
    py.chmod(py.stat().st_mode | stat.S_IEXEC)
    return py


def test_the_job_script_runs_and_a_rerun_counts_once(tmp_path: Path) -> None:
    spec = _spec(tmp_path, python=str(_stand_in_python(tmp_path)))
    script = tmp_path / "job.sh"
    script.write_text(jobs.script(spec))
    for restart in ("", "1"):  # Slurm runs the same job twice (a requeue keeps its id)
        env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "77", **({"SLURM_RESTART_COUNT": restart} if restart else {})}
        done = subprocess.run(["sh", str(script)], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
    assert jobs.jobs_in(spec.results) == ["77"]  # one answer set, whatever Slurm did
    got = jobs.read_job(spec.results, "77")
    assert (got.finished, got.restarts, got.install_rc, got.verify_rc) == (True, 1, 0, 0)
    assert got.install["resolution"]["choice"]["tensorflow"] == "2.99.0" and got.verify["ok"] is True
    argv = (tmp_path / "argv.log").read_text().splitlines()
    assert argv[0].startswith(f"install -y --env {spec.env} --profile stable --index-url http://10.0.0.1:8080/simple "
                              "--allow-cpu --json")
    assert argv[1] == f"verify --env {spec.env} --cpu-ok --json"
    assert (spec.tool / ".tfgpu-complete").is_file()


def _run_job(script: Path, restart: str, node: str = "o1", **extra: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "77", "SLURMD_NODENAME": node, **extra,
           **({"SLURM_RESTART_COUNT": restart} if restart else {})}
    subprocess.run(["sh", str(script)], capture_output=True, text=True, env=env, timeout=60)


def test_a_requeued_job_keeps_what_its_earlier_run_did(tmp_path: Path) -> None:
    """Slurm runs a job twice (a partition: the first run finished unseen, then the requeued one): one answer
    set under the job's id, and the first run's answers kept under earlier/: it built the env (changed), the
    rerun found it in place. Fails on a script that erased the earlier run (the job would read 'unchanged')."""
    spec = _spec(tmp_path, python=str(_stand_in_python(tmp_path)))
    script = tmp_path / "job.sh"
    script.write_text(jobs.script(spec))
    _run_job(script, "")
    _run_job(script, "1", node="o2")
    assert jobs.jobs_in(spec.results) == ["77"]  # counted once
    runs = jobs.read_runs(spec.results, "77")
    assert [(r.restarts, r.node, r.finished, r.changed) for r in runs] == [(0, "o1", True, True),
                                                                          (1, "o2", True, False)]
    assert jobs.read_job(spec.results, "77").restarts == 1  # the latest run's answers are where they were


def test_a_single_run_has_no_earlier_runs(tmp_path: Path) -> None:
    """The control: a job Slurm ran once reads as one run."""
    spec = _spec(tmp_path, python=str(_stand_in_python(tmp_path)))
    script = tmp_path / "job.sh"
    script.write_text(jobs.script(spec))
    _run_job(script, "")
    assert [(r.restarts, r.node, r.changed) for r in jobs.read_runs(spec.results, "77")] == [(0, "o1", True)]
    assert not (spec.results / "earlier").exists()


def test_a_run_killed_mid_job_is_kept_as_unfinished(tmp_path: Path) -> None:
    """The node's job dies mid-install (no .done); Slurm runs it again: the killed run reads 'did not finish'
    with its restart count from the .run file it wrote first, the rerun finished."""
    spec = _spec(tmp_path, python=str(_stand_in_python(tmp_path)))
    script = tmp_path / "job.sh"
    script.write_text(jobs.script(spec))
    _run_job(script, "", KILL_THE_JOB="1")
    assert not (spec.results / "77.done").exists()
    _run_job(script, "1")
    runs = jobs.read_runs(spec.results, "77")
    assert [(r.restarts, r.finished, r.install_rc) for r in runs] == [(0, False, None), (1, True, 0)]


def test_earlier_runs_are_read_bounded_and_typed(tmp_path: Path) -> None:
    res = tmp_path / "res"
    for name in ("0", "1", "x;rm", "unknown", "99999999999"):
        d = res / "earlier" / "5" / name
        d.mkdir(parents=True)
        (d / "5.done").write_text('{"node": "../../etc", "restarts": "0"}')
    (res / "5.done").write_text('{"node": "n1", "restarts": "2"}')
    runs = jobs.read_runs(res, "5")
    # 'unknown' first (its count lost), then 0 and 1; a non-number and an over-long number are left out
    assert len(runs) == 4 and [r.node for r in runs] == [None, None, None, "n1"]
    assert len(jobs.read_runs(res, "5", limit=1)) == 2


def test_hostile_values_in_the_job_script_stay_data(tmp_path: Path) -> None:
    """A profile, env var or path with shell in it is quoted: nothing it says runs."""
    marker = tmp_path / "pwned"
    spec = _spec(tmp_path, python=str(_stand_in_python(tmp_path)), profile=f"x'; touch {marker}; '",
                 env_vars={"EVIL": f"$(touch {marker})`touch {marker}`"}, key=f"k$(touch {marker})")
    script = tmp_path / "job.sh"
    script.write_text(jobs.script(spec))
    subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=60,
                   env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "5"})
    assert not marker.exists()
    with pytest.raises(ValueError):
        jobs.script(_spec(tmp_path, env_vars={"BAD NAME": "x"}))


def test_a_nodes_answers_are_read_typed_and_bounded(tmp_path: Path) -> None:
    res = tmp_path / "res"
    res.mkdir()
    (res / "9.done").write_text('{"host": 5, "restarts": "many"}')
    (res / "9.install.rc").write_text("zero\n")
    (res / "9.verify.rc").write_text("0\n")
    (res / "9.install.json").write_text("[1, 2]")
    with (res / "9.verify.json").open("wb") as f:
        f.truncate((4 << 20) + 10)  # over the bound: not read
    got = jobs.read_job(res, "9")
    assert (got.finished, got.host, got.restarts, got.install_rc, got.verify_rc) == (True, None, None, None, 0)
    assert got.install == {} and got.verify == {}
    (res / "evil.done").write_text("{}")
    assert jobs.jobs_in(res) == ["9"]


@pytest.mark.parametrize("fmt, needle", [("lua", 'prepend_path("PATH", "/shared/envs/a100/bin")'),
                                         ("tcl", "prepend-path PATH {/shared/envs/a100/bin}")])
def test_module_files(fmt: str, needle: str, tmp_path: Path) -> None:
    text = modulefile.render(fmt, Path("/shared/envs/a100"), 'TF 2.99.0 "verified" {CPU only}')
    assert needle in text
    with pytest.raises(ValueError):
        modulefile.render(fmt, Path('/shared/x"\n}; exec rm'), "x")


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def test_lua_module_file_is_valid_lua_when_lua_is_here(tmp_path: Path) -> None:
    lua = _which("lua") or _which("lua5.4") or _which("lua5.3")
    if lua is None:
        pytest.skip("no lua interpreter here")
    text = modulefile.render("lua", Path("/shared/envs/a100"), 'a "quoted" what')
    prelude = 'function whatis(s) print("W", s) end\nfunction setenv(k, v) print("S", k, v) end\n' \
              'function prepend_path(k, v) print("P", k, v) end\n'
    (tmp_path / "m.lua").write_text(prelude + text)
    out = subprocess.run([lua, str(tmp_path / "m.lua")], capture_output=True, text=True, timeout=30).stdout
    assert "W\ta 'quoted' what" in out and "P\tPATH\t/shared/envs/a100/bin" in out


def test_lmod_loads_the_module_file(tmp_path: Path) -> None:
    """The far end: Lmod itself (Debian's lmod) loads what we write; `module load tfgpu/a100` puts the env first."""
    init = Path("/usr/share/lmod/lmod/init/bash")
    if not init.is_file():
        pytest.skip("Lmod is not installed (apt-get install lmod)")
    env_dir = tmp_path / "envs" / "a100"
    (env_dir / "bin").mkdir(parents=True)
    mods = tmp_path / "modules" / "tfgpu"
    mods.mkdir(parents=True)
    (mods / modulefile.file_name("lua", "a100")).write_text(modulefile.render("lua", env_dir, "TF 2.99.0 (CPU only)"))
    done = subprocess.run(["bash", "-c", f'. {init} && module use {tmp_path / "modules"} && module load tfgpu/a100 '
                           '&& echo "$VIRTUAL_ENV" && echo "$PATH" && module whatis tfgpu/a100'],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(env_dir) and lines[1].startswith(f"{env_dir}/bin:")
    assert "TF 2.99.0 (CPU only)" in done.stderr + done.stdout
