"""Serialized engines and timing caches in jit-core's shared compile cache.

A TensorRT engine holds kernels chosen for one TensorRT version and one GPU model: its key
names the graph (``graph_key``), the TensorRT version, the GPU's name and compute
capability, the builder options, the optimization profile and the ONNX export's versions.
Each entry also starts with a header naming where it was built; an entry whose header
does not match this process (copied from another machine, say) is rebuilt, never handed to
TensorRT. A truncated or corrupt entry is refused by ``DiskCache`` itself (its checksum).
Engines are executable (TensorRT runs the kernels they hold, plugins included): a remote
compile cache shares them only between machines that sign entries with one key.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Optional, Sequence, Tuple

from jit_core.cache.disk import DiskCache, graph_key
from jit_core.kit.onnx import exporter_fingerprint, exporter_versions

from .options import BuilderSettings
from .profiles import Profile

CACHE = DiskCache("tensorrt", executable=True)
#: raised whenever what an entry holds changes
ENGINE_FORMAT = 1
_MAGIC = b"JITTRT1\n"


@dataclass(frozen=True)
class Origin:
    """Where an engine was built: what must match for it to load."""

    tensorrt: str
    gpu: str
    #: compute capability, "major.minor"
    capability: str


def device_origin(tensorrt_version: str) -> Origin:
    """This process's TensorRT version and current GPU."""
    import paddle

    major, minor = paddle.device.cuda.get_device_capability()
    return Origin(tensorrt_version, str(paddle.device.cuda.get_device_name()), f"{major}.{minor}")


def engine_key(
    gm,
    example_inputs: Sequence,
    settings: BuilderSettings,
    profile: Profile,
    origin: Origin,
    frozen: bool,
) -> str:
    """The cache key of the engine built from ``gm`` with these settings, here."""
    extra = (
        "tensorrt",
        ENGINE_FORMAT,
        settings.key(),
        sorted(profile.items()),
        asdict(origin),
        "frozen" if frozen else "live parameters",
        settings.opset,
        exporter_fingerprint(),
        *exporter_versions(),
    )
    # an engine with live parameters takes them as inputs: their values are not in it
    return graph_key(gm, example_inputs, extra, values=frozen)


def timing_cache_key(origin: Origin) -> str:
    """One timing cache per TensorRT version and GPU model: what it records (kernel
    timings) holds for every graph built there."""
    h = hashlib.sha256(b"tensorrt timing cache\0")
    h.update(json.dumps(asdict(origin), sort_keys=True).encode())
    return h.hexdigest()


def pack(payload: bytes, origin: Origin) -> bytes:
    """An entry: the header naming ``origin``, then the payload."""
    header = json.dumps({"format": ENGINE_FORMAT, **asdict(origin)}, sort_keys=True)
    return _MAGIC + header.encode() + b"\n" + payload


def unpack(entry: bytes, origin: Origin) -> Tuple[Optional[bytes], str]:
    """(the payload, "") of an entry built for ``origin``, else (None, why not)."""
    if not entry.startswith(_MAGIC):
        return None, "it is not an entry of this backend"
    header, sep, payload = entry[len(_MAGIC) :].partition(b"\n")
    if not sep:
        return None, "its header is cut off"
    try:
        found = json.loads(header.decode())
    except ValueError:
        return None, "its header is unreadable"
    wanted = {"format": ENGINE_FORMAT, **asdict(origin)}
    if found != wanted:
        differ = sorted(k for k in wanted if found.get(k) != wanted[k])
        was = ", ".join(f"{k} {found.get(k)!r}" for k in differ)
        now = ", ".join(f"{k} {wanted[k]!r}" for k in differ)
        return None, f"it was built for {was}; this is {now}"
    return payload, ""
