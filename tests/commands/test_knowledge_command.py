"""`tfgpu-install knowledge update|show` against a real loopback index serving a made-up TensorFlow 2.22
(a small wheel with its own METADATA and build_info.py, read with HTTP range requests), then `plan`."""

from __future__ import annotations

import io
import json
import os
import zipfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.httpserver import LoopbackServer, refused_port
from tfgpu_install.cli import main
from tfgpu_install.context import build_context
from tfgpu_install.errors import ExitCode
from tfgpu_install.knowledge.learned import overlay_path

MACHINE = ["--assume-driver", "560.35.03", "--assume-gpu", "NVIDIA GeForce RTX 4090", "--assume-python", "3.12",
           "--assume-glibc", "2.35"]
PINS = {
    "nvidia-cublas-cu12": "12.5.3.2", "nvidia-cuda-cupti-cu12": "12.5.82", "nvidia-cuda-nvcc-cu12": "12.5.82",
    "nvidia-cuda-nvrtc-cu12": "12.5.82", "nvidia-cuda-runtime-cu12": "12.5.82", "nvidia-cudnn-cu12": "9.3.0.75",
    "nvidia-cufft-cu12": "11.2.3.61", "nvidia-curand-cu12": "10.3.6.82", "nvidia-cusolver-cu12": "11.6.3.83",
    "nvidia-cusparse-cu12": "12.5.1.3", "nvidia-nccl-cu12": "2.27.7", "nvidia-nvjitlink-cu12": "12.5.82",
}


def tf_wheel(version: str, marker: Path) -> tuple[str, bytes]:
    """A made-up TensorFlow wheel: METADATA with the and-cuda extra, build_info.py, and 700 KB of
    incompressible filler so the reader must use ranges across several blocks."""
    name = f"tensorflow-{version}-cp312-cp312-manylinux_2_27_x86_64.whl"
    info = f"tensorflow-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", "Name: tensorflow", f"Version: {version}", "Requires-Python: >=3.10",
            "Requires-Dist: numpy>=1.26.0", "Requires-Dist: protobuf<8.0.0,>=6.31.1", "Provides-Extra: and-cuda"]
    meta += [f'Requires-Dist: {n}<{int(v.split(".")[0]) + 1}.0,>={v}; extra == "and-cuda"' for n, v in PINS.items()]
    build_info = ("import collections\nbuild_info = collections.OrderedDict([('cuda_version', '12.5.1'), "
                  "('cudnn_version', '9'), ('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', "
                  "'compute_90']), ('is_cuda_build', True)])\n"
                  f"__import__('os').system('touch {marker}')\n")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("tensorflow/filler.bin", os.urandom(700 << 10))
        z.writestr("tensorflow/python/platform/build_info.py", build_info)
        z.writestr(f"{info}/METADATA", "\n".join(meta) + "\n\nA made-up release for tests.\n")
    return name, buf.getvalue()


class Index:
    def __init__(self, srv: LoopbackServer, marker: Path) -> None:
        self.srv, self.marker = srv, marker  # marker: the file a build_info.py that ran would create
        self.files: list[dict[str, Any]] = []

    def release(self, version: str, uploaded: date) -> None:
        name, data = tf_wheel(version, self.marker)
        self.srv.add(f"/files/{name}", data)
        self.files.append({"filename": name, "url": f"../../files/{name}", "hashes": {}, "size": len(data),
                           "upload-time": f"{uploaded.isoformat()}T10:00:00Z"})
        doc = {"meta": {"api-version": "1.1"}, "name": "tensorflow", "files": self.files}
        self.srv.add("/simple/tensorflow/", json.dumps(doc).encode(),
                     content_type="application/vnd.pypi.simple.v1+json")


def _run(capsys: Any, env: dict[str, str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "--json"], environ=env)
    out = capsys.readouterr().out
    return code, json.loads(out)


def _choice(capsys: Any, env: dict[str, str], profile: str) -> tuple[str, str]:
    """The release chosen and the plan's reasons (where the profile's left-out releases are named)."""
    code, doc = _run(capsys, env, "plan", "--profile", profile, *MACHINE)
    assert code == ExitCode.OK, doc
    return doc["choice"]["tensorflow"], " ".join(doc["reasons"])


