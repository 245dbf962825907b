"""The built-in remote cache store: Redis (``redis://host:port/db``, ``rediss://`` for TLS).

It registers through ``jit_register_cache_stores`` like any outside store. The ``redis``
client is imported only when a store is opened (``pip install jit-core[redis]``).

An entry is one Redis list: its head, then its payload in chunks of ``CHUNK`` bytes (far
below Redis's 512 MB per value, and small enough that no single command holds the server
long). A write replaces the list inside MULTI/EXEC and a read is one LRANGE, so concurrent
writers of one name leave one whole entry and a reader never sees a mix.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional, Tuple
from urllib.parse import urlparse

from ..hookspecs import hookimpl
from .remote import CacheStore, StoreFull, StoreRefused

#: bytes per list element
CHUNK = 4 * 1024 * 1024
#: every key this store writes starts with it (``clear`` removes nothing else)
PREFIX = "jit_core:"
_INSTALL = "pip install jit-core[redis]"


def _client_module():
    try:
        import redis
    except ImportError:
        raise ImportError(f"the redis remote cache needs the redis client: `{_INSTALL}`") from None
    return redis


class RedisStore(CacheStore):
    def __init__(self, url: str, timeout: float):
        redis = _client_module()
        self._errors = redis.exceptions
        try:
            parsed = urlparse(url)
            self._has_password = bool(parsed.password)
        except ValueError:
            self._has_password = False
        try:
            self._db = redis.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                # a failure is the tier's business: it goes local at once, no retry here
                retry_on_timeout=False,
                health_check_interval=0,
            )
        except ValueError as e:
            raise ValueError(f"not a Redis URL: {e}") from None

    @contextlib.contextmanager
    def _authenticated(self):
        """Redis's refusals of a missing or wrong password, as one line that says what to
        change (its own reads "HELLO must be called with the client already
        authenticated...")."""
        try:
            yield
        except self._errors.AuthenticationError as e:
            raise StoreRefused(self._refusal(e)) from None
        except self._errors.ResponseError as e:
            if str(e).startswith(("NOAUTH", "WRONGPASS")):
                raise StoreRefused(self._refusal(e)) from None
            raise

    def _refusal(self, e: Exception) -> str:
        if not self._has_password:
            return (
                "needs a password, and its URL gives none: "
                "redis://:PASSWORD@host:port/db (or redis://USER:PASSWORD@...)"
            )
        return f"refused the user name or password in its URL (Redis says: {str(e)[:120]})"

    def get(self, name: str) -> Optional[Tuple[bytes, bytes]]:
        with self._authenticated():
            parts = self._db.lrange(PREFIX + name, 0, -1)
        if not parts:
            return None
        return parts[0], b"".join(parts[1:])

    def put(self, name: str, head: bytes, payload: bytes) -> None:
        chunks = [payload[i : i + CHUNK] for i in range(0, len(payload), CHUNK)] or [b""]
        try:
            with self._authenticated(), self._db.pipeline(transaction=True) as pipe:
                pipe.delete(PREFIX + name)
                pipe.rpush(PREFIX + name, head)
                for chunk in chunks:
                    pipe.rpush(PREFIX + name, chunk)
                pipe.execute()
        except self._errors.ResponseError as e:
            # maxmemory reached under the noeviction policy (the whole transaction is
            # refused: nothing half-written stays)
            full = getattr(self._errors, "OutOfMemoryError", ())
            if isinstance(e, full) or "OOM" in str(e) or "maxmemory" in str(e):
                raise StoreFull(str(e)) from e
            raise

    def heads(self, prefix: str = "") -> Iterator[Tuple[str, bytes]]:
        with self._authenticated():
            for key in self._db.scan_iter(match=_glob(PREFIX + prefix) + "*", count=500):
                head = self._db.lindex(key, 0)
                if head is not None:
                    yield key.decode()[len(PREFIX) :], head

    def delete(self, name: str) -> None:
        with self._authenticated():
            self._db.delete(PREFIX + name)

    def close(self) -> None:
        self._db.close()


def _glob(text: str) -> str:
    """``text`` with Redis's glob characters escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


@hookimpl
def jit_register_cache_stores(register):
    register("redis", RedisStore, "Redis (the redis client: jit-core[redis])")
    register("rediss", RedisStore, "Redis over TLS (the redis client: jit-core[redis])")
