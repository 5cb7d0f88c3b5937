"""The download size in the confirmation: asked of a real loopback index (PEP 691 JSON with PEP 700
sizes, and a PEP 503 HTML wheelhouse where only the file's Content-Length tells), never guessed."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.httpserver import LoopbackServer
from tests.support.wheelhouse import WheelSpec, build_wheelhouse
from tfgpu_install.fetch.wheelsizes import JSON_TYPE, UNPACK_RATIO, estimate, lookup, split_pins, target_tags

TAG = target_tags("3.11")[0]  # cp311-cp311-<this machine's best platform>


def _page(files: list[dict[str, object]]) -> bytes:
    return json.dumps({"meta": {"api-version": "1.1"}, "name": "x", "files": files}).encode()


def test_pep700_sizes_are_summed_and_the_wheel_is_never_fetched() -> None:
    with LoopbackServer() as srv:
        srv.add("/simple/tensorflow/", _page([
            {"filename": f"tensorflow-2.16.1-{TAG}.whl", "url": "/f/tf.whl", "size": 600_000_000},
            {"filename": "tensorflow-2.16.1-cp311-cp311-win_amd64.whl", "url": "/f/win.whl", "size": 1},
            {"filename": f"tensorflow-2.15.0-{TAG}.whl", "url": "/f/old.whl", "size": 2},
        ]), content_type=JSON_TYPE)
        srv.add("/simple/nvidia-cudnn-cu12/", _page([
            {"filename": "nvidia_cudnn_cu12-8.9.7.29-py3-none-manylinux1_x86_64.whl", "url": "/f/c.whl",
             "size": 700_000_000},
            {"filename": "nvidia_cudnn_cu12-8.9.7.29-py3-none-any.whl", "url": "/f/any.whl", "size": 3},
        ]), content_type=JSON_TYPE)
        sizes = lookup(["tensorflow==2.16.1", "nvidia-cudnn-cu12==8.9.7.29", "numpy<2"],
                       srv.url("/simple"), "3.11")
        fetched = {r.path for r in srv.requests}
    assert sizes.counted == ["tensorflow==2.16.1", "nvidia-cudnn-cu12==8.9.7.29"]
    assert sizes.download == 1_300_000_000  # the manylinux wheel preferred over the -any one
    assert sizes.not_counted == ["numpy<2"] and sizes.unknown == []
    assert not any(p.startswith("/f/") for p in fetched)
    line = sizes.line()
    assert "download: 1.2 GiB for 2 pinned wheel(s)" in line
    assert f"~2.4 GiB on disk (estimate: {UNPACK_RATIO:g}x the download)" in line
    assert "not counted: 1 requirement(s)" in line


def test_what_the_index_does_not_tell_is_unknown() -> None:
    with LoopbackServer() as srv:
        srv.add("/simple/a/", _page([{"filename": f"a-1.0-{TAG}.whl", "url": "/f/a.whl", "size": -5}]),
                content_type=JSON_TYPE)  # a lying size; the HEAD below finds no file either
        srv.add("/simple/b/", b"{not json", content_type=JSON_TYPE)
        srv.add("/simple/c/", _page([{"filename": "c-1.0-cp27-cp27mu-linux_x86_64.whl", "url": "/f/c.whl",
                                      "size": True}]), content_type=JSON_TYPE)
        sizes = lookup(["a==1.0", "b==1.0", "c==1.0", "d==1.0"], srv.url("/simple"), "3.11")
    assert sizes.unknown == ["a==1.0", "b==1.0", "c==1.0", "d==1.0"] and sizes.download == 0
    assert sizes.line().startswith("download: unknown")


def test_a_pep503_page_without_sizes_is_asked_the_files_length(tmp_path: Path) -> None:
    wh = build_wheelhouse(tmp_path, [WheelSpec("absl-py", "2.1.0", {"absl/__init__.py": b"x = 1\n" * 5000})])
    with wh.serve() as srv:  # type: ignore[attr-defined]
        sizes = lookup(["absl-py==2.1.0"], srv.url, "3.11")
    assert sizes.counted == ["absl-py==2.1.0"]
    assert sizes.download == wh.wheels[0].stat().st_size


def test_only_exact_pins_are_counted() -> None:
    pins, rest = split_pins(["tensorflow==2.16.1", "numpy>=1.23,<2", "x==1.*", "  y==2 "])
    assert pins == [("tensorflow", "2.16.1"), ("y", "2")]
    assert rest == ["numpy>=1.23,<2", "x==1.*"]


def test_an_unreachable_index_leaves_everything_unknown() -> None:
    from tests.support.httpserver import refused_port

    sizes = lookup(["a==1", "b==2", "c==3"], f"http://127.0.0.1:{refused_port()}/simple", "3.11")
    assert sizes.unknown == ["a==1", "b==2", "c==3"] and sizes.counted == []


def test_without_exact_pins_nothing_is_asked_and_the_size_is_unknown() -> None:
    with LoopbackServer() as srv:
        sizes = lookup(["numpy<2", "tensorflow>=2.16"], srv.url("/simple"), "3.11")
        assert srv.requests == []
    assert sizes.line() == "download: unknown (no exact pins: uv picks the versions as it installs)"


def test_a_warm_cache_is_no_download_and_linked_files_no_new_space() -> None:
    """#43 item 4: with a warm cache the confirmation said "download: 2.3 GiB ... ~4.7 GiB on disk" while
    77 MiB were fetched. uv names what it has to download; only that is asked of the index and counted,
    and the cached wheels' files, linked into the env from uv's cache, take no new space."""
    with LoopbackServer() as srv:
        srv.add("/simple/tensorflow/", _page([{"filename": f"tensorflow-2.16.1-{TAG}.whl", "url": "/f/tf.whl",
                                               "size": 600_000_000}]), content_type=JSON_TYPE)
        srv.add("/simple/six/", _page([{"filename": "six-1.17.0-py2.py3-none-any.whl", "url": "/f/six.whl",
                                        "size": 11_000}]), content_type=JSON_TYPE)
        warm = estimate(["six==1.17.0"], ["tensorflow==2.16.1"], True, srv.url("/simple"), "3.11")
        asked = {r.path for r in srv.requests}
        copied = estimate(["six==1.17.0"], ["tensorflow==2.16.1"], False, srv.url("/simple"), "3.11")
        all_cached = estimate([], ["tensorflow==2.16.1", "six==1.17.0"], True, srv.url("/simple"), "3.11")
    assert warm.download == 11_000 and "/simple/tensorflow/" not in asked
    assert warm.line() == ("download: 10.7 KiB for 1 wheel(s) not in uv's cache (1 more in it already); ~21.5 KiB "
                           "more on disk (estimate: 2x the download; the cached wheels' files are linked into the "
                           "env from uv's cache: already on disk)")
    assert "~1.1 GiB more on disk" in copied.line() and "uv copies its cache's files" in copied.line()
    assert all_cached.line().startswith("download: none (all 2 wheel(s) are in uv's cache); ~0 B more on disk")