def test_latest_picks_a_learned_release_and_stable_waits(tmp_env: dict[str, str], tmp_path: Path, capsys: Any) -> None:
    today = date.today()
    assert _choice(capsys, tmp_env, "latest")[0] == "2.21.0"  # before: the tables' newest
    with LoopbackServer() as srv:
        index = Index(srv, tmp_path / "pwned")
        index.release("2.22.0", today)
        code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
        assert code == ExitCode.OK and doc["status"] == "updated"
        assert [r["tensorflow"] for r in doc["learned"]] == ["2.22.0"]
        ranged = [r for r in srv.requests if r.path.startswith("/files/")]
        assert ranged and all(r.range and r.range.startswith("bytes=") and not r.range.endswith("-") for r in ranged)
        assert not (tmp_path / "pwned").exists()  # build_info.py is read, never run

        choice, _ = _choice(capsys, tmp_env, "latest")
        assert choice == "2.22.0"
        choice, reasons = _choice(capsys, tmp_env, "stable")
        assert choice != "2.22.0"
        assert "2.22.0 (learned from the package index, not curated; the profile takes such a release once it is " \
               "a patch release at least 90 days old)" in reasons

        # A patch release the index dates 120 days back: stable still waits, since its age counts from the
        # day this tool first saw it too (issue #39 item 10; this test used to expect 2.22.1 at once).
        index.release("2.22.1", today - timedelta(days=120))
        code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
        assert code == ExitCode.OK and [r["tensorflow"] for r in doc["learned"]] == ["2.22.1"]
        assert doc["kept"] == ["2.22.0"]
    assert _choice(capsys, tmp_env, "stable")[0] != "2.22.1"
    # 120 days after the tool first saw it (the overlay's first_seen, as the tool wrote it then): settled.
    path = overlay_path(build_context(tmp_env).state_dir)
    path.write_text(path.read_text().replace(f'"first_seen": "{today.isoformat()}"',
                                             f'"first_seen": "{(today - timedelta(days=120)).isoformat()}"'))
    assert _choice(capsys, tmp_env, "stable")[0] == "2.22.1"

    code, doc = _run(capsys, tmp_env, "knowledge", "show")
    assert code == ExitCode.OK
    learned = {r["tensorflow"]: r for r in doc["learned"]}
    assert set(learned) == {"2.22.0", "2.22.1"}
    assert all("learned, not curated" in r["notes"] and "/simple/" in r["notes"] and "wheel:" in r["source"]
               for r in learned.values())


def test_offline_and_unreachable_keep_what_was_learned(tmp_env: dict[str, str], tmp_path: Path, capsys: Any) -> None:
    with LoopbackServer() as srv:
        Index(srv, tmp_path / "pwned").release("2.22.0", date.today())
        assert _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))[0] == ExitCode.OK
    path = overlay_path(build_context(tmp_env).state_dir)
    before = path.read_bytes()
    code, doc = _run(capsys, tmp_env, "knowledge", "update", "--offline")
    assert code == ExitCode.OK and doc["status"] == "offline" and doc["kept"] == ["2.22.0"]
    code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", f"http://127.0.0.1:{refused_port()}/simple/")
    assert code == ExitCode.DOWNLOAD and doc["status"] == "unreachable" and "could not be reached" in doc["message"]
    assert path.read_bytes() == before


