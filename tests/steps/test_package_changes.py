"""The package changes a dry run lists, parsed from uv's own output (recorded from uv 0.13.9 on this
machine: `uv pip install --dry-run` into a venv holding six 1.16.0, and `uv pip compile`), and the
changes a run made, from the versions before and after."""

from __future__ import annotations

from tfgpu_install.steps.package_changes import PackageChanges, between, parse_compiled, parse_dry_run

DRY_RUN = """Using Python 3.11.2 environment at: e
Resolved 2 packages in 290ms
Would uninstall 1 package
Would install 2 packages
 + packaging==26.4
 - six==1.16.0
 + six==1.17.0
"""

URL_INSTALL = """Would install 1 package
 - six==1.16.0
 + six @ https://files.pythonhosted.org/packages/b7/ce/six-1.17.0-py2.py3-none-any.whl
"""

COMPILED = """numpy==1.26.4
nvidia-cudnn-cu12==9.1.0.70 \\
    --hash=sha256:abc
# a comment naming==1.0
tensorflow[and-cuda]==2.99.0
"""


def test_a_dry_run_lists_added_and_changed_with_versions() -> None:
    got = parse_dry_run(DRY_RUN)
    assert got.added == (("packaging", "26.4"),) and got.changed == (("six", "1.16.0", "1.17.0"),)
    assert got.removed == () and got.lines() == ["+ packaging 26.4", "~ six 1.16.0 -> 1.17.0"]
    assert got.summary() == "packages: 1 to add, 1 to change"
    assert got.of_installed().lines() == ["~ six 1.16.0 -> 1.17.0"]  # what moves a package the env has


def test_a_package_from_a_url_and_no_change_at_all() -> None:
    got = parse_dry_run(URL_INSTALL)
    assert got.changed == (("six", "1.16.0", "@ https://files.pythonhosted.org/packages/b7/ce/six-1.17.0-py2.py3-"
                                    "none-any.whl"),)
    nothing = parse_dry_run("Checked 1 package in 0.74ms\nWould make no changes\n")
    assert nothing.empty and nothing.summary() == "packages: no change"


def test_a_compiled_lock_is_every_package_added() -> None:
    got = parse_compiled(COMPILED)
    assert got.added == (("numpy", "1.26.4"), ("nvidia-cudnn-cu12", "9.1.0.70"), ("tensorflow", "2.99.0"))


def test_what_a_run_did() -> None:
    got = between({"numpy": "1.26.4", "protobuf": "5.0.0", "old": "1"}, {"numpy": "1.26.4", "protobuf": "4.25.9",
                                                                        "six": "1.17.0"})
    assert got.lines() == ["+ six 1.17.0", "~ protobuf 5.0.0 -> 4.25.9", "- old 1"]
    assert got.to_json()["changed"] == [{"name": "protobuf", "from": "5.0.0", "to": "4.25.9"}]
    assert PackageChanges(unknown="uv: offline").summary() == "packages: unknown (uv: offline)"


def test_uvs_verbose_dry_run_says_which_wheels_it_would_download() -> None:
    """Recorded: uv 0.13.9, `uv pip install -v --dry-run` of numpy, scipy and six with numpy and scipy in
    its cache (tests/fixtures/uv/dry-run-verbose.txt)."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "fixtures" / "uv" / "dry-run-verbose.txt").read_text()
    got = parse_dry_run(text)
    assert got.uncached == ("six==1.17.0",)
    assert got.installs() == ["numpy==2.1.3", "scipy==1.14.1", "six==1.17.0"]
    # nothing to download: uv prints no "Would download" line
    assert parse_dry_run(text.replace("DEBUG Identified uncached distribution: six==1.17.0\n", "")
                         .replace("Would download 1 package\n", "")).uncached == ()
    # a count the debug lines do not match (another uv's wording): which ones is unknown, never guessed
    assert parse_dry_run(text.replace("Would download 1 package", "Would download 2 packages")).uncached is None
