"""The persistent compile cache: artifacts of slow compilations kept on disk, per backend.

Backends ask for it by namespace (``DiskCache("onnxrt")``) and store bytes under a key
that they build with ``graph_key``: the generated graph code, the values of the parameters
and buffers it reads, the input specs, and the versions of everything that shapes the
artifact. Entries live under the platform's cache directory (``$XDG_CACHE_HOME/jit_core``
or ``~/.cache/jit_core`` on Linux, ``~/Library/Caches/jit_core`` on macOS,
``%LOCALAPPDATA%\\jit_core`` on Windows); ``JIT_CORE_CACHE_DIR`` moves it.

Every entry carries a header with its length and SHA-256: a truncated or corrupt entry is
reported with one warning, removed and rebuilt, never trusted. Writes go to a temporary
file in the same folder and are renamed into place, so a reader sees a whole entry or
none, and two processes writing the same key do not clobber each other.

With a remote store configured (``JIT_CORE_REMOTE_CACHE``, ``jit_core.set_remote_cache``,
see ``remote_cache``) the disk is the first tier: a read that misses it asks the store
(and keeps what it gets on disk where it was signed), and a write goes to both. What a
namespace holds (its ``kind``: ``"model"`` by default, ``"native"`` code, or ``"hint"``)
decides what may be read from the store without a signing key. ``stats`` counts per namespace
where the entries this process asked for came from, and ``last_origin()`` says it for the
latest one of this thread (``explain()`` shows it per graph).
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import platform
import struct
import sys
import tempfile
import threading
import types
import warnings
from collections import Counter
from typing import Any, Dict, Iterable, Optional

import numpy as np
import paddle

log = logging.getLogger("jit_core.cache")

ENV_VAR = "JIT_CORE_CACHE_DIR"
_MAGIC = b"JITCACHE1\n"
_HEADER = struct.Struct(">Q32s")  # payload length, sha256 of the payload


def cache_root() -> str:
    """The folder that holds every backend's cache."""
    env = os.environ.get(ENV_VAR)
    if env:
        return os.path.abspath(os.path.expanduser(env))
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "jit_core")


#: namespace -> counts of this process's reads and writes: ``disk`` and ``remote`` hits,
#: ``misses``, ``stores`` (written locally), ``remote_stores``
stats: Dict[str, Counter] = {}
_origin = threading.local()


def last_origin() -> Optional[str]:
    """Where the entry this thread last asked for came from: "disk", "remote", or "built"
    (a miss, then a store); None before any."""
    return getattr(_origin, "value", None)


def clear_origin() -> None:
    _origin.value = None


#: the counts of each namespace folder, added to its ``STATS_FILE`` at exit for
#: ``python -m jit_core.cache info``
_unsaved: Dict[str, Counter] = {}
_unsaved_lock = threading.Lock()
STATS_FILE = "stats.jsonl"


def _count(namespace: str, what: str, directory: str) -> None:
    stats.setdefault(namespace, Counter())[what] += 1
    with _unsaved_lock:
        if not _unsaved:
            atexit.register(_save_counts)
        _unsaved.setdefault(directory, Counter())[what] += 1


def _save_counts() -> None:
    """One line per namespace folder and process: appends of a few bytes do not interleave,
    so no lock is needed between processes."""
    with _unsaved_lock:
        pending = dict(_unsaved)
        _unsaved.clear()
    for directory, counts in pending.items():
        try:
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, STATS_FILE), "a", encoding="utf-8") as f:
                f.write(json.dumps(dict(counts), sort_keys=True) + "\n")
        except OSError:
            pass  # counts are a convenience


#: path -> payload of the entries being written to disk in the background (``put_later``,
#: and remote hits kept on disk)
_pending: Dict[str, bytes] = {}
_writers: list = []
_pending_lock = threading.Lock()


def _built_here() -> None:
    """A miss the caller is now storing: ``last_origin()`` says "built here"."""
    if getattr(_origin, "value", None) == "miss":
        _origin.value = "built"


def wait_for_writes() -> None:
    """Return once the entries written in the background (``put_later``, the local copies
    of remote hits) are on disk."""
    while True:
        with _pending_lock:
            if not _writers:
                return
            writer = _writers[0]
        writer.join()


