"""installed_dists: the env's distributions read from their METADATA headers agree with
importlib.metadata on real site-packages, and on torn, folded and legacy entries."""

from __future__ import annotations

import sysconfig
from importlib.metadata import PathDistribution, distributions
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from tfgpu_install.env.layout import canonical_name, installed_dists


def _reference(sp: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for dist in sorted(distributions(path=[str(sp)]), key=lambda d: str(getattr(d, "_path", ""))):
        name = dist.metadata["Name"] if dist.metadata else None
        if name and dist.version:
            out.setdefault(canonical_name(name), (dist.version, tuple(dist.requires or ())))
    return out


def test_agrees_with_importlib_metadata_on_the_real_site_packages() -> None:
    """This interpreter's own site-packages: dozens of real wheels' METADATA, written by pip and uv."""
    sp = Path(sysconfig.get_paths()["purelib"])
    ours = {n: (d.version, d.requires) for n, d in installed_dists(sp).items()}
    ref = _reference(sp)
    assert len(ref) > 10
    assert ours == ref


def _dist_info(sp: Path, dirname: str, metadata: str) -> None:
    d = sp / dirname
    d.mkdir(parents=True)
    (d / "METADATA").write_text(metadata)


def test_torn_folded_and_legacy_entries(tmp_path: Path) -> None:
    sp = tmp_path / "site-packages"
    _dist_info(sp, "good-1.0.dist-info",
               "Metadata-Version: 2.1\nname: Good_Pkg\nVERSION: 1.0\nRequires-Dist: numpy (>=1.2)\n"
               "Requires-Dist: six;\n  python_version < \"3\"\nSummary: x\n\nRequires-Dist: not-a-header\n")
    _dist_info(sp, "torn-2.0.dist-info", "Metadata-Version: 2.1\nName: torn\n")  # killed before Version
    (sp / "empty-1.0.dist-info").mkdir()  # killed before METADATA
    egg = sp / "legacy-0.5.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Metadata-Version: 1.1\nName: legacy\nVersion: 0.5\n")
    (egg / "requires.txt").write_text("requests\n\n[fast]\nujson\n")
    got = installed_dists(sp)
    assert sorted(got) == ["good-pkg", "legacy"]
    assert got["good-pkg"].version == "1.0"
    assert got["good-pkg"].requires == ("numpy (>=1.2)", 'six; python_version < "3"')
    assert got["legacy"].requires == tuple(PathDistribution(egg).requires or ())
    # importlib keeps a folded header's line break and indent; the requirement is the same
    flat = {n: (v, tuple(" ".join(r.split()) for r in rs)) for n, (v, rs) in _reference(sp).items()}
    assert flat == {n: (d.version, d.requires) for n, d in got.items()}
    assert installed_dists(tmp_path / "missing") == {}


def test_a_folded_value_with_whitespace_only_lines_does_not_end_the_headers(tmp_path: Path) -> None:
    """hatchling writes a multi-paragraph License into the headers, its empty lines indented (comm,
    traitlets, jupyter-client): a whitespace-only line continues the value; the Requires-Dist after it
    still counts, as importlib reads it."""
    sp = tmp_path / "site-packages"
    _dist_info(sp, "comm-0.2.3.dist-info",
               "Metadata-Version: 2.4\nName: comm\nVersion: 0.2.3\nLicense: BSD 3-Clause License\n        \n"
               "        Copyright (c) 2022, Jupyter\n        \nRequires-Dist: traitlets>=4\n\nlong description\n")
    got = installed_dists(sp)
    assert got["comm"].requires == ("traitlets>=4",)
    assert got["comm"].requires == tuple(_reference(sp)["comm"][1])


_token = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.", min_size=1, max_size=12).filter(
    lambda t: t[0].isalnum())


@settings(max_examples=150, deadline=None)
@given(name=_token, version=st.from_regex(r"\A[0-9]{1,3}(\.[0-9]{1,3}){0,3}\Z"),
       reqs=st.lists(_token, max_size=4), fold=st.booleans(), crlf=st.booleans(),
       extra=st.lists(st.sampled_from(["Summary: a: b", "Classifier: X :: Y", "License: MIT", "Author-email: a@b"]),
                      max_size=3))
def test_generated_headers_read_as_importlib_reads_them(tmp_path_factory, name: str, version: str,  # type: ignore[no-untyped-def]
                                                        reqs: list[str], fold: bool, crlf: bool,
                                                        extra: list[str]) -> None:
    sp = tmp_path_factory.mktemp("sp")
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}", *extra]
    for r in reqs:
        lines += [f"Requires-Dist: {r}", "  ; extra == 'x'"] if fold else [f"Requires-Dist: {r}"]
    text = ("\r\n" if crlf else "\n").join(lines) + "\n\nbody text: not a header\n"
    d = sp / f"{name}-{version}.dist-info"
    d.mkdir()
    (d / "METADATA").write_bytes(text.encode())
    ours = {n: (x.version, x.requires) for n, x in installed_dists(sp).items()}
    ref = _reference(sp)
    assert ours.keys() == ref.keys()
    for key in ours:
        assert ours[key][0] == ref[key][0]
        # the email parser keeps a folded line's break; both name the same requirement
        assert [" ".join(r.split()) for r in ours[key][1]] == [" ".join(r.split()) for r in ref[key][1]]
