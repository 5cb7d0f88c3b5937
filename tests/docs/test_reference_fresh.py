"""The generated reference (docs/reference/commands, exit codes, environment variables) and the man page
are what the code gives now; every flag `tfgpu-install COMMAND [ACTION] --help` shows (argparse's own
formatting) is on the command's page and in the man page; the README's exit code table is the generated
one. A flag added without running scripts/docs_reference.py fails here."""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

import pytest

from tests.docs.reference_gen import REPO, load
from tfgpu_install.cli import build_parser, main
from tfgpu_install.commands import COMMANDS
from tfgpu_install.errors import EXIT_MEANINGS, ExitCode

gen = load()


def test_the_generated_pages_and_the_man_page_are_fresh() -> None:
    assert gen.stale() == [], "run `python3 scripts/docs_reference.py` and commit the result"


def test_a_page_missing_a_flag_is_stale(tmp_path: Path) -> None:
    """The attack: the committed page lacks a line the parser now gives (a flag added, no regeneration);
    the control: an unchanged copy is fresh."""
    for rel in gen.outputs():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    assert gen.stale(tmp_path) == []
    page = tmp_path / "docs/reference/commands/install.md"
    text = page.read_text()
    assert "- `--allow-cpu`" in text
    page.write_text("\n".join(line for line in text.split("\n") if not line.startswith("- `--allow-cpu`")))
    man = tmp_path / "docs/man/tfgpu-install.1"
    man.write_text(man.read_text().replace("\\-\\-allow\\-cpu", "\\-\\-allow\\-gpu"))
    assert gen.stale(tmp_path) == ["docs/reference/commands/install.md", "docs/man/tfgpu-install.1"]


def test_a_page_for_a_command_that_is_gone_is_stale(tmp_path: Path) -> None:
    for rel in gen.outputs():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    (tmp_path / "docs/reference/commands/frobnicate.md").write_text("# tfgpu-install frobnicate\n")
    assert gen.stale(tmp_path) == ["docs/reference/commands/frobnicate.md (no such command)"]


def _help_flags(argv: list[str], capsys: pytest.CaptureFixture[str]) -> set[str]:
    """Every option string argparse's own --help prints for this command line."""
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    flags: set[str] = set()
    for line in capsys.readouterr().out.splitlines():
        listed = re.match(r"^  (-\S.*?)(?:\s{2,}|$)", line)  # an option's own line: "  -o FILE, --output FILE"
        if listed:
            flags |= set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", listed.group(1)))
    return flags


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _actions(name: str) -> list[str]:
    """The ACTIONs of a command with its own subcommands (snapshot export, fleet install, ...)."""
    return list(_subparsers(_subparsers(build_parser(only=name))[name]))


def _named(flag: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_flag_help_shows_is_on_the_page_and_in_the_man_page(
        name: str, capsys: pytest.CaptureFixture[str]) -> None:
    page = (REPO / "docs/reference/commands" / f"{gen.page_name(name)}.md").read_text()
    man = (REPO / "docs/man/tfgpu-install.1").read_text().replace("\\-", "-")
    for argv in [[name]] + [[name, action] for action in _actions(name)]:
        flags = _help_flags(argv, capsys)
        assert "--help" in flags, argv
        missing = sorted(f for f in flags if not _named(f, page))
        assert not missing, f"{' '.join(argv)}: not on the page: {missing}"
        assert not [f for f in flags if not _named(f, man)], f"{' '.join(argv)}: not in the man page"


def test_the_readme_has_the_generated_exit_codes_and_every_command() -> None:
    readme = (REPO / "README.md").read_text()
    assert "\n".join(gen.exit_code_rows()) in readme
    rows = {line.split("|")[1].strip().strip("`") for line in readme.split("\n## Commands", 1)[1].split("\n## ")[0]
            .splitlines() if line.startswith("| `")}
    assert rows == set(COMMANDS), rows ^ set(COMMANDS)


def test_every_exit_code_has_its_meaning() -> None:
    assert set(EXIT_MEANINGS) == set(ExitCode)
    assert all(text and "|" not in text for text in EXIT_MEANINGS.values())


def test_every_tfgpu_variable_the_package_reads_is_in_the_environment_table() -> None:
    source = "\n".join(p.read_text() for p in (REPO / "tfgpu_install").rglob("*.py"))
    read = set(re.findall(r"\bTFGPU_[A-Z_]*[A-Z]\b", source))
    read -= {"TFGPU_OLD_LD_LIBRARY_PATH", "TFGPU_OLD_PATH"}  # written by the activation blocks, not read
    documented = {n.strip() for var in gen.ENVIRONMENT for n in var.name.split(",")}
    # TFGPU_OVERRIDE_<X> is read by its prefix (context.py); each documented one is a key the probe asks for
    assert read - {"TFGPU_OVERRIDE"} <= documented, read - documented
    for name in documented:
        if name.startswith("TFGPU_OVERRIDE_"):
            key = name[len("TFGPU_OVERRIDE_"):].lower()
            assert f'"{key}"' in source, name
        elif name.startswith("TFGPU_"):
            assert name in source, f"{name} is documented but the package does not read it"


def test_the_readme_is_a_landing_page_whose_links_lead_somewhere() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) <= 12 * 1024
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) > 20
    broken = [link for link in links if "://" not in link and not (REPO / link).exists()]
    assert not broken, broken
