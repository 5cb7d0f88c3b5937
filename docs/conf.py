"""Sphinx configuration: MyST Markdown, the Furo theme. Built in CI with `sphinx-build -W --keep-going`
(every warning an error); nothing here reaches the network (no intersphinx)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tfgpu_install import __version__  # noqa: E402

project = "tfgpu-install"
author = "tfgpu-install developers"
copyright = "tfgpu-install developers (MIT)"
version = release = __version__

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "man", "README.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]
nitpicky = True
# `--flag` stays two hyphens (not an en dash), quotes stay straight: text users copy
smartquotes = False

html_theme = "furo"
html_title = f"tfgpu-install {__version__}"
html_static_path: list[str] = []
html_show_sourcelink = False
