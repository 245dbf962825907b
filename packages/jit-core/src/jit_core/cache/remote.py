"""The remote tier of the compile cache: a store that many machines share.

Off unless ``JIT_CORE_REMOTE_CACHE`` names a store (``redis://host:6379/0``,
``rediss://...``) or ``jit_core.set_remote_cache(url)`` does. Stores are plugins
(``jit_register_cache_stores``): the URL's scheme picks one; Redis is built in.

What this module adds to a store is trust and fault handling:

- every entry travels with a head (size, SHA-256 of the payload, when it was made, whether
  it is executable) and, when ``JIT_CORE_CACHE_KEY`` (or the file named by
  ``JIT_CORE_CACHE_KEY_FILE``) holds a key, an HMAC-SHA256 over its name and checksum. With
  a key, an entry without a valid signature is refused (one warning) and rebuilt;
- without a key nothing is written, and what is read depends on what an entry is (its
  namespace's ``kind``), since anyone who can write to the store could have written it:

  - ``HINT`` entries only make a build faster or slower, and what they lead to is checked
    where they are used (``auto``'s choice of backend; TVM's tuning records, which its
    backend reads only when ``signed``, as it keeps them on disk): read;
  - ``MODEL`` entries decide what a graph computes (ONNX models): a forged one would give
    wrong results, so they are read only with the opt-in ``JIT_CORE_CACHE_TRUST_UNSIGNED=1``;
  - ``NATIVE`` entries are code we load (TVM libraries, TensorRT engines): never read;

  and nothing read without a key is copied to the local disk, so turning the remote tier
  off also turns off whatever it brought;
- a payload whose length or checksum does not match its head is refused and not written
  to the local disk, so corruption does not spread;
- a store that fails (down, slower than the timeout, refusing writes because it is full)
  is switched off for the rest of the process after one warning: the compile goes on with
  the local disk. Writes that fail because the store is full stop writes only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import threading
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, Optional, Set, Tuple

log = logging.getLogger("jit_core.cache")

URL_ENV = "JIT_CORE_REMOTE_CACHE"
KEY_ENV = "JIT_CORE_CACHE_KEY"
KEY_FILE_ENV = "JIT_CORE_CACHE_KEY_FILE"
#: "1": without a key, read MODEL entries anyway (each use is warned about once)
TRUST_ENV = "JIT_CORE_CACHE_TRUST_UNSIGNED"
TIMEOUT_ENV = "JIT_CORE_REMOTE_TIMEOUT"

#: what an entry is: what a reader without a signing key may do with it (see above)
HINT = "hint"
MODEL = "model"
NATIVE = "native"
KINDS = (HINT, MODEL, NATIVE)
#: seconds one call to the store may take before the store counts as down
DEFAULT_TIMEOUT = 0.5
_HEAD_VERSION = 1
_SIGNED = b"jit_core remote cache v1\0"


class StoreFull(Exception):
    """A store refused a write for lack of space (stores raise it; reads go on)."""


class StoreRefused(Exception):
    """A store refused this client (no password, a wrong one): the message says so in words,
    naming what to change; it is shown as it is, without the client's own error."""


class CacheStore:
    """What a store plugin provides: entries by name, each a small head and a payload.

    Any exception a method raises makes jit-core stop using the store for the rest of the
    process (``StoreFull`` from ``put`` stops writes only; the message of ``StoreRefused`` is
    shown to users as it is, for refusals they can fix). Writing a name must replace its
    entry atomically: a reader sees the old entry or the new one, never a mix."""

    def get(self, name: str) -> Optional[Tuple[bytes, bytes]]:
        """(head, payload) stored under ``name``, or None."""
        raise NotImplementedError

    def put(self, name: str, head: bytes, payload: bytes) -> None:
        raise NotImplementedError

    def heads(self, prefix: str = "") -> Iterator[Tuple[str, bytes]]:
        """(name, head) of every entry whose name starts with ``prefix``."""
        raise NotImplementedError

    def delete(self, name: str) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


