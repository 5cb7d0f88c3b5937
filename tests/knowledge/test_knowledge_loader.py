"""Broken knowledge files: every problem is one BadInputError naming file:line and a fix."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from tfgpu_install.errors import BadInputError, ExitCode
from tfgpu_install.knowledge.load import load_knowledge, profiles_dir

GOOD_ROW = """\
releases:
  - tensorflow: "2.15.1"
    package: tensorflow
    released: "2024-03-08"
    pythons: ["3.9", "3.10", "3.11"]
    cuda: "12.2"
    cudnn: "8.9"
    sass: ["5.0", "6.0", "7.0", "7.5", "8.0"]
    ptx: ["8.0"]
    manylinux: manylinux_2_17_x86_64.manylinux2014_x86_64
    min_glibc: "2.17"
    cuda_from: pip
    extra: and-cuda
    pins: {nvidia-cudnn-cu12: "8.9.4.25"}
    source: "wheel:tensorflow-2.15.1-cp311-cp311-manylinux_2_17_x86_64.whl"
"""


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    d = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    (d / "matrix.yaml").write_text(GOOD_ROW)
    return d


def _fails(d: Path) -> BadInputError:
    with pytest.raises(BadInputError) as err:
        load_knowledge(d)
    assert err.value.code == ExitCode.BAD_INPUT and err.value.hint
    return err.value


def test_minimal_matrix_loads(pdir: Path) -> None:
    kn = load_knowledge(pdir)
    (rel,) = kn.releases
    assert rel.tensorflow == "2.15.1" and rel.line == 2 and rel.pins_kind == "exact"


@pytest.mark.parametrize(
    "old, new, expected",
    [
        ('    cuda: "12.2"\n', "    cuda: 12.3\n", r'matrix.yaml:6: releases[0].cuda: expected a version string like '
                                                   r'"12.3"'),
        ('    cuda: "12.2"\n', '    cuda: "12.2.1"\n', r'matrix.yaml:6: releases[0].cuda: expected a version string '
                                                       r'like "12.3"'),
        ('    source: "wheel:', '    sorce: "wheel:', "matrix.yaml:15: releases[0].sorce: unknown key"),
        ('    pythons: ["3.9", "3.10", "3.11"]\n', "    pythons: [3.9, 3.10]\n",
         "matrix.yaml:5: releases[0].pythons[0]: expected a version string"),
        ("    cuda_from: pip\n", "    cuda_from: magic\n", "matrix.yaml:12: releases[0].cuda_from: expected one of "
                                                           "pip, system"),
        ("    extra: and-cuda\n", "", "releases[0].extra: cuda_from: pip needs the extra's name"),
        ('    released: "2024-03-08"\n', '    released: "March 2024"\n', "matrix.yaml:4: releases[0].released"),
        ('    sass: ["5.0", "6.0", "7.0", "7.5", "8.0"]\n', "    sass: 8.0\n",
         "matrix.yaml:8: releases[0].sass: expected a list"),
        ('    ptx: ["8.0"]\n', '    ptx: ["8.0"]\n    unconfirmed: [colour]\n',
         "releases[0].unconfirmed[0]: 'colour' is not a field"),
        ('    pins: {nvidia-cudnn-cu12: "8.9.4.25"}\n', '    pins: {nvidia-cudnn-cu12: latest}\n',
         "matrix.yaml:14: releases[0].pins.nvidia-cudnn-cu12"),
        ("    package: tensorflow\n", "    package: tensorflow\n    package: tensorflow-gpu\n",
         "matrix.yaml:4: releases[0].package: duplicate key"),
    ],
)
def test_matrix_errors_name_file_and_line(pdir: Path, old: str, new: str, expected: str) -> None:
    text = (pdir / "matrix.yaml").read_text()
    assert old in text
    (pdir / "matrix.yaml").write_text(text.replace(old, new))
    err = _fails(pdir)
    assert expected in err.message, err.message
    assert err.message.startswith(str(pdir / "matrix.yaml"))


def test_missing_source_says_what_to_add(pdir: Path) -> None:
    text = (pdir / "matrix.yaml").read_text()
    (pdir / "matrix.yaml").write_text("".join(ln for ln in text.splitlines(True) if "source:" not in ln))
    err = _fails(pdir)
    assert "matrix.yaml:2: releases[0].source: missing (required)" in err.message
    assert "where the row's data came from" in (err.hint or "")


def test_unquoted_python_version_hint(pdir: Path) -> None:
    text = (pdir / "matrix.yaml").read_text().replace('"3.10", "3.11"', "3.10, 3.11")
    (pdir / "matrix.yaml").write_text(text)
    err = _fails(pdir)
    assert "pythons[1]" in err.message and "3.1" in err.message
    assert "quote it" in (err.hint or "")


def test_duplicate_release(pdir: Path) -> None:
    row = GOOD_ROW.split("\n", 1)[1]
    (pdir / "matrix.yaml").write_text(GOOD_ROW + row)
    err = _fails(pdir)
    assert "matrix.yaml:16: releases[1].tensorflow: duplicate version 2.15.1 (first at line 2)" in err.message


def test_malformed_yaml(pdir: Path) -> None:
    (pdir / "matrix.yaml").write_text(GOOD_ROW.replace('    cuda: "12.2"', '    cuda: "12.2'))
    err = _fails(pdir)
    assert "matrix.yaml:" in err.message and "malformed YAML" in err.message
    line = int(err.message.split("matrix.yaml:")[1].split(":")[0])
    assert 6 <= line <= 8


def test_empty_and_missing_files(pdir: Path) -> None:
    (pdir / "gpus.yaml").write_text("# nothing\n")
    assert "gpus.yaml:1: groups: the file is empty" in _fails(pdir).message
    (pdir / "gpus.yaml").unlink()
    assert "gpus.yaml: cannot read" in _fails(pdir).message


def test_drivers_and_gpus_errors(pdir: Path) -> None:
    text = (pdir / "drivers.yaml").read_text()
    (pdir / "drivers.yaml").write_text(text.replace('min_driver: "535.54.03"', "min_driver: 535"))
    err = _fails(pdir)
    assert "drivers.yaml:" in err.message and "min_driver: expected a version string" in err.message
    (pdir / "drivers.yaml").write_text(text)
    gtext = (pdir / "gpus.yaml").read_text()
    (pdir / "gpus.yaml").write_text(gtext.replace('compute_capability: "3.7"', "compute_capability: high"))
    err = _fails(pdir)
    assert "compute_capability: expected a version string" in err.message
    line = int(err.message.split("gpus.yaml:")[1].split(":")[0])
    assert "compute_capability: high" in (pdir / "gpus.yaml").read_text().splitlines()[line - 1]


def test_builtin_policy_name_must_match_file(pdir: Path) -> None:
    (pdir / "latest.yaml").write_text((pdir / "latest.yaml").read_text().replace("name: latest", "name: newest"))
    assert "latest.yaml:3: name: expected 'latest'" in _fails(pdir).message


def test_unhashable_key_and_binary_file(pdir: Path) -> None:
    (pdir / "matrix.yaml").write_text(GOOD_ROW + "  - ? [a, b]\n    : 1\n")
    err = _fails(pdir)
    assert "matrix.yaml:16: malformed YAML: a mapping key must be a plain value" in err.message
    (pdir / "matrix.yaml").write_bytes(b"releases: [\xff\xfe]\n")
    assert "not UTF-8" in _fails(pdir).message


def test_arbitrary_text_never_crashes_the_loader(pdir: Path) -> None:
    """Any text in a knowledge file either loads or is one BadInputError: never a traceback."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tfgpu_install.knowledge.load import _load_cached

    pieces = st.sampled_from(
        ["releases:", "\n", "  - ", "tensorflow: ", '"2.15.1"', "cuda: ", "12.2", "[", "]", "{", "}", ":", ",",
         "source: x", "pythons: [3.10]", "&a ", "*a", "!!python/object:os.system", "? ", "- ", "null", "~",
         "2024-03-08", "sass: ", "pins: ", "defects: ", "  ", "\t", "'", '"', "#"]
    )

    @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(pieces, max_size=40).map("".join))
    def check(text: str) -> None:
        (pdir / "matrix.yaml").write_text(text)
        _load_cached.cache_clear()
        try:
            load_knowledge(pdir)
        except BadInputError as err:
            assert err.message.startswith(str(pdir / "matrix.yaml"))

    check()


