"""Fixtures the install-command tests share: one local wheelhouse served over loopback HTTP
for the whole session (it is only read), and a test knowledge dir pointing at its fake TF."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support.install_kit import computing_wheelhouse, write_knowledge


@pytest.fixture(scope="session")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    wh = computing_wheelhouse(tmp_path_factory.mktemp("computing-wheelhouse"))
    with wh.serve() as srv:  # type: ignore[attr-defined]
        yield srv


@pytest.fixture(scope="module")
def knowledge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_knowledge(tmp_path_factory.mktemp("knowledge"))
