"""env/hashing.py: many files hashed on threads give what one thread gives, in the jobs' order,
with an unreadable file reported (not raised) and progress counted to the end.

Broken versions caught: results in completion order (the largest file first) instead of the
jobs' order; an OSError that escapes and loses every other result; progress that stops short."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from tfgpu_install.env.hashing import hash_files, sha256_path, workers


def _files(tmp_path: Path) -> list[tuple[str, int]]:
    jobs = []
    for i, size in enumerate((0, 1, 5 << 20, 3 << 20, 1 << 20, 12345)):
        p = tmp_path / f"f{i}"
        p.write_bytes(os.urandom(size))
        jobs.append((str(p), size))
    return jobs


def test_threads_give_each_files_digest_in_the_jobs_order(tmp_path: Path) -> None:
    jobs = _files(tmp_path)
    want = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p, _ in jobs]
    seen: list[tuple[int, int, int, int]] = []
    assert hash_files(jobs, threads=3, progress=lambda *a: seen.append(a)) == want
    assert hash_files(jobs, threads=1) == want
    assert seen[-1] == (len(jobs), sum(s for _, s in jobs), len(jobs), sum(s for _, s in jobs))
    assert [sha256_path(p) for p, _ in jobs] == want and workers() >= 1


def test_an_unreadable_file_is_its_own_result(tmp_path: Path) -> None:
    jobs = _files(tmp_path)
    gone = str(tmp_path / "gone")
    got = hash_files([jobs[2], (gone, 10), jobs[3]], threads=2)
    assert isinstance(got[1], FileNotFoundError)
    assert got[0] == hashlib.sha256(Path(jobs[2][0]).read_bytes()).hexdigest()
    assert got[2] == hashlib.sha256(Path(jobs[3][0]).read_bytes()).hexdigest()
    assert hash_files([]) == []