def test_gpu_by_name_never_raises() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tfgpu_install.knowledge.gpu_names import gpu_by_name

    kn = load_knowledge()

    @settings(max_examples=300, deadline=None)
    @given(st.text(max_size=60))
    def check(name: str) -> None:
        row = gpu_by_name(kn, name)
        assert row is None or row.compute_capability

    check()


# --- the disk cache: data only, rebuilt on any doubt ----------------------------------------


def _cached(pdir: Path, cache: Path) -> tuple[object, Path]:
    from tfgpu_install.knowledge.load import _load_cached

    _load_cached.cache_clear()
    kn = load_knowledge(pdir, cache_dir=cache)
    files = list((cache / "knowledge").glob("*.json"))
    assert len(files) == 1, files
    return kn, files[0]


def _resealed(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Edit the payload and write a header whose checksum matches: the decode must still doubt it."""
    import json
    import zlib

    head, _, payload = path.read_bytes().partition(b"\n")
    data = json.loads(payload)
    edit(data)
    new = json.dumps(data).encode()
    header = dict(json.loads(head), crc32=zlib.crc32(new), size=len(new))
    path.write_bytes(json.dumps(header).encode() + b"\n" + new)


def test_the_cache_is_json_with_a_checksum(pdir: Path, tmp_path: Path) -> None:
    import json
    import zlib

    parsed, path = _cached(pdir, tmp_path / "cache")
    head, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    assert header["crc32"] == zlib.crc32(payload) and header["size"] == len(payload)
    assert json.loads(payload)["releases"][0]["tensorflow"] == "2.15.1"
    assert _cached(pdir, tmp_path / "cache")[0] == parsed


@pytest.mark.parametrize("tamper", ["flip-a-byte", "checksum-ok-unknown-field", "checksum-ok-wrong-type",
                                    "checksum-ok-missing-field", "other-format", "truncated", "not-json"])
def test_a_doubtful_cache_is_rebuilt(pdir: Path, tmp_path: Path, tamper: str) -> None:
    parsed, path = _cached(pdir, tmp_path / "cache")
    good = path.read_bytes()
    if tamper == "flip-a-byte":
        path.write_bytes(good.replace(b'"2.15.1"', b'"2.99.1"'))  # payload edited, header not
    elif tamper == "checksum-ok-unknown-field":
        _resealed(path, lambda d: d["releases"][0].update({"__reduce__": "os.system"}))
    elif tamper == "checksum-ok-wrong-type":
        _resealed(path, lambda d: d["drivers"][0].update({"min_driver": 535}))
    elif tamper == "checksum-ok-missing-field":
        _resealed(path, lambda d: d["releases"][0].pop("pins"))
    elif tamper == "other-format":
        path.write_bytes(good.replace(b"knowledge-json-v1", b"knowledge-json-v0"))
    elif tamper == "truncated":
        path.write_bytes(good[: len(good) // 2])
    else:
        path.write_bytes(b"\x80\x04garbage")
    kn, again = _cached(pdir, tmp_path / "cache")
    assert kn == parsed
    assert again.read_bytes() == good  # rewritten from the YAML


def test_a_pickle_in_the_cache_is_never_run(pdir: Path, tmp_path: Path) -> None:
    """The old format: a writable cache file ran code; one naming a missing module crashed."""
    import pickle

    parsed, path = _cached(pdir, tmp_path / "cache")
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (__import__("os").system, (f"touch {marker}",))

    path.write_bytes(pickle.dumps(Evil()))
    assert _cached(pdir, tmp_path / "cache")[0] == parsed and not marker.exists()
    missing = pickle.dumps(Evil()).replace(b"posix", b"nosuchmodule_xyz")
    path.write_bytes(missing)
    assert _cached(pdir, tmp_path / "cache")[0] == parsed and not marker.exists()


@pytest.mark.parametrize("old, new", [
    ("pins: {nvidia-cudnn-cu12:", 'pins: {"nvidia-cudnn-cu12 @ https://evil/x.whl#":'),
    ("pins: {nvidia-cudnn-cu12:", 'pins: {"x; os_name == \'posix\'":'),
    ("    extra: and-cuda\n", '    extra: and-cuda\n    constraints: {"numpy @ http://h/n.whl": ">=1"}\n'),
    ("    extra: and-cuda\n", '    extra: and-cuda\n    constraints: {numpy: "@ http://h/n.whl"}\n'),
])
def test_pin_names_are_project_names_not_direct_references(pdir: Path, old: str, new: str) -> None:
    text = (pdir / "matrix.yaml").read_text()
    assert old in text
    (pdir / "matrix.yaml").write_text(text.replace(old, new))
    err = _fails(pdir)
    assert "matrix.yaml:" in err.message and ("project name" in err.message or "specifier" in err.message), err.message
