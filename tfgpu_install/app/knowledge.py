"""`knowledge update` / `knowledge show`: learn TensorFlow releases the tables lack from the package
index (PEP 691 JSON file list; METADATA and build_info.py of one wheel each by HTTP range requests),
and keep them as the learned overlay (knowledge/learned.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Optional, TypedDict, cast
from urllib.parse import urljoin

from tfgpu_install.context import Context
from tfgpu_install.errors import BadInputError, DownloadError, TfgpuError
from tfgpu_install.knowledge.learned import overlay_path, read_overlay, validated_text
from tfgpu_install.knowledge.model import Knowledge, release_key
from tfgpu_install.knowledge.wheelfacts import Deadline, IndexFile, LearnedRow

DEFAULT_INDEX = "https://pypi.org/simple/"
PEP691 = "application/vnd.pypi.simple.v1+json"
MAX_INDEX_BYTES = 64 << 20  # tensorflow's file list is ~2 MB
MAX_NEW = 12  # releases learned in one run (each costs a few range requests)
DEFAULT_TIMEOUT = 300.0  # seconds for the whole run (issue #39 item 15): --timeout


class LearnedRelease(TypedDict):
    tensorflow: str
    released: str
    source: str


@dataclass
class UpdateReport:
    index_url: str
    status: str  # "updated" | "up-to-date" | "offline" | "unreachable" | "timed-out"
    learned: list[LearnedRelease] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "2.22.0: why"
    kept: list[str] = field(default_factory=list)  # learned versions already in the overlay
    overlay: str = ""
    message: str = ""


def index_url_for(ctx: Context, given: Optional[str]) -> str:
    url = given or ctx.environ.get("UV_INDEX_URL") or ctx.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX
    return url if url.endswith("/") else url + "/"


def _file_list(session: Any, url: str, deadline: Deadline) -> list[IndexFile]:
    from tfgpu_install.knowledge.wheelfacts import read_body

    r = session.get(url, headers={"Accept": PEP691}, timeout=deadline.timeout(60), stream=True)
    try:
        if r.status_code != 200:
            raise DownloadError(f"{url}: the index answered {r.status_code}", hint="check --index-url")
        body = read_body(r.raw, MAX_INDEX_BYTES, deadline, f"reading the file list {url}")
        ctype = r.headers.get("Content-Type", "")
    finally:
        r.close()
    if len(body) > MAX_INDEX_BYTES:
        raise BadInputError(f"{url}: the file list is larger than {MAX_INDEX_BYTES >> 20} MiB")
    if "json" not in ctype:
        raise BadInputError(f"{url}: not a PEP 691 JSON file list (Content-Type {ctype!r})",
                            hint="use an index that serves application/vnd.pypi.simple.v1+json "
                                 "(PyPI, devpi, recent Artifactory/Nexus)")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise BadInputError(f"{url}: the file list is not valid JSON") from exc
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        raise BadInputError(f"{url}: the file list has no `files` list")
    return [_index_file(f) for f in files
            if isinstance(f, dict) and isinstance(f.get("filename"), str) and isinstance(f.get("url"), str)]


def _index_file(f: dict[str, object]) -> IndexFile:
    """The fields of a PEP 691 file entry read here, each kept only with its type (a JSON edge: the index's)."""
    out: IndexFile = {"filename": str(f["filename"]), "url": str(f["url"])}
    size, yanked, uploaded = f.get("size"), f.get("yanked"), f.get("upload-time")
    if isinstance(size, int) and not isinstance(size, bool):
        out["size"] = size
    if isinstance(yanked, (bool, str)):
        out["yanked"] = yanked
    if isinstance(uploaded, str):
        out["upload-time"] = uploaded
    return out


def _by_version(files: list[IndexFile], base: str) -> dict[str, list[IndexFile]]:
    """Linux x86_64 CPython wheels of final releases and pre-releases (2.22.0rc0), not yanked, by version;
    URLs made absolute."""
    from tfgpu_install.knowledge.wheelfacts import FINAL_RE, PRE_RE, WHEEL_RE

    out: dict[str, list[IndexFile]] = {}
    for f in files:
        m = WHEEL_RE.match(f["filename"])
        if not m or f.get("yanked") or "linux" not in m["plat"] or not m["plat"].endswith("x86_64"):
            continue
        if not (FINAL_RE.match(m["ver"]) or PRE_RE.match(m["ver"])):
            continue
        if f.get("size", 0) <= 0:
            continue
        out.setdefault(m["ver"], []).append({**f, "name": m["name"], "ver": m["ver"], "py": m["py"], "abi": m["abi"],
                                             "plat": m["plat"], "url": urljoin(base, f["url"])})
    return out


def _learn_one(ctx: Context, session: Any, version: str, files: list[IndexFile], index: str,
               today: str, allow_http: bool, deadline: Deadline) -> LearnedRow:
    from tfgpu_install.fetch.download import check_url
    from tfgpu_install.knowledge.wheelfacts import RangeFile, learned_row, read_wheel

    newest = max(files, key=lambda f: int(f["py"][2:]))
    check_url(newest["url"], allow_http=allow_http)
    wheel = read_wheel(RangeFile(session, newest["url"], newest["size"], deadline=deadline))
    row: LearnedRow = {**learned_row(version, files, wheel, index, newest, today), "first_seen": today}
    if wheel["build_info"].get("is_cuda_build") is False:
        raise ValueError("a CPU-only build (its build_info.py says is_cuda_build False)")
    if not row["cuda"]:
        raise ValueError(f"its GPU facts cannot be established: {row['sources']['cuda']}")
    if not row["sass"] and not row["ptx"]:
        raise ValueError(f"its GPU facts cannot be established: {row['sources']['sass']}")
    if not row["min_glibc"]:
        raise ValueError(f"platform tag {newest['plat']} names no glibc")
    return row


def _old_rows(path: Path, report: UpdateReport) -> list[LearnedRow]:
    """The rows already learned (as plain data), or none when the old overlay is refused."""
    try:
        kept = read_overlay(path)
    except BadInputError as exc:
        report.message = f"the old overlay was refused and is replaced: {exc.message}"
        return []
    report.kept = [r.tensorflow for r in kept]
    if not kept:
        return []
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    # Rows read_overlay has just checked, each as a learned row: written back as they are.
    return [cast("LearnedRow", r) for r in doc.get("releases", []) if isinstance(r, dict)]


def _seen(rows: list[LearnedRow], day: str) -> list[LearnedRow]:
    """Rows learned before the tool kept the day it first saw a release: their clock starts now."""
    return [r if r.get("first_seen") else {**r, "first_seen": day} for r in rows]


def _learn_new(ctx: Context, session: Any, page: str, files: list[IndexFile], newest: str,
               rows: dict[str, LearnedRow], report: UpdateReport, day: str, allow_http: bool,
               pre: bool, deadline: Deadline) -> None:
    """Read each release newer than `newest` that `rows` lacks (newest first, at most MAX_NEW); a
    pre-release only with `pre`, else it is listed as skipped."""
    import requests  # lazily, as everywhere: commands that need no network start fast

    from tfgpu_install.knowledge.model import is_prerelease
    from tfgpu_install.knowledge.wheelfacts import DeadlineExceeded, RangeError

    versions = sorted((kv for kv in _by_version(files, page).items() if release_key(kv[0]) > release_key(newest)),
                      key=lambda kv: release_key(kv[0]), reverse=True)[:MAX_NEW]
    for version, vfiles in versions:
        if version in rows:
            continue
        if is_prerelease(version) and not pre:
            report.skipped.append(f"{version}: pre-release (use --pre)")
            continue
        if report.status == "timed-out":
            report.skipped.append(f"{version}: not read: the deadline ({deadline.seconds:g} s) had passed")
            continue
        try:
            row = _learn_one(ctx, session, version, vfiles, report.index_url, day, allow_http, deadline)
            validated_text([row], report.index_url, day)  # a row the schema refuses is skipped, not written
        except BadInputError as exc:
            report.skipped.append(f"{version}: its row does not validate: {exc.message}")
            continue
        except DeadlineExceeded as exc:
            report.status, report.message = "timed-out", f"stopped: {exc}; what was learned before is kept"
            report.skipped.append(f"{version}: not read: {exc}")
            continue
        except (RangeError, ValueError, KeyError, OSError, TfgpuError, requests.RequestException) as exc:
            # one unreadable wheel must not cost the others
            report.skipped.append(f"{version}: {exc}")
            continue
        rows[version] = row
        report.learned.append({"tensorflow": version, "released": rows[version]["released"],
                               "source": rows[version]["source"]})


def update(ctx: Context, curated: Knowledge, index_url: Optional[str], offline: bool,
           today: Optional[date] = None, pre: bool = False, timeout: float = DEFAULT_TIMEOUT) -> UpdateReport:
    """Learn the releases newer than every curated one from the index; write the overlay."""
    index = index_url_for(ctx, index_url)
    path = overlay_path(ctx.state_dir)
    report = UpdateReport(index_url=index, status="offline", overlay=str(path))
    old = _old_rows(path, report)
    if offline:
        report.message = report.message or "offline: the index was not asked; the learned releases kept as they are"
        return report
    import requests

    from tfgpu_install.fetch.download import check_url, make_session

    allow_http = index_url is not None
    check_url(index, allow_http=allow_http)
    from tfgpu_install.knowledge.wheelfacts import Deadline, DeadlineExceeded

    deadline = Deadline(timeout)
    session = make_session(ctx, index, retries=1, allow_http=allow_http)
    page = urljoin(index, "tensorflow/")
    try:
        files = _file_list(session, page, deadline)
    except requests.RequestException as exc:  # offline, proxy down, DNS, refused, timed out
        report.status = "unreachable"
        report.message = (f"the index {index} could not be reached ({type(exc).__name__}); "
                          "the learned releases are kept as they are")
        return report
    except DeadlineExceeded as exc:
        report.status = "timed-out"
        report.message = f"stopped: {exc}; the learned releases are kept as they are"
        return report
    newest = max((r.tensorflow for r in curated.releases), key=release_key, default="0.0.0")
    day = (today or date.today()).isoformat()
    rows = {str(r.get("tensorflow")): r for r in _seen(old, day)}
    _learn_new(ctx, session, page, files, newest, rows, report, day, allow_http, pre, deadline)
    if report.status != "timed-out":
        report.status = "updated" if report.learned else "up-to-date"
    if report.learned:
        _write(path, sorted(rows.values(), key=lambda r: release_key(str(r["tensorflow"])), reverse=True), index, day)
    return report


def _write(path: Path, rows: list[LearnedRow], index: str, day: str) -> None:
    """Validate the whole overlay first, then replace it atomically (temp file + rename): a reader sees the
    old file or the new one, and never one the next plan would refuse (issue #39 item 13)."""
    from tfgpu_install.files import atomic_write

    text = validated_text(rows, index, day)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    atomic_write(path, text, mode=0o600)