@pytest.mark.parametrize("attack", ["group-writable", "oversized", "damaged", "symlink", "not-marked", "wrong-type"])
def test_a_hostile_overlay_is_refused(attack: str, tmp_env: dict[str, str], tmp_path: Path, capsys: Any) -> None:
    with LoopbackServer() as srv:
        Index(srv, tmp_path / "pwned").release("2.22.0", date.today())
        assert _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))[0] == ExitCode.OK
    path = overlay_path(build_context(tmp_env).state_dir)
    text = path.read_text()
    assert _run(capsys, tmp_env, "plan", "--profile", "latest", *MACHINE)[0] == ExitCode.OK  # believed before
    if attack == "group-writable":
        path.chmod(0o664)
    elif attack == "oversized":
        path.write_text(text + "#" * (1 << 20))
    elif attack == "damaged":
        path.write_text(text[: len(text) // 2])
    elif attack == "symlink":
        other = tmp_path / "elsewhere.yaml"
        other.write_text(text)
        path.unlink()
        path.symlink_to(other)
    elif attack == "not-marked":
        path.write_text(text.replace("learned, not curated", "curated"))
    elif attack == "wrong-type":
        path.write_text(text.replace('"min_glibc": "2.27"', '"min_glibc": ["2.27"]'))
    code, doc = _run(capsys, tmp_env, "plan", "--profile", "latest", *MACHINE)
    assert code == ExitCode.BAD_INPUT
    assert "learned knowledge refused" in doc["message"] and "knowledge update" in doc["hint"]


def test_an_index_that_is_not_pep691_json_is_bad_input(tmp_env: dict[str, str], capsys: Any) -> None:
    with LoopbackServer() as srv:
        srv.add("/simple/tensorflow/", b"<html><a href='x.whl'>x</a></html>", content_type="text/html")
        code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
    assert code == ExitCode.BAD_INPUT and "not a PEP 691 JSON file list" in doc["message"]
    assert not overlay_path(build_context(tmp_env).state_dir).exists()


@pytest.mark.parametrize("attack", ["not-a-zip", "huge-metadata"])
def test_a_hostile_wheel_is_skipped_and_nothing_is_written(attack: str, tmp_env: dict[str, str], tmp_path: Path,
                                                          capsys: Any) -> None:
    name = "tensorflow-2.22.0-cp312-cp312-manylinux_2_27_x86_64.whl"
    if attack == "not-a-zip":
        data = os.urandom(300 << 10)
    else:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:  # 64 MiB of METADATA, a few KB compressed
            z.writestr("tensorflow-2.22.0.dist-info/METADATA", b"Name: tensorflow\n" + b"A" * (64 << 20))
        data = buf.getvalue()
    doc = {"meta": {"api-version": "1.1"}, "name": "tensorflow", "files": [
        {"filename": name, "url": f"../../files/{name}", "hashes": {}, "size": len(data),
         "upload-time": "2026-01-01T00:00:00Z"}]}
    with LoopbackServer() as srv:
        srv.add(f"/files/{name}", data)
        srv.add("/simple/tensorflow/", json.dumps(doc).encode(), content_type="application/vnd.pypi.simple.v1+json")
        code, out = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
    assert code == ExitCode.OK and out["status"] == "up-to-date" and out["learned"] == []
    assert len(out["skipped"]) == 1 and out["skipped"][0].startswith("2.22.0: ")
    why = "not a readable wheel" if attack == "not-a-zip" else "bytes (a wheel's is a few KB)"
    assert why in out["skipped"][0]
    assert not overlay_path(build_context(tmp_env).state_dir).exists()


def test_an_index_date_alone_never_makes_a_release_settled(tmp_env: dict[str, str], tmp_path: Path,
                                                          capsys: Any) -> None:
    """Issue #39 item 10: `stable` picked a just-learned release at once because the index dated it
    2001-01-01. Its age counts from the later of that date and the day this tool first read it."""
    with LoopbackServer() as srv:
        Index(srv, tmp_path / "pwned").release("2.22.1", date(2001, 1, 1))
        code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
    assert code == ExitCode.OK and [r["tensorflow"] for r in doc["learned"]] == ["2.22.1"]
    choice, reasons = _choice(capsys, tmp_env, "stable")
    assert choice != "2.22.1" and "2.22.1 (learned from the package index, not curated" in reasons
    assert _choice(capsys, tmp_env, "latest")[0] == "2.22.1"  # the control: latest takes it at once


def test_a_row_the_schema_refuses_is_skipped_and_the_rest_written(tmp_env: dict[str, str], tmp_path: Path,
                                                                  capsys: Any) -> None:
    """Issue #39 item 13: one bad release (a `cp3` tag makes Python "3.") was written into learned.yaml, and
    every later plan exited 5. Now each row is validated first; the bad one is skipped with its reason."""
    with LoopbackServer() as srv:
        index = Index(srv, tmp_path / "pwned")
        index.release("2.22.0", date.today())
        name, data = tf_wheel("2.23.0", tmp_path / "pwned")
        odd = name.replace("cp312-cp312", "cp3-cp3")
        srv.add(f"/files/{odd}", data)
        index.files.append({"filename": odd, "url": f"../../files/{odd}", "hashes": {}, "size": len(data),
                            "upload-time": "2026-11-01T10:00:00Z"})
        index.release("2.22.0", date.today())  # re-publish the file list with the odd wheel in it
        code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"))
    assert code == ExitCode.OK and [r["tensorflow"] for r in doc["learned"]] == ["2.22.0"]
    assert any(s.startswith("2.23.0: its row does not validate:") and "pythons" in s for s in doc["skipped"])
    assert _choice(capsys, tmp_env, "latest")[0] == "2.22.0"  # the overlay is believed: no exit 5


def test_a_dripping_file_list_cannot_keep_it_running(tmp_env: dict[str, str], tmp_path: Path) -> None:
    """Issue #39 item 15: no overall deadline, so an index that sends a byte every 50 ms kept `knowledge
    update` going (each read arrives well within a read timeout). --timeout bounds the whole run."""
    from tests.support.httpserver import Fault
    from tests.support.install_kit import run_cli

    with LoopbackServer() as srv:
        Index(srv, tmp_path / "pwned").release("2.22.0", date.today())
        body = srv.resources["/simple/tensorflow/"].data + b" " * 4000  # ~200 s at one byte per 50 ms
        srv.add("/simple/tensorflow/", body, fault=Fault.DRIP, content_type="application/vnd.pypi.simple.v1+json")
        out = run_cli(["knowledge", "update", "--index-url", srv.url("/simple/"), "--timeout", "2", "--json"],
                      tmp_env, timeout=90)
    assert out.returncode == ExitCode.DOWNLOAD, out.stderr
    doc = json.loads(out.stdout)
    assert doc["status"] == "timed-out" and "the deadline (2 s, --timeout) passed" in doc["message"]
    assert not overlay_path(build_context(tmp_env).state_dir).exists()


def test_control_a_prompt_index_is_read_within_the_deadline(tmp_env: dict[str, str], tmp_path: Path,
                                                           capsys: Any) -> None:
    with LoopbackServer() as srv:
        Index(srv, tmp_path / "pwned").release("2.22.0", date.today())
        code, doc = _run(capsys, tmp_env, "knowledge", "update", "--index-url", srv.url("/simple/"),
                         "--timeout", "60")
    assert code == ExitCode.OK and doc["status"] == "updated"


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_a_bad_timeout_is_a_usage_error(value: str, tmp_env: dict[str, str], capsys: Any) -> None:
    assert main(["knowledge", "update", "--offline", "--timeout", value], environ=tmp_env) == ExitCode.USAGE