class DiskCache:
    """The cache of one namespace. ``kind`` says what its entries are, for the remote tier's
    trust rules (``remote_cache``): ``"model"`` (the default: they decide what a graph
    computes, e.g. ONNX models), ``"native"`` (code that is loaded: TVM's libraries;
    ``executable=True`` says the same) or ``"hint"`` (they only change speed, and what they
    lead to is checked where they are used)."""

    def __init__(
        self,
        namespace: str,
        root: Optional[str] = None,
        executable: bool = False,
        kind: Optional[str] = None,
    ):
        from .remote import KINDS, MODEL, NATIVE

        kind = kind or (NATIVE if executable else MODEL)
        if kind not in KINDS:
            raise ValueError(f"unknown cache entry kind {kind!r}; known: {', '.join(KINDS)}")
        self.namespace = namespace
        self._root = root
        self.kind = kind
        self.executable = kind == NATIVE

    @property
    def directory(self) -> str:
        # read the environment on each use: tests and users may move it at run time
        return os.path.join(self._root or cache_root(), self.namespace)

    def path(self, key: str) -> str:
        return os.path.join(self.directory, key[:2], key)

    def get(self, key: str) -> Optional[bytes]:
        """The bytes stored under ``key``: from the disk, else from the remote store (then
        kept on disk); None when absent, or when corrupt (removed)."""
        with _pending_lock:
            payload = _pending.get(self.path(key))
        if payload is None:
            payload = self.get_local(key)
        if payload is not None:
            _count(self.namespace, "disk", self.directory)
            _origin.value = "disk"
            return payload
        tier = _remote()
        payload = None if tier is None else tier.fetch(self.namespace, key, self.kind)
        if payload is not None:
            _count(self.namespace, "remote", self.directory)
            _origin.value = "remote"
            if tier.signed:
                # unsigned, it is used this once and asked for again next time: a copy on
                # disk would outlive turning the store off
                self._put_local_later(key, payload)
            return payload
        _count(self.namespace, "misses", self.directory)
        _origin.value = "miss"
        log.debug("miss %s/%s", self.namespace, key)
        return None

    def put(self, key: str, data: bytes) -> Optional[str]:
        """Store ``data`` on disk (atomically) and in the remote store; returns the path,
        or None when the disk refused (a cache that cannot be written only costs time)."""
        path = self.put_local(key, data)
        _built_here()
        tier = _remote()
        if tier is not None and tier.store_entry(self.namespace, key, data, self.kind):
            _count(self.namespace, "remote_stores", self.directory)
        return path

    def put_later(self, key: str, data: bytes) -> None:
        """``put`` in a writer thread, so that a first call does not wait for it (hashing,
        writing and syncing ResNet18's ONNX Runtime model: 0.18 s of its 0.85 s). Until it
        is written, ``get`` in this process serves it from memory; ``wait_for_writes()``
        waits for it, and the interpreter does before it exits."""
        _built_here()
        self._write_later(key, data, remote=True)

    def _put_local_later(self, key: str, payload: bytes) -> None:
        """Keep a remote hit on disk without making the compile wait for it (hashing and
        syncing a ResNet18 model: 0.2 s, as long as fetching it)."""
        self._write_later(key, payload, remote=False)

    def _write_later(self, key: str, payload: bytes, remote: bool) -> None:
        # (the thread is not a daemon: the interpreter lets it finish before exiting)
        path = self.path(key)
        # the store as it is now, with its signing key: not the one configured when the
        # thread gets to it
        tier = _remote() if remote else None

        def write() -> None:
            try:
                self.put_local(key, payload)
                if tier is not None and tier.store_entry(self.namespace, key, payload, self.kind):
                    _count(self.namespace, "remote_stores", self.directory)
            finally:
                with _pending_lock:
                    if _pending.get(path) is payload:
                        _pending.pop(path, None)
                    _writers.remove(thread)

        thread = threading.Thread(target=write, name="jit_core cache write")
        with _pending_lock:
            _pending[path] = payload
            _writers.append(thread)
        thread.start()

    def get_local(self, key: str) -> Optional[bytes]:
        """The bytes stored under ``key`` on this disk (the remote tier is not asked)."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            warnings.warn(
                f"jit_core: cannot read cache entry {path}: {e}", RuntimeWarning, stacklevel=2
            )
            return None
        payload = _unpack(blob)
        if payload is None:
            log.info("refused %s/%s on disk: corrupt or truncated", self.namespace, key)
            warnings.warn(
                f"jit_core: cache entry {path} is corrupt or truncated; it is rebuilt",
                RuntimeWarning,
                stacklevel=2,
            )
            try:
                os.unlink(path)
            except OSError:
                pass
            return None
        log.debug("disk hit %s/%s", self.namespace, key)
        try:
            # the time of last use, which ``python -m jit_core.cache prune`` goes by
            os.utime(path)
        except OSError:
            pass
        return payload

    def put_local(self, key: str, data: bytes) -> Optional[str]:
        """Store ``data`` on this disk only, atomically."""
        path = self.path(key)
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(_MAGIC)
                    f.write(_HEADER.pack(len(data), hashlib.sha256(data).digest()))
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            warnings.warn(
                f"jit_core: cannot write cache entry {path}: {e}", RuntimeWarning, stacklevel=2
            )
            return None
        _count(self.namespace, "stores", self.directory)
        log.debug("disk store %s/%s (%d bytes)", self.namespace, key, len(data))
        return path


def _remote():
    from .remote import remote_tier

    return remote_tier()


def _unpack(blob: bytes) -> Optional[bytes]:
    head = len(_MAGIC) + _HEADER.size
    if len(blob) < head or not blob.startswith(_MAGIC):
        return None
    length, digest = _HEADER.unpack(blob[len(_MAGIC) : head])
    payload = blob[head:]
    if len(payload) != length or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


def _dynamic_dims(gm):
    from ..kit.shape_dispatch import dynamic_dims

    return dynamic_dims(gm)


def graph_key(
    gm,
    example_inputs: Iterable[Any],
    extra: Iterable[Any] = (),
    values: bool = True,
    tensor_names: bool = True,
) -> str:
    """A key for what a backend builds from ``gm``: its code and the objects the code
    names, its parameters and buffers (names, shapes, dtypes, and with ``values`` their
    contents: for artifacts that bake them in), the example inputs' specs, the Paddle
    version and ``extra`` (the backend's own versions and options).

    Without ``values`` the parameters are fed on each run; with ``tensor_names`` the
    artifact names them by the names Paddle gave the tensors, which Paddle numbers per
    process (``conv2d_3.w_0``), so such a key holds only where the layers were made in the
    same order. A backend that feeds them by position (or by state-dict name) passes
    ``tensor_names=False`` and its entries hold in every process."""
    h = hashlib.sha256()

    def add(*parts: Any) -> None:
        for p in parts:
            h.update(repr(p).encode())
            h.update(b"\0")

    add("jit_core graph", paddle.__version__, paddle.version.commit, gm.run_code)
    # a build for every size of some dimensions is not one for the example's shape
    add("dynamic", sorted(_dynamic_dims(gm).items()))
    for name, value in sorted(gm.code_globals().items()):
        add(name, _describe(value))
    # the code names a called layer only by attribute (``self.act(x)``): what it computes
    # is its class and configuration (a ReLU and a Sigmoid under one name must not share)
    for node in gm.graph.nodes:
        if node.op == "call_module":
            layer = gm
            for part in node.target.split("."):
                layer = getattr(layer, part)
            for path, sub in layer.named_sublayers(include_self=True):
                add(node.target, path, _describe(type(sub)), _configuration(sub))
    for name, t in sorted(gm.state_dict().items()):
        if values:
            # baked in: the contents matter, not the name Paddle gave the tensor (folded
            # constants get a fresh one each time)
            add(name, list(t.shape), str(t.dtype))
            h.update(_tensor_bytes(t))
        elif tensor_names:
            add(name, t.name, list(t.shape), str(t.dtype))
        else:
            add(name, list(t.shape), str(t.dtype))
    for t in example_inputs:
        add(list(t.shape), str(t.dtype), bool(t.stop_gradient))
    add(*extra)
    return h.hexdigest()


def _describe(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    mod = getattr(value, "__module__", None)
    qual = getattr(value, "__qualname__", None)
    if mod and qual:
        return f"{mod}.{qual}"
    return repr(value)


#: per-instance bookkeeping of a layer that says nothing about what it computes (Paddle
#: numbers layer names per process)
_LAYER_BOOKKEEPING = {"_full_name", "_built", "_init_in_dynamic_mode"}
_SIMPLE = (int, float, str, bool, type(None))


def _configuration(layer) -> list:
    """A layer's plain settings (``_negative_slope``, ``_stride``, ``_approximate``...)."""

    def simple(v: Any) -> bool:
        if isinstance(v, (list, tuple)):
            return all(simple(i) for i in v)
        return isinstance(v, _SIMPLE)

    return sorted(
        (k, repr(v)) for k, v in vars(layer).items() if k not in _LAYER_BOOKKEEPING and simple(v)
    )


def _tensor_bytes(t):
    return np.ascontiguousarray(host_array(t))  # hashed through the buffer protocol


def host_array(t):
    """A numpy array of a Paddle tensor's values: a view of a CPU tensor's memory where
    DLPack gives one (45 MB of ResNet18's weights: 3 ms instead of 27), else a copy
    (``t.numpy()``: a GPU tensor, bfloat16, an older numpy). Read it, never write it."""
    try:
        return np.from_dlpack(t.detach())
    except Exception:  # noqa: BLE001 - whatever DLPack refuses, numpy() copies
        return t.numpy()


def machine_fingerprint() -> str:
    """The CPU an artifact was built for (model and feature flags), for backends whose
    artifacts are specific to it (tuned kernels, runtime-optimized models)."""
    parts = [platform.machine(), platform.system()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            info = f.read()
        for field in ("model name", "flags", "Features"):
            for line in info.splitlines():
                if line.startswith(field):
                    parts.append(line.split(":", 1)[1].strip())
                    break
    except OSError:
        parts.append(platform.processor())
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


__all__ = [
    "DiskCache",
    "cache_root",
    "clear_origin",
    "wait_for_writes",
    "host_array",
    "graph_key",
    "last_origin",
    "machine_fingerprint",
    "stats",
    "ENV_VAR",
]
