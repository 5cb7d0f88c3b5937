"""Marked blocks in tfgpu_install/files.py, at the byte level: which marker lines pair up, what a
block's bytes are, and that put + replace-with-nothing is the identity."""

from __future__ import annotations

import pytest

from tfgpu_install.files import MarkerError, block_bytes, find_block, put_block, replace_block, scan_blocks


@pytest.mark.parametrize("data, line, words", [
    (b"a\n# >>> tfgpu-install x >>>\nb\n", 2, "without its end marker"),
    (b"# <<< tfgpu-install x <<<\n", 1, "without its begin marker"),
    (b"# >>> tfgpu-install x >>>\n# >>> tfgpu-install y >>>\n", 2, "inside the block opened on line 1"),
    (b"# >>> tfgpu-install x >>>\n# <<< tfgpu-install y <<<\n", 2, "`tfgpu-install y` without its begin"),
    (b"# >>> tfgpu-install >>>\n\n# <<< tfgpu-install x <<<\n", 3, "without its begin marker"),
])
def test_markers_out_of_place(data: bytes, line: int, words: str) -> None:
    with pytest.raises(MarkerError, match=words) as err:
        scan_blocks(data)
    assert err.value.line == line


def test_lines_that_only_mention_markers_are_not_markers() -> None:
    text = b"echo '>>> tfgpu-install >>>'\n# see >>> tfgpu-install docs\n# >>> tfgpu-install\n"
    assert scan_blocks(text) == []


def test_tags_crlf_indent_and_a_block_at_the_end_without_newline() -> None:
    data = b"x\r\n  # >>> tfgpu-install a-1 >>>\r\n  y\r\n  # <<< tfgpu-install a-1 <<<\r\n" \
           b"# >>> tfgpu-install >>>\nz\n# <<< tfgpu-install <<<"
    a, legacy = scan_blocks(data)
    assert (a.tag, a.line, a.newline, legacy.tag, legacy.line, legacy.newline) == ("a-1", 2, b"\r\n", "", 5, b"\n")
    assert data[a.start:a.end].startswith(b"  # >>>") and legacy.end == len(data)
    assert find_block(data, "b") is None


@pytest.mark.parametrize("data", [b"", b"x", b"x\n", b"x\r\ny", b"x\r", b"\xff\xfe"])
def test_put_then_remove_is_the_identity(data: bytes) -> None:
    new, before = put_block(data, "body\n", "t-1")
    assert before is None and new.startswith(data)
    span = find_block(new, "t-1")
    assert span is not None and block_bytes(new, span).startswith(b"# >>> tfgpu-install t-1 >>>")
    assert span.plus_nl == (bool(data) and not data.endswith(b"\n"))
    assert replace_block(new, span, b"") == data
    again, before = put_block(new, "other body\n", "t-1")
    assert before == block_bytes(new, span) and again.count(b">>> tfgpu-install") == 1
