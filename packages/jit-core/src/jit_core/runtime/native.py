"""The compiled tensor check of guards: ``tensor_check.cc``, built once per machine,
Python and Paddle build with the C++ compiler found here, against the headers Paddle ships
for its extensions.

A guard checks the exact type, dtype and shape of every tensor argument on every call.
Read from Python, ``Tensor.dtype`` and ``Tensor.is_same_shape`` cost ~0.17 us a tensor
together; the compiled check reads them from the C++ tensor in ~0.02 us. Where it cannot be
built (no compiler, no Python headers, a platform other than Linux) or disagrees with
Paddle's own answers on a panel of tensors at load, guards keep the Python checks: the
same decisions, only slower. ``status()`` says which, and why.

The built module lives under ``$XDG_CACHE_HOME/jit_core/native`` (``JIT_CORE_NATIVE_DIR``
moves it), in a folder named by a hash of the source, the compiler, Python and the Paddle
build: the first process on a machine builds it (a few seconds), the others load it.
``JIT_CORE_NATIVE_GUARDS=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from typing import Any, Callable, Dict, List, Optional

import paddle

log = logging.getLogger("jit_core.guards")

ENABLE_ENV = "JIT_CORE_NATIVE_GUARDS"
DIR_ENV = "JIT_CORE_NATIVE_DIR"
MODULE = "_jit_tensor_check"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensor_check.cc")
#: the longest a build may take before it counts as failed
BUILD_TIMEOUT_S = 120

_lock = threading.Lock()
_module: Any = None
_reason: Optional[str] = None  # why there is no module, once a load was tried
_dtype_codes: Dict[Any, Optional[int]] = {}


def enabled() -> bool:
    return os.environ.get(ENABLE_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def native_root() -> str:
    """The folder of built modules (not the compile cache's: its folder is often a
    temporary one, and this build outlives any of them)."""
    env = os.environ.get(DIR_ENV)
    if env:
        return os.path.abspath(os.path.expanduser(env))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "jit_core", "native")


def tensor_is() -> Optional[Callable[..., bool]]:
    """``tensor_is(value, type, shape, dtype_code) -> bool``, or None where guards keep
    the Python checks (``status()`` says why)."""
    if not enabled():
        return None
    module = _load()
    return None if module is None else module.tensor_is


def dtype_code(dtype: Any) -> Optional[int]:
    """The integer ``tensor_is`` compares for ``dtype`` (Paddle's C++ ``DataType``), read
    from a tensor of that dtype; None where there is no module or no such tensor."""
    module = _load()
    if module is None:
        return None
    try:
        return _dtype_codes[dtype]
    except KeyError:
        pass
    except TypeError:  # an unhashable dtype: never expected, never cached
        return None
    try:
        code: Optional[int] = module.dtype_code(paddle.empty([0], dtype=dtype))
    except Exception:  # noqa: BLE001 - a dtype Paddle cannot make a tensor of: Python checks
        code = None
    _dtype_codes[dtype] = code
    return code


def status() -> str:
    """Whether guards check tensors with the compiled check, and if not, why."""
    if not enabled():
        return f"off ({ENABLE_ENV}=0): tensor guards run in Python"
    module = _load()
    if module is None:
        return f"unavailable, tensor guards run in Python: {_reason}"
    return f"on: {module.__file__}"


def _load() -> Any:
    global _module, _reason
    if _module is not None or _reason is not None:
        return _module
    with _lock:
        if _module is None and _reason is None:
            try:
                module = _build_or_open()
                try:
                    problem = _self_test(module)
                except Exception as exc:  # noqa: BLE001 - any surprise: not trusted
                    problem = f"its panel of tensors ({type(exc).__name__}: {exc})"
                if problem:
                    raise _Unavailable(f"it disagrees with Paddle on {problem}")
                _module = module
                log.info("tensor guards: compiled check %s", module.__file__)
            except _Unavailable as exc:
                _reason = str(exc)
            except OSError as exc:  # a build folder that cannot be written, ...
                _reason = f"{type(exc).__name__}: {exc}"
            if _reason is not None:
                log.info("tensor guards stay in Python: %s", _reason)
    return _module


class _Unavailable(Exception):
    pass


def _toolchain() -> Dict[str, str]:
    if not sys.platform.startswith("linux"):
        raise _Unavailable(f"built on Linux only (this is {sys.platform})")
    cxx = os.environ.get("CXX") or next(
        (c for c in ("c++", "g++", "clang++") if shutil.which(c)), ""
    )
    if not cxx or not shutil.which(cxx.split()[0]):
        raise _Unavailable("no C++ compiler (install g++, or name one in CXX)")
    py_include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(py_include, "Python.h")):
        raise _Unavailable(f"no Python.h in {py_include} (Debian: apt install python3-dev)")
    paddle_dir = os.path.dirname(os.path.abspath(paddle.__file__))
    include = os.path.join(paddle_dir, "include")
    if not os.path.exists(os.path.join(include, "paddle", "utils", "pybind.h")):
        raise _Unavailable(f"this Paddle ships no extension headers ({include})")
    try:
        from paddle.base import libpaddle
    except ImportError as exc:
        raise _Unavailable(f"no paddle.base.libpaddle to link with: {exc}") from None
    return {
        "cxx": cxx,
        "py_include": py_include,
        "include": include,
        "lib": os.path.abspath(libpaddle.__file__),
    }


def _key(tools: Dict[str, str], source: bytes) -> str:
    lib = os.stat(tools["lib"])
    parts = [
        source,
        tools["cxx"].encode(),
        sys.version.encode(),
        str(sysconfig.get_config_var("EXT_SUFFIX")).encode(),
        paddle.__version__.encode(),
        str(getattr(paddle.version, "commit", "")).encode(),
        f"{tools['lib']}:{lib.st_size}:{int(lib.st_mtime)}".encode(),
    ]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def _build_or_open() -> Any:
    tools = _toolchain()
    try:
        with open(SOURCE, "rb") as f:
            source = f.read()
    except OSError as exc:
        raise _Unavailable(f"its source is missing from this install: {exc}") from None
    folder = os.path.join(native_root(), f"tensor_check-{_key(tools, source)}")
    path = os.path.join(folder, MODULE + str(sysconfig.get_config_var("EXT_SUFFIX")))
    failed = os.path.join(folder, "build-failed.txt")
    if not os.path.exists(path):
        if os.path.exists(failed):
            with open(failed, encoding="utf-8", errors="replace") as f:
                said = _one_line(f.read())
                raise _Unavailable(f"its build failed before (see {failed}): {said}")
        _build(tools, folder, path, failed)
    spec = importlib.util.spec_from_file_location(MODULE, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a file we just wrote
        raise _Unavailable(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        raise _Unavailable(f"cannot load {path}: {exc}") from None
    module.init(paddle.Tensor)
    return module


def _build(tools: Dict[str, str], folder: str, path: str, failed: str) -> None:
    os.makedirs(folder, exist_ok=True)
    lib_dir = os.path.dirname(tools["lib"])
    # another process may build the same folder at once: each writes its own file and
    # renames it into place, so a reader only ever sees a whole module
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so.tmp")
    os.close(fd)
    command = [
        *tools["cxx"].split(),
        "-O2",
        "-shared",
        "-fPIC",
        "-std=c++17",
        "-w",
        f"-I{tools['include']}",
        f"-I{os.path.join(tools['include'], 'third_party')}",
        f"-I{tools['py_include']}",
        SOURCE,
        "-o",
        tmp,
        f"-L{lib_dir}",
        f"-l:{os.path.basename(tools['lib'])}",
        f"-Wl,-rpath,{lib_dir}",
    ]
    log.info("tensor guards: building the compiled check once (%s)", " ".join(command))
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        os.unlink(tmp)
        raise _Unavailable(f"the compiler did not run: {exc}") from None
    if done.returncode != 0:
        os.unlink(tmp)
        text = f"{' '.join(command)}\nexit status {done.returncode}\n{done.stderr}"
        with open(failed, "w", encoding="utf-8") as f:
            f.write(text)
        said = _one_line(done.stderr) or f"{command[0]} exited with {done.returncode}"
        raise _Unavailable(f"the build failed (see {failed}): {said}")
    os.replace(tmp, path)


def _one_line(text: str) -> str:
    """The end of a compiler's output, on one line."""
    return " ".join(text.split())[-300:]


def _panel() -> List[Any]:
    tensors: List[Any] = []
    for dtype in ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"):
        for shape in ([], [0], [3], [2, 3], [3, 2], [2, 1, 3]):
            tensors.append(paddle.zeros(shape, dtype=dtype))
    tensors.append(paddle.zeros([4, 6]).reshape([6, 4]))  # a reshaped tensor
    tensors.append(paddle.zeros([4, 6])[:, 1:3])  # a view
    # a subclass of Tensor; a constant one, as a random initializer would draw from the
    # user's stream (this runs at a first capture, and wherever status() is asked)
    zeros = paddle.nn.initializer.Constant(0.0)
    tensors.append(paddle.create_parameter([2, 3], "float32", default_initializer=zeros))
    return tensors


def _self_test(module: Any) -> str:
    """The first case where the compiled check's answer is not Paddle's own, or ""."""
    tensors = _panel()
    specs = []
    for t in tensors:
        code = module.dtype_code(t)
        specs.append((type(t), tuple(t.shape), t.dtype, code))
    # paddle.Tensor(): a tensor that holds no memory, of shape [0]
    for value in tensors + [paddle.Tensor(), None, 3, 2.5, [1], (8, 16)]:
        for cls, shape, dtype, code in specs:
            want = type(value) is cls and tuple(value.shape) == shape and value.dtype == dtype
            got = module.tensor_is(value, cls, shape, code)
            if got is not want:
                what = f"{type(value).__name__} {getattr(value, 'shape', '')}"
                return f"{what} against {cls.__name__} {list(shape)} {dtype}: {got}"
    return ""


__all__ = ["dtype_code", "enabled", "native_root", "status", "tensor_is"]
