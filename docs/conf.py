"""Sphinx configuration. Build with ``./dev docs``; warnings fail the build."""

from __future__ import annotations

import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:0] = [
    os.path.join(ROOT, "packages", "jit-core", "src"),
    os.path.join(ROOT, "packages", "jit-opcodes", "src"),
]

project = "jit-core"
author = "the jit-core authors"
copyright = "2026, the jit-core authors"
# the packages' version (CHANGELOG.md), read from where it is set
with open(os.path.join(ROOT, "packages", "jit-core", "pyproject.toml")) as _f:
    release = re.findall(r'^version = "([^"]+)"', _f.read(), re.M)[0]

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
# The docs build does not install Paddle: the API pages only need the signatures and
# docstrings of jit_core itself.
autodoc_mock_imports = ["paddle", "numpy"]
autodoc_typehints = "description"
autodoc_member_order = "bysource"

exclude_patterns = ["_build"]
html_theme = "furo"
html_title = "jit-core"
