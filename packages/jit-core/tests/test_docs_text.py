"""What a reader of the repository's text meets: a README short enough to be read, no
words that only mean something inside the process that wrote the code, and one version
for every package that CHANGELOG.md describes.

These check files of the checkout, not of an installed package (CONTRIBUTING.md says why
each rule exists)."""

from __future__ import annotations

import glob
import os
import re
from typing import List, Tuple

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

README_MAX_LINES = 250
#: the text a user or contributor reads
TEXT_FILES = [
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "docs/*.rst",
    "packages/*/README.md",
    "examples/*/README.md",
    "conformance/**/README.md",
]
#: steps and sessions of the work that made the code, and numbers of its issue tracker:
#: a dated measurement or a plain statement says the same to anyone (nox's sessions are
#: fine, and so are ONNX Runtime's)
PROCESS_WORDS = re.compile(
    r"\bstops? \d+"
    r"|\bthis\s+session\b"
    r"|\bsessions? of (?:work|development)\b"
    r"|\bissues? #?\d+",
    re.IGNORECASE,
)


def _text_files() -> List[str]:
    found = set()
    for pattern in TEXT_FILES:
        found.update(glob.glob(os.path.join(ROOT, pattern), recursive=True))
    return sorted(found)


def _version_of(pyproject: str) -> str:
    with open(pyproject) as f:
        found = re.search(r'^version = "([^"]+)"', f.read(), re.M)
    assert found, f"{pyproject} names no version"
    return found.group(1)


def test_readme_is_short():
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = f.read().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines, over {README_MAX_LINES}: measured tables belong "
        "in docs/performance.rst, the history of changes in CHANGELOG.md"
    )


def test_the_text_files_exist():
    names = {os.path.relpath(p, ROOT) for p in _text_files()}
    assert {"README.md", "CONTRIBUTING.md", "CHANGELOG.md", "docs/performance.rst"} <= names


@pytest.mark.parametrize("path", _text_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_no_words_of_the_work_process(path):
    hits: List[Tuple[int, str]] = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            hits += [(number, m.group(0)) for m in PROCESS_WORDS.finditer(line)]
    assert not hits, f"{os.path.relpath(path, ROOT)}: " + ", ".join(
        f"line {n}: {word!r}" for n, word in hits
    )


def test_the_pattern_catches_what_it_is_for():
    # (spelt apart, so that a search of the repository for them finds nothing here)
    for text in ("at stop  49", "Since stop  38", "this  session's change", "issue 35's target"):
        assert PROCESS_WORDS.search(text.replace("  ", " ")), text
    for text in ("nox sessions", "an ONNX Runtime session", "stop_gradient", "stop 'x'"):
        assert not PROCESS_WORDS.search(text), text


def test_every_package_has_the_version_the_changelog_describes():
    pyprojects = sorted(glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml")))
    pyprojects += sorted(glob.glob(os.path.join(ROOT, "examples", "*", "pyproject.toml")))
    versions = {os.path.relpath(p, ROOT): _version_of(p) for p in pyprojects}
    inits = glob.glob(os.path.join(ROOT, "packages", "*", "src", "*", "__init__.py"))
    inits += glob.glob(os.path.join(ROOT, "examples", "*", "src", "*", "__init__.py"))
    for init in inits:
        with open(init) as f:
            found = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M)
        if found:
            versions[os.path.relpath(init, ROOT)] = found.group(1)
    version = versions["packages/jit-core/pyproject.toml"]
    assert {v for v in versions.values()} == {version}, versions

    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        headings = re.findall(r"^## \[([^\]]+)\]", f.read(), re.M)
    assert headings[:1] == ["Unreleased"], "CHANGELOG.md opens with an [Unreleased] section"
    assert headings[1:2] == [version], (
        f"the newest version in CHANGELOG.md is {headings[1:2]}, the packages' {version}"
    )