#: a store factory: ``factory(url, timeout) -> CacheStore``
StoreFactory = Callable[[str, float], CacheStore]


@dataclass
class Head:
    size: int
    sha256: str
    created: float
    executable: bool
    signature: str = ""

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "v": _HEAD_VERSION,
                "size": self.size,
                "sha256": self.sha256,
                "created": self.created,
                "executable": self.executable,
                "signature": self.signature,
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def parse(cls, data: bytes) -> Optional[Head]:
        try:
            d = json.loads(data.decode())
            if d.get("v") != _HEAD_VERSION:
                return None
            return cls(
                int(d["size"]),
                str(d["sha256"]),
                float(d["created"]),
                bool(d["executable"]),
                str(d.get("signature") or ""),
            )
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            return None


def signing_key() -> Optional[bytes]:
    """The key entries are signed with: ``JIT_CORE_CACHE_KEY``, else the contents of the
    file ``JIT_CORE_CACHE_KEY_FILE`` names; None when neither is set."""
    return _signing_key()[0]


def _signing_key() -> Tuple[Optional[bytes], str]:
    """The key and where it came from, in words for messages ("" without a key)."""
    key = os.environ.get(KEY_ENV)
    if key:
        return key.encode(), KEY_ENV
    path = os.environ.get(KEY_FILE_ENV)
    if path:
        try:
            with open(os.path.expanduser(path), "rb") as f:
                data = f.read().strip()
        except OSError as e:
            raise ValueError(f"{KEY_FILE_ENV}={path!r} cannot be read: {e}") from e
        if not data:
            raise ValueError(f"{KEY_FILE_ENV}={path!r} is empty")
        return data, f"{KEY_FILE_ENV}={path}"
    return None, ""


def _trust_unsigned() -> bool:
    text = os.environ.get(TRUST_ENV, "").strip().lower()
    if text in ("", "0", "no", "false", "off"):
        return False
    if text in ("1", "yes", "true", "on"):
        return True
    raise ValueError(f"{TRUST_ENV}={text!r}: set it to 1 to read unsigned models, or unset it")


def sign(key: bytes, name: str, sha256_hex: str) -> str:
    return hmac.new(
        key, _SIGNED + name.encode() + b"\0" + sha256_hex.encode(), "sha256"
    ).hexdigest()


def stores() -> Dict[str, StoreFactory]:
    """URL scheme -> store factory, from every plugin's ``jit_register_cache_stores``."""
    from .. import plugins

    return plugins.cache_stores()


