"""tfgpu_install.fetch.cudnn_redist: manifests (real NVIDIA format), versions, soname links, other copies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.cudnn_archive import build_archive, install_libs, manifest, version_header
from tests.support.promised import find_tool
from tfgpu_install.errors import BadInputError, ExitCode, UnsatisfiableError
from tfgpu_install.fetch.cudnn_redist import (
    REDIST_URL,
    check_serves,
    find_copies,
    link_problems,
    manifest_labels,
    parse_index,
    parse_ldconfig_p,
    parse_version_header,
    pick_label,
    select_archive,
    stale_copies,
    tree_version,
    version_from_name,
    wanted_links,
)
from tfgpu_install.fetch.elf import read_soname

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cudnn"


def test_real_manifest_nested_form() -> None:
    text = (FIXTURES / "redistrib_9.8.0.json").read_text()
    a = select_archive(text, "linux-x86_64", "12", source="redistrib_9.8.0.json")
    assert a.version == "9.8.0.87" and a.variant == "cuda12"
    assert a.relative_path == "cudnn/linux-x86_64/cudnn-linux-x86_64-9.8.0.87_cuda12-archive.tar.xz"
    assert a.sha256 == "321b9b33bb1287404d93d5672d352f16feabc4b220ac6ae0b86e4b27f257dcf4"
    assert a.size == 923946888
    assert a.url(REDIST_URL) == REDIST_URL + a.relative_path
    assert select_archive(text, "linux-aarch64", "12").variant == "cuda12"


def test_manifest_without_this_platform() -> None:
    text = (FIXTURES / "redistrib_9.8.0.json").read_text()
    with pytest.raises(BadInputError) as ei:
        select_archive(text, "linux-ppc64le", "12", source="redistrib_9.8.0.json")
    assert ei.value.ref == "cudnn-no-platform"
    assert "linux-ppc64le" in ei.value.message and "linux-x86_64" in ei.value.message
    with pytest.raises(BadInputError) as ei:
        select_archive(text, "linux-aarch64", "11")
    assert ei.value.ref == "cudnn-no-variant" and "cuda12" in ei.value.message


def test_old_flat_manifest_form(tmp_path: Path) -> None:
    arc = build_archive(tmp_path, "8.9.7.29", fmt="tar.gz")
    text = manifest("8.9.7.29", {"linux-x86_64": {"cuda12": arc}}, nested=False)
    a = select_archive(text, "linux-x86_64", "12")
    assert a.variant is None and a.relative_path.endswith(arc.name) and a.size == arc.stat().st_size


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"cudnn": {}}',
     '{"cudnn": {"version": "9.1.0.70", "linux-x86_64": {"cuda12": {"relative_path": "../x", "sha256": "'
     + "a" * 64 + '"}}}}',
     '{"cudnn": {"version": "9.1.0.70", "linux-x86_64": {"cuda12": {"relative_path": "x", "sha256": "zz"}}}}'],
)
def test_malformed_manifests(text: str) -> None:
    with pytest.raises(BadInputError) as ei:
        select_archive(text, "linux-x86_64", "12", source="m.json")
    assert ei.value.code == ExitCode.BAD_INPUT and ei.value.message.startswith("m.json")


def test_index_and_label_choice() -> None:
    html = ('<a href="redistrib_8.9.7.json">x</a> <a href="redistrib_9.1.0.json">y</a> '
            '<a href="redistrib_9.3.0.json">z</a>')
    labels = parse_index(html)
    assert labels == ["8.9.7", "9.1.0", "9.3.0"]
    assert pick_label("9.3.0.75", labels) == "9.3.0"
    assert pick_label("8.9.4.25", labels) == "8.9.7"  # same major.minor, newer patch
    assert pick_label("9.2.0", labels) == "9.3.0"  # newer minor within the major
    assert pick_label("7.6.5", labels) is None
    assert manifest_labels("8.9.4.25") == ["8.9.4"] and manifest_labels("8.9") == []


def test_versions_from_headers_and_names(tmp_path: Path) -> None:
    assert parse_version_header(version_header("9.1.0")) == "9.1.0"
    old_h = "#define CUDNN_MAJOR 7\n#define CUDNN_MINOR 6\n#define CUDNN_PATCHLEVEL 5\n"
    assert parse_version_header(old_h) == "7.6.5"
    assert parse_version_header("#define CUDNN_MAJOR 9\n") is None
    assert version_from_name("libcudnn.so.9.1.0") == "9.1.0"
    assert version_from_name("libcudnn_ops.so.9") == "9"
    assert version_from_name("libcudnn.so") is None
    assert version_from_name("cudnn-linux-x86_64-9.1.0.70_cuda12-archive.tar.xz") == "9.1.0.70"
    assert version_from_name("cudnn-11.8-linux-x64-v8.6.0.163.tgz") == "8.6.0.163"
    install_libs(tmp_path / "t" / "lib", "9.1.0", tmp_path)
    assert tree_version(tmp_path / "t") == ("9.1.0", "file names")


def test_major_and_minor_checks() -> None:
    check_serves("9.1.0", "9.1", "2.17.1", "x")
    check_serves("9.3.0", "9.1", "2.17.1", "x")  # newer minor: backward compatible
    check_serves("8.9.7", None, "2.15.1", "x")  # nothing to hold it against
    with pytest.raises(UnsatisfiableError) as ei:
        check_serves("9.1.0", "8.9", "2.15.1", "the archive")
    assert ei.value.code == ExitCode.UNSATISFIABLE
    assert "TensorFlow 2.15.1" in ei.value.message and "8.9" in ei.value.message
    assert "cuDNN 8.x" in (ei.value.hint or "")
    with pytest.raises(UnsatisfiableError):
        check_serves("8.6.0", "8.9", "2.15.1", "x")  # older minor than the build
    with pytest.raises(BadInputError):
        check_serves(None, "8.9", "2.15.1", "x")


def test_soname_links_from_real_elf(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (tmp_path / "w").mkdir()
    install_libs(lib, "9.1.0", tmp_path / "w", links=False)
    assert read_soname(lib / "libcudnn.so.9.1.0") == "libcudnn.so.9"
    links, problems = wanted_links(lib)
    assert problems == []
    assert {(link.name, link.target) for link in links} == {
        ("libcudnn.so.9", "libcudnn.so.9.1.0"), ("libcudnn.so", "libcudnn.so.9"),
        ("libcudnn_ops.so.9", "libcudnn_ops.so.9.1.0"), ("libcudnn_ops.so", "libcudnn_ops.so.9"),
    }
    assert any("libcudnn.so.9 is missing" in p for p in link_problems(lib))
    for link in links:
        os.symlink(link.target, lib / link.name)
    assert link_problems(lib) == []
    os.remove(lib / "libcudnn.so.9")
    os.symlink("libcudnn_ops.so.9.1.0", lib / "libcudnn.so.9")
    assert any("points to libcudnn_ops.so.9.1.0" in p for p in link_problems(lib))


def test_a_file_whose_soname_disagrees_is_a_problem(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (tmp_path / "w").mkdir()
    install_libs(lib, "9.1.0", tmp_path / "w", links=False)
    os.rename(lib / "libcudnn_ops.so.9.1.0", lib / "libcudnn_adv.so.9.1.0")
    _, problems = wanted_links(lib)
    assert any("SONAME libcudnn_ops.so.9" in p for p in problems)


LDCONFIG_P = """\
1234 libs found in cache `/etc/ld.so.cache'
\tlibcudnn_ops_infer.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn_ops_infer.so.8
\tlibcudnn.so.8 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcudnn.so.8
\tlibcudnn.so.8 (libc6,x86-64) => /opt/cudnn/lib/libcudnn.so.8
\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1
"""


def test_parse_ldconfig_p() -> None:
    assert parse_ldconfig_p(LDCONFIG_P) == [Path("/usr/lib/x86_64-linux-gnu"), Path("/opt/cudnn/lib")]


def test_find_copies_on_every_library_path_dir(tmp_path: Path, tmp_env: dict[str, str]) -> None:
    from tfgpu_install.context import build_context

    w = tmp_path / "w"
    w.mkdir()
    root = Path(tmp_env["TFGPU_ROOT"])
    ld_dir = tmp_path / "ldpath"
    install_libs(ld_dir, "8.6.0", w)
    install_libs(root / "usr/local/cuda-12.2/lib64", "8.9.7", w)
    env = tmp_path / "env"
    install_libs(env / "lib/python3.11/site-packages/nvidia/cudnn/lib", "9.1.0", w)
    # A real loader cache for the test root, made by the real ldconfig.
    cached = tmp_path / "cached"
    install_libs(cached, "7.6.5", w)
    (root / "etc").mkdir()
    conf = root / "etc/ld.so.conf"
    conf.write_text(f"{cached}\n")
    import subprocess

    ldconfig = find_tool("ldconfig", sbin=True) or "ldconfig"  # /sbin when PATH is /usr/bin:/bin
    subprocess.run([ldconfig, "-C", str(root / "etc/ld.so.cache"), "-f", str(conf)], check=True)
    ctx = build_context({**tmp_env, "LD_LIBRARY_PATH": f"{ld_dir}:/nonexistent"})
    copies = {c.source: c for c in find_copies(ctx, env)}
    assert copies["LD_LIBRARY_PATH"].version == "8.6.0"
    assert copies["CUDA toolkit"].version == "8.9.7"
    assert copies["env"].version == "9.1.0"
    assert copies["ldconfig cache"].directory == cached and copies["ldconfig cache"].version == "7.6.5"
    assert "libcudnn.so.8.6.0" in copies["LD_LIBRARY_PATH"].files
    keep = env / "lib/python3.11/site-packages/nvidia/cudnn/lib"
    stale = stale_copies(copies.values(), keep, "9.1.0")
    assert {c.source for c in stale} == {"LD_LIBRARY_PATH", "CUDA toolkit", "ldconfig cache"}
