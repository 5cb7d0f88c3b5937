"""Which run's result the controller last received from each host (its `ledger_run`), kept in the
state dir. The node keeps a ledger of what each run changed; the controller passes these ids back,
so a change whose result was lost on the way (a network partition, a killed controller) is reported
by the next run instead of reading "ok" forever."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Iterable, Optional

from tfgpu_install.errors import BadInputError
from tfgpu_install.files import atomic_write
from tfgpu_install.guard import bounded, trust

# A run id as the controller makes them (new_run_id); anything else in the file is dropped.
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_MAX_BYTES = 16 << 20  # 1000 hosts hold ~60 KB


def new_run_id() -> str:
    return uuid.uuid4().hex


def path_in(state_dir: Path) -> Path:
    return state_dir / "fleet" / "reported-runs.json"


def load(state_dir: Path) -> dict[str, str]:
    """host -> the last run id its result reached us with; {} when none (a first run, another controller:
    the nodes then report any change they hold once). A file another user could write is refused."""
    path = path_in(state_dir)
    trust.require(path, state_dir, "the fleet's reported-runs file")
    try:
        doc = json.loads(bounded.read_bytes(str(path), "fleet reported runs", _MAX_BYTES))
    except (OSError, ValueError, BadInputError):
        return {}  # unreadable: the nodes report what they hold once more (over-reporting, never under)
    if not isinstance(doc, dict):
        return {}
    return {h: r for h, r in doc.items() if isinstance(h, str) and isinstance(r, str) and _RUN_ID.match(r)}


def record(state_dir: Path, received: Iterable[tuple[str, Optional[str]]]) -> None:
    """Keep the ledger run of every host whose result arrived with one (others keep their old entry)."""
    got = {h: r for h, r in received if r is not None and _RUN_ID.match(r)}
    if not got:
        return
    runs = load(state_dir)
    runs.update(got)
    path = path_in(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(runs, indent=0, sort_keys=True) + "\n")