def open_store(url: str, timeout: Optional[float] = None) -> CacheStore:
    """The store a URL names; a clear error for an unknown scheme."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    found = stores()
    if scheme not in found:
        known = ", ".join(f"{s}://" for s in sorted(found)) or "none"
        raise ValueError(
            f"remote cache {_redact(url)!r}: unknown store; installed stores take {known}"
        )
    return found[scheme](url, _timeout() if timeout is None else timeout)


def _timeout() -> float:
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={text!r} is not a number of seconds") from None
    if not value > 0:
        raise ValueError(f"{TIMEOUT_ENV}={text!r} must be positive")
    return value


def _redact(url: str) -> str:
    """The URL without a password (``redis://:secret@host``)."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    return f"{scheme}://***@{rest.rsplit('@', 1)[1]}"


class RemoteTier:
    """One process's use of one store, with the trust and fault rules above."""

    def __init__(
        self,
        url: str,
        store: CacheStore,
        key: Optional[bytes],
        key_source: str = KEY_ENV,
        trust_unsigned: bool = False,
        url_source: str = URL_ENV,
    ):
        self.url = url
        self.store = store
        self.key = key
        #: where the key came from (``JIT_CORE_CACHE_KEY``, ``JIT_CORE_CACHE_KEY_FILE=path``)
        self.key_source = key_source if key is not None else ""
        self.trust_unsigned = trust_unsigned and key is None
        #: where the URL came from, for messages that ask to change it
        self.url_source = url_source
        self.readable = True
        self.writable = key is not None
        self._lock = threading.Lock()
        self._said: Set[str] = set()
        if key is None:
            models = (
                f"ONNX models are read unsigned ({TRUST_ENV}=1) but not kept on disk"
                if self.trust_unsigned
                else f"ONNX models are not read from it unsigned ({TRUST_ENV}=1 would)"
            )
            self._say_once(
                "no-key",
                f"jit_core: remote cache {_redact(url)} without a signing key "
                f"({KEY_ENV} or {KEY_FILE_ENV}): it is read-only, for backend choices; "
                f"{models}; native libraries are neither loaded from it "
                "nor shared",
                logging.WARNING,
            )

    @property
    def signed(self) -> bool:
        """Whether what ``fetch`` returns was checked against a key (only then is it kept
        on the local disk)."""
        return self.key is not None

    def _say_once(self, what: str, message: str, level: Optional[int] = None) -> None:
        with self._lock:
            if what in self._said:
                return
            self._said.add(what)
        if level is None:
            warnings.warn(message, RuntimeWarning, stacklevel=4)
        else:
            log.log(level, "%s", message)

    def _failed(self, doing: str, e: BaseException, writes_only: bool = False) -> None:
        with self._lock:
            if writes_only:
                self.writable = False
            else:
                self.readable = self.writable = False
        what = "writes to it" if writes_only else "it"
        if isinstance(e, StoreRefused):
            why = f"{e} (the URL comes from {self.url_source})"
        else:
            why = f"failed while {doing} ({type(e).__name__}: {str(e)[:200]})"
        self._say_once(
            "failed",
            f"jit_core: remote cache {_redact(self.url)} {why}; the rest of this process "
            f"leaves {what} and uses the local disk",
        )
        log.info("store off: %s", why)

    def _readable(self, name: str, kind: str) -> bool:
        """Whether this tier may read an entry of ``kind`` (the keyless rules above)."""
        if not self.readable:
            return False
        if self.key is not None or kind == HINT or (kind == MODEL and self.trust_unsigned):
            return True
        log.debug("not read unsigned: %s (%s)", name, kind)
        return False

    def fetch(self, namespace: str, key: str, kind: str = MODEL) -> Optional[bytes]:
        """The payload of a valid entry, or None (absent, refused, corrupt, store down)."""
        if kind not in KINDS:
            raise ValueError(f"unknown entry kind {kind!r}; known: {', '.join(KINDS)}")
        name = f"{namespace}/{key}"
        if not self._readable(name, kind):
            return None
        try:
            found = self.store.get(name)
        except Exception as e:  # noqa: BLE001 - any store failure means: go local
            self._failed(f"reading {name}", e)
            return None
        if found is None:
            log.debug("remote miss %s", name)
            return None
        head_bytes, payload = found
        head = Head.parse(head_bytes)
        if head is None or head.size != len(payload):
            self._corrupt(name)
            return None
        digest = hashlib.sha256(payload).hexdigest()
        if digest != head.sha256:
            self._corrupt(name)
            return None
        if self.key is not None and not hmac.compare_digest(
            head.signature, sign(self.key, name, digest)
        ):
            log.info("refused %s: not signed with the key of %s", name, self.key_source)
            self._say_once(
                "signature",
                f"jit_core: remote cache entry {name} is not signed with this machine's key "
                f"(from {self.key_source}); it is refused and rebuilt here",
            )
            return None
        if kind == NATIVE and not head.executable:
            # a payload shared as data must not become code we load
            log.info("refused %s: shared as data, asked for as native code", name)
            return None
        if self.key is None and kind == MODEL:
            self._say_once(
                "unsigned-model",
                f"jit_core: remote cache entry {name} is an ONNX model read without a signing "
                f"key ({TRUST_ENV}=1): whoever can write to {_redact(self.url)} decides what "
                "it computes; it is not kept on the local disk",
            )
        log.debug("remote hit %s%s", name, "" if self.signed else " (unsigned)")
        return payload

    def _corrupt(self, name: str) -> None:
        log.info("refused %s: corrupt or truncated", name)
        self._say_once(
            "corrupt",
            f"jit_core: remote cache entry {name} is corrupt or truncated; it is rebuilt here "
            "(and replaced in the store)",
        )

    def store_entry(self, namespace: str, key: str, payload: bytes, kind: str = MODEL) -> bool:
        """Write an entry (signed); False when the store is not written (no key, failed)."""
        if not self.writable:
            return False
        name = f"{namespace}/{key}"
        digest = hashlib.sha256(payload).hexdigest()
        head = Head(len(payload), digest, time.time(), kind == NATIVE)
        head.signature = sign(self.key, name, digest) if self.key is not None else ""
        try:
            self.store.put(name, head.to_bytes(), payload)
        except StoreFull as e:
            self._failed(f"writing {name}", e, writes_only=True)
            return False
        except Exception as e:  # noqa: BLE001 - any store failure means: go local
            self._failed(f"writing {name}", e)
            return False
        log.debug("remote store %s (%d bytes)", name, len(payload))
        return True


_lock = threading.Lock()
#: the tier in use: unset until first asked (then read from the environment)
_UNSET = object()
_tier = _UNSET


def set_remote_cache(
    url: Optional[str], timeout: Optional[float] = None, trust_unsigned: Optional[bool] = None
) -> None:
    """Share the compile cache through the store ``url`` names (``redis://host:6379/0``);
    None turns the remote tier off. Overrides ``JIT_CORE_REMOTE_CACHE``.

    Without a signing key, ``trust_unsigned=True`` reads ONNX models from the store anyway
    (default: ``JIT_CORE_CACHE_TRUST_UNSIGNED``). The store is opened now, so a bad URL or a
    missing client fails here; a store that is down is noticed at the first read and only
    warned about."""
    global _tier
    tier = None
    if url:
        tier = _open_tier(url, timeout, trust_unsigned, "set_remote_cache()")
    with _lock:
        old, _tier = _tier, tier
    if isinstance(old, RemoteTier):
        old.store.close()


def remote_tier() -> Optional[RemoteTier]:
    """The tier in use, opened from ``JIT_CORE_REMOTE_CACHE`` on first use."""
    global _tier
    with _lock:
        if _tier is not _UNSET:
            return _tier  # type: ignore[return-value]
    url = os.environ.get(URL_ENV)
    tier = None
    if url:
        try:
            tier = _open_tier(url, None, None, URL_ENV)
        except Exception as e:  # noqa: BLE001 - a bad setting must not stop compiles
            warnings.warn(
                f"jit_core: {URL_ENV}={_redact(url)!r} is not used: {e}",
                RuntimeWarning,
                stacklevel=3,
            )
    with _lock:
        if _tier is _UNSET:
            _tier = tier
        return _tier  # type: ignore[return-value]


def _open_tier(
    url: str, timeout: Optional[float], trust_unsigned: Optional[bool], url_source: str
) -> RemoteTier:
    key, key_source = _signing_key()
    trust = _trust_unsigned() if trust_unsigned is None else bool(trust_unsigned)
    store = open_store(url, timeout)
    return RemoteTier(url, store, key, key_source, trust, url_source)


def reset() -> None:
    """Forget the tier (the next use reads the environment again); for tests."""
    global _tier
    with _lock:
        old, _tier = _tier, _UNSET
    if isinstance(old, RemoteTier):
        old.store.close()


__all__ = [
    "CacheStore",
    "HINT",
    "Head",
    "MODEL",
    "NATIVE",
    "RemoteTier",
    "StoreFull",
    "StoreRefused",
    "open_store",
    "remote_tier",
    "reset",
    "set_remote_cache",
    "signing_key",
]
