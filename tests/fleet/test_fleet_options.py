"""Where an addition goes (#36): a fleet option is one row of fleet/options.py, and each row's far end
is held here: the real parser takes its flag, the typed request gets its value, the playbook gets its
extra var, and the collection reads that var. The Ansible snapshot module's format choices are generated
from snapshot/exports.FORMATS. And extra vars go to ansible-playbook as `-e @file`: 5,000 hosts' worth."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tfgpu_install.cli import build_parser
from tfgpu_install.commands.fleet import _request
from tfgpu_install.fleet import options
from tfgpu_install.fleet.playbook import PlaybookRun, extra_vars, playbook_argv, write_vars
from tfgpu_install.fleet.run import FleetRequest

REPO = Path(__file__).resolve().parents[2]
COLLECTION = REPO / "ansible_collections" / "tfgpu" / "install"
ROWS = [(o, action) for o in options.OPTIONS for action in o.actions]


def _collection_reads(var: str) -> bool:
    """The var is used in a Jinja expression of the role's tasks or the site playbook (not only declared)."""
    texts = [p.read_text() for p in (COLLECTION / "roles").rglob("tasks/*.yml")]
    texts.append((COLLECTION / "playbooks" / "site.yml").read_text())
    return any(f"{{{{ {var}" in t or f" {var} " in t or f"{var}[" in t or f"{var} |" in t for t in texts)


@pytest.mark.parametrize("row, action", ROWS, ids=[f"{a}:{o.flags[0]}" for o, a in ROWS])
def test_each_option_row_reaches_its_far_end(row: options.Option, action: str) -> None:
    argv = ["fleet", action] + ([] if row.attr == "inventory" else ["-i", "hosts.ini"]) + list(row.sample)
    if row.attr == "same_by":
        argv.append("--same")
    if row.attr == "offline":
        argv += ["--snapshot", "s.yaml"] if action == "install" else []
    if action == "restore" and row.attr != "snapshot":
        argv.append("s.yaml")
    args = build_parser().parse_args(argv)
    req = _request(args)
    default = {f.name: f.default for f in dataclasses.fields(FleetRequest)}.get(row.attr)
    value = getattr(req, row.attr)
    assert value is not None and value != default, (row.flags, value)
    if row.extra_var:
        assert options.extra_vars(req, action)[row.extra_var] == row.to_var(value)
        assert _collection_reads(row.extra_var), f"the collection never reads {row.extra_var}"


def test_every_request_field_has_its_row() -> None:
    fields = {f.name for f in dataclasses.fields(FleetRequest)} - {"mode"}
    assert fields == {o.attr for o in options.OPTIONS}


def test_an_added_row_needs_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """The addition itself: a new row (with its request field) is a flag, a request value and an extra var."""
    extra = options.Option(("--color-mode",), "env", ("install",), "a new option", {"metavar": "M"},
                           extra_var="tfgpu_env", sample=("--color-mode", "x"))
    monkeypatch.setattr(options, "OPTIONS", (*options.OPTIONS[:-1], extra, options.OPTIONS[-1]))
    req = _request(build_parser().parse_args(["fleet", "install", "-i", "h", "--color-mode", "x"]))
    assert req.env == "x" and options.extra_vars(req, "install")["tfgpu_env"] == "x"


def test_the_snapshot_modules_format_choices_are_exports_formats() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    import collection_choices

    from tfgpu_install.snapshot.exports import FORMATS

    text = collection_choices.MODULE.read_text()
    assert collection_choices.render(text, list(FORMATS)) == text, "run scripts/collection_choices.py"
    # A new export format is one FORMATS row: the generator puts it in both places (the far end).
    grown = collection_choices.render(text, [*FORMATS, "newfmt"])
    assert "choices: [tfgpu, requirements, conda, pylock, newfmt]" in grown
    assert 'FORMATS = ["tfgpu", "requirements", "conda", "pylock", "newfmt"]' in grown


def test_extra_vars_for_5000_hosts_reach_ansible_playbook(tmp_path: Path) -> None:
    """#42: the reported-runs map went inline as one -e argument: "Argument list too long" from ~1,900 hosts."""
    pytest.importorskip("ansible")
    tool = Path(sys.executable).parent / "ansible-playbook"
    hosts = {f"node{i:05d}.cluster.example.org": "0123456789abcdef" * 2 for i in range(5000)}
    play = tmp_path / "play.yml"
    play.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                    "    - ansible.builtin.debug:\n        msg: \"{{ tfgpu_reported_runs | length }}\"\n")
    run = PlaybookRun(tmp_path / "inv", "install", tmp_path / "results", {"tfgpu_reported_runs": hosts})
    (tmp_path / "inv").write_text("localhost ansible_connection=local\n")
    assert len(json.dumps(extra_vars(run))) > 300_000
    vars_file = write_vars(run)
    assert oct(vars_file.stat().st_mode & 0o777) == "0o600"
    argv = playbook_argv(str(tool), play, run, vars_file)
    assert argv[argv.index("-e") + 1] == f"@{vars_file}"
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env={"PATH": "/usr/bin:/bin", "ANSIBLE_HOME": str(tmp_path / "ah"),
                               "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ah" / "tmp")})
    assert done.returncode == 0, done.stderr[-2000:]
    shown = done.stdout.split("TASK [ansible.builtin.debug]")[1].split("PLAY RECAP")[0]
    assert "5000" in shown, done.stdout
