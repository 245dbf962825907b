"""Which code the JIT leaves alone: Paddle's internals, the standard library, itself.

The frame hook runs eagerly every frame whose file is skipped, and the symbolic executor
refuses to inline Python functions from skipped files (Paddle functions are graph nodes).
Paddle's model zoos are user code as far as capture is concerned.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from typing import Tuple

import paddle

_OWN_TOP_LEVEL = (
    "jit_core",
    "jit_opcodes",
    "pluggy",
    "bytecode",
    "_pytest",
    "pytest",
    # what Paddle runs on its own call paths (Layer.__call__ goes through `decorator`)
    "numpy",
    "decorator",
    "google.protobuf",
    "typing_extensions",
    "opt_einsum",
    "astor",
)

#: installed packages that are never model code, matched by their folder under
#: site-packages (not imported to find it). filelock (which Ray, Hugging Face's hub and
#: PaddleNLP import) installs an audit hook for fork safety that Python calls on events
#: like ``id()`` inside the user's own frames: captured, it counted as a graph of its own
_NEVER_MODEL_CODE = frozenset({"filelock", "ray"})

#: inside paddle, these folders hold models written like user code, and this file the
#: layers composed of other layers (``TransformerEncoder``, ``MultiHeadAttention``: see
#: ``variables.layers.is_leaf_layer``) with their helpers
_PADDLE_USER_DIRS = ("vision/models", "text/models")
_PADDLE_USER_FILES = ("nn/layer/transformer.py",)


def _dir_of(module_name: str) -> str:
    """The folder of a package, or the file of a single-module distribution (whose folder
    would be all of site-packages)."""
    mod = sys.modules.get(module_name)
    path = getattr(mod, "__file__", None)
    if not path:
        return ""
    path = os.path.abspath(path)
    if hasattr(mod, "__path__"):
        return os.path.dirname(path) + os.sep
    return os.path.splitext(path)[0]


def _stdlib_dirs() -> Tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.abspath(p) + os.sep)
    return tuple(dirs)


_PADDLE_DIR = os.path.dirname(os.path.abspath(paddle.__file__)) + os.sep
_PADDLE_USER = tuple(
    _PADDLE_DIR + d.replace("/", os.sep) + os.sep for d in _PADDLE_USER_DIRS
) + tuple(_PADDLE_DIR + f.replace("/", os.sep) for f in _PADDLE_USER_FILES)
_STDLIB = _stdlib_dirs()
_SITE_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def _own_dirs() -> Tuple[str, ...]:
    out = []
    for name in _OWN_TOP_LEVEL:
        try:
            __import__(name)
        except ImportError:
            continue
        d = _dir_of(name)
        if d:
            out.append(d)
    return tuple(out)


_OWN = _own_dirs()


@functools.lru_cache(maxsize=4096)
def is_skipped_file(filename: str) -> bool:
    if not filename or filename.startswith("<frozen"):
        return True
    if filename.startswith("<"):
        # exec'd code, generated graphs and guards: only user code made by exec is captured,
        # our own generated files are recognised by their prefix
        return filename.startswith(("<jit_core", "<decorator-gen", "<__array_function__"))
    path = os.path.abspath(filename)
    if path.startswith(_PADDLE_DIR):
        return not path.startswith(_PADDLE_USER)
    if path.startswith(_OWN):
        return True
    if path.startswith(_STDLIB) and not any(m in path for m in _SITE_MARKERS):
        return True
    base = os.path.basename(os.path.dirname(path))
    if base.startswith("jit_backend_"):
        return True
    for marker in _SITE_MARKERS:
        at = path.find(marker)
        if at >= 0 and path[at + len(marker) :].split(os.sep, 1)[0] in _NEVER_MODEL_CODE:
            return True
    return False


_JIT_DIRS = tuple(d for d in (_dir_of("jit_core"), _dir_of("jit_opcodes")) if d)


@functools.lru_cache(maxsize=4096)
def is_jit_file(filename: str) -> bool:
    """Code of the JIT itself: its packages, its backends, the code it generates."""
    if filename.startswith("<"):
        return filename.startswith("<jit_core")
    path = os.path.abspath(filename)
    return path.startswith(_JIT_DIRS) or os.path.basename(os.path.dirname(path)).startswith(
        "jit_backend_"
    )


def is_library_module(module_name: str) -> bool:
    """Modules whose attributes are taken as fixed (no guard on each function read)."""
    top = module_name.split(".", 1)[0]
    if top in (
        "paddle",
        "math",
        "operator",
        "builtins",
        "numpy",
        "functools",
        "itertools",
        "collections",
        "typing",
        "warnings",
    ):
        return True
    mod = sys.modules.get(module_name)
    f = getattr(mod, "__file__", None)
    if f is None:
        return top in sys.builtin_module_names
    return is_skipped_file(f)
