"""knowledge/wheelfacts.py: what a wheel's METADATA and build_info.py say, read without running anything."""

from __future__ import annotations

from tfgpu_install.knowledge.wheelfacts import learned_row, min_glibc, parse_build_info, spec_of


def test_build_info_shapes_are_read_as_literals_only() -> None:
    assert parse_build_info("build_info = {'cuda_version': '12.5.1'}") == {"cuda_version": "12.5.1"}
    assert parse_build_info("import collections\nbuild_info = collections.OrderedDict([('cuda_version', '11.2'),"
                            " ('cudnn_version', '8')])\n") == {"cuda_version": "11.2", "cudnn_version": "8"}
    assert parse_build_info("cuda_version_number = '10.1'\nis_cuda_build = True\n") == {
        "cuda_version_number": "10.1", "is_cuda_build": True}
    # calls, names and broken text give nothing (and run nothing)
    assert parse_build_info("cuda_version = __import__('os').getcwd()\n") == {}
    assert parse_build_info("cuda_version = ((((\n") == {}


def test_spec_and_glibc() -> None:
    assert spec_of('nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"') == (
        "nvidia-cudnn-cu12", "==9.3.0.75", 'extra == "and-cuda"')
    assert spec_of("numpy (<2.0,>=1.16.0)") == ("numpy", "<2.0,>=1.16.0", "")
    assert min_glibc("manylinux_2_27_x86_64") == "2.27"
    assert min_glibc("manylinux2014_x86_64") == "2.17"
    assert min_glibc("linux_x86_64") is None


def test_exact_pins_make_an_exact_row_marked_learned() -> None:
    wheel = {"requires_dist": ['nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"',
                               'nvidia-cublas-cu12==12.5.3.2; extra == "and-cuda"', "numpy<2.2,>=1.26.0"],
             "requires_python": ">=3.10",
             "build_info": {"cuda_version": "12.5.1", "cudnn_version": "9",
                            "cuda_compute_capabilities": ["sm_60", "sm_89", "compute_90"]}}
    files = [{"py": "cp311", "upload-time": "2026-11-02T10:00:00Z"},
             {"py": "cp312", "upload-time": "2026-11-01T09:00:00Z"}]
    wf = {"filename": "tensorflow-2.23.0-cp312-cp312-manylinux_2_27_x86_64.whl", "plat": "manylinux_2_27_x86_64"}
    row = learned_row("2.23.0", files, wheel, "https://mirror.example/simple/", wf, "2026-12-04")
    assert (row["cuda"], row["cudnn"], row["pins_kind"]) == ("12.5", "9.3", "exact")
    assert row["sass"] == ["6.0", "8.9", "9.0"] and row["ptx"] == ["9.0"]
    assert row["pythons"] == ["3.11", "3.12"] and row["released"] == "2026-11-01" and row["min_glibc"] == "2.27"
    assert row["constraints"] == {"numpy": "<2.2,>=1.26.0"}
    assert row["notes"].startswith("learned, not curated: read from https://mirror.example/simple/ on 2026-12-04")
    assert row["source"].startswith("wheel:tensorflow-2.23.0-cp312") and row["unconfirmed"] == ["defects"]
