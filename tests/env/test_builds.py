"""env/builds.py: a distribution's build fingerprint from its RECORD (issue #38 item 1).

Each test names the broken digest it catches: one that counts the installer's own files (uv's
RECORD and pip's differ for the same wheel), bytecode, or launchers (their #! names the env), or
one that misses another file hash, a file more, or a file renamed."""

from __future__ import annotations

from tfgpu_install.env.builds import content_digest

ROWS = [
    ["absl/__init__.py", "sha256=AAAA", "20"],
    ["absl/flags.py", "sha256=BBBB", "30"],
    ["absl_py-2.1.0.dist-info/METADATA", "sha256=CCCC", "100"],
    ["absl_py-2.1.0.dist-info/RECORD", "", ""],
]


def test_the_installers_own_files_bytecode_and_launchers_do_not_count() -> None:
    base = content_digest(ROWS)
    assert base is not None and base.startswith("sha256:") and len(base) == 71
    pip_wrote = ROWS + [
        ["absl_py-2.1.0.dist-info/INSTALLER", "sha256=PIPP", "4"],
        ["absl_py-2.1.0.dist-info/REQUESTED", "sha256=EMPT", "0"],
        ["absl_py-2.1.0.dist-info/direct_url.json", "sha256=URLS", "70"],
        ["absl_py-2.1.0.dist-info/uv_cache.json", "sha256=UVCA", "127"],
        ["absl/__pycache__/__init__.cpython-311.pyc", "sha256=PYCC", "200"],
        ["../../../bin/absl-tool", "sha256=LAUN", "230"],
    ]
    assert content_digest(list(reversed(pip_wrote))) == base  # order and installer-written rows aside


def test_another_hash_a_file_more_or_a_renamed_file_is_another_build() -> None:
    base = content_digest(ROWS)
    other_hash = [r if r[0] != "absl/flags.py" else ["absl/flags.py", "sha256=XXXX", "30"] for r in ROWS]
    more = ROWS + [["absl/planted.py", "sha256=DDDD", "1"]]
    renamed = [r if r[0] != "absl/flags.py" else ["absl/flag.py", *r[1:]] for r in ROWS]
    data = ROWS + [["../../../share/absl/data.txt", "sha256=EEEE", "5"]]  # a data file outside site-packages
    nested_info = ROWS + [["absl/sub.dist-info/INSTALLER", "sha256=FFFF", "3"]]  # not the dist-info's own
    found = {content_digest(r) for r in (other_hash, more, renamed, data, nested_info)}
    assert len(found) == 5 and base not in found


def test_nothing_to_fingerprint_is_none() -> None:
    assert content_digest([]) is None
    assert content_digest([["x-1.0.dist-info/RECORD", "", ""], []]) is None
