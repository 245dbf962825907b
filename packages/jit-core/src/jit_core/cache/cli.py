"""``python -m jit_core.cache``: look at and trim the compile cache.

    python -m jit_core.cache info [--remote]       sizes and hit/miss counts per backend
    python -m jit_core.cache ls [--remote]         every entry, newest use first
    python -m jit_core.cache prune --older-than 30d [--remote]
    python -m jit_core.cache clear [--remote]

Without ``--remote`` the local disk is meant (``JIT_CORE_CACHE_DIR`` or the platform's
cache folder); with it, the store ``JIT_CORE_REMOTE_CACHE`` names (or ``--url``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from .disk import STATS_FILE, cache_root
from .remote import URL_ENV, Head, StoreRefused, _redact, open_store

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_KEY = re.compile(r"^[0-9a-f]{16,}$")


@dataclass
class Entry:
    namespace: str
    key: str
    size: int
    #: last use (local: the file's modification time, refreshed on each hit) or creation
    #: (remote)
    when: float
    path: str = ""


def parse_age(text: str) -> float:
    """``30d`` -> seconds (units s, m, h, d, w)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an age: a number and one of s, m, h, d, w (e.g. 30d)"
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


def local_entries(root: str) -> Iterator[Entry]:
    """Every entry on disk: ``<root>/<namespace>/<2 hex>/<key>``."""
    if not os.path.isdir(root):
        return
    for namespace in sorted(os.listdir(root)):
        folder = os.path.join(root, namespace)
        if not os.path.isdir(folder):
            continue
        for shard in sorted(os.listdir(folder)):
            sub = os.path.join(folder, shard)
            if len(shard) != 2 or not os.path.isdir(sub):
                continue
            for key in sorted(os.listdir(sub)):
                path = os.path.join(sub, key)
                if not _KEY.match(key):
                    continue  # a temporary file of a write in progress
                try:
                    info = os.stat(path)
                except OSError:
                    continue
                yield Entry(namespace, key, info.st_size, info.st_mtime, path)


def _folder_size(path: str) -> int:
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(folder, name))
            except OSError:
                pass
    return total


def local_counts(root: str, namespace: str) -> Counter:
    """The hit/miss counts every process left in the namespace's stats file."""
    total: Counter = Counter()
    try:
        with open(os.path.join(root, namespace, STATS_FILE), encoding="utf-8") as f:
            for line in f:
                try:
                    total.update({k: int(v) for k, v in json.loads(line).items()})
                except (ValueError, AttributeError, TypeError):
                    continue
    except OSError:
        pass
    return total


def _store(url: Optional[str]):
    url = url or os.environ.get(URL_ENV)
    if not url:
        raise SystemExit(f"jit_core.cache: --remote needs a store: set {URL_ENV} or pass --url")
    return url, open_store(url, timeout=10.0)


def remote_entries(store) -> Iterator[Entry]:
    for name, head_bytes in store.heads(""):
        namespace, _, key = name.partition("/")
        head = Head.parse(head_bytes)
        yield Entry(namespace, key, head.size if head else 0, head.created if head else 0.0)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _age(seconds: float) -> str:
    for unit in ("w", "d", "h", "m"):
        if seconds >= _UNITS[unit]:
            return f"{seconds / _UNITS[unit]:.0f}{unit}"
    return f"{seconds:.0f}s"


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in rows
    )


def info(args, out) -> int:
    if args.remote:
        url, store = _store(args.url)
        per: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
        for e in remote_entries(store):
            per[e.namespace][0] += 1
            per[e.namespace][1] += e.size
        print(f"remote cache {_redact(url)}", file=out)
        rows: List[Tuple[str, ...]] = [("backend", "entries", "size")]
        rows += [(ns, str(n), _size(b)) for ns, (n, b) in sorted(per.items())]
        print(_table(rows) if per else "(empty)", file=out)
        return 0
    root = cache_root()
    print(f"local cache {root}", file=out)
    per = defaultdict(lambda: [0, 0])
    for e in local_entries(root):
        per[e.namespace][0] += 1
        per[e.namespace][1] += e.size
    namespaces = sorted(
        set(per) | {n for n in _listdir(root) if os.path.isdir(os.path.join(root, n))}
    )
    if not namespaces:
        print("(empty)", file=out)
        return 0
    rows = [("backend", "entries", "size", "other", "disk hits", "remote hits", "misses")]
    for ns in namespaces:
        n, b = per[ns]
        counts = local_counts(root, ns)
        # what the namespace keeps besides entries (tvm: its tuning records)
        other = _folder_size(os.path.join(root, ns)) - b
        rows.append(
            (
                ns,
                str(n),
                _size(b),
                _size(max(other, 0)),
                str(counts["disk"]),
                str(counts["remote"]),
                str(counts["misses"]),
            )
        )
    print(_table(rows), file=out)
    return 0


def _listdir(path: str) -> List[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def ls(args, out) -> int:
    now = time.time()
    if args.remote:
        _, store = _store(args.url)
        entries = list(remote_entries(store))
        label = "made"
    else:
        entries = list(local_entries(cache_root()))
        label = "last used"
    entries.sort(key=lambda e: -e.when)
    rows = [("backend", "key", "size", label)]
    rows += [(e.namespace, e.key[:16], _size(e.size), _age(now - e.when) + " ago") for e in entries]
    print(_table(rows) if entries else "(empty)", file=out)
    return 0


def prune(args, out) -> int:
    cutoff = time.time() - args.older_than
    removed = freed = 0
    if args.remote:
        _, store = _store(args.url)
        for e in list(remote_entries(store)):
            if e.when < cutoff:
                store.delete(f"{e.namespace}/{e.key}")
                removed += 1
                freed += e.size
        where = "remote"
    else:
        for e in list(local_entries(cache_root())):
            if e.when < cutoff:
                try:
                    os.unlink(e.path)
                except OSError:
                    continue
                removed += 1
                freed += e.size
        where = "local"
    print(f"removed {removed} {where} entries ({_size(freed)})", file=out)
    return 0


def clear(args, out) -> int:
    if args.remote:
        _, store = _store(args.url)
        names = [name for name, _ in store.heads("")]
        for name in names:
            store.delete(name)
        print(f"removed {len(names)} remote entries", file=out)
        return 0
    root = cache_root()
    entries = list(local_entries(root))
    # everything under the root: entries, tuning records, counts
    for name in _listdir(root):
        path = os.path.join(root, name)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
    print(f"removed {len(entries)} local entries and the tuning records under {root}", file=out)
    return 0


def main(argv: Optional[Sequence[str]] = None, out=None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(
        prog="python -m jit_core.cache", description="Look at and trim the compile cache."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {
        "info": (info, "sizes and hit/miss counts per backend"),
        "ls": (ls, "every entry, most recent first"),
        "prune": (prune, "remove entries not used (remote: not made) for a while"),
        "clear": (clear, "remove every entry"),
    }
    for name, (_, help_) in commands.items():
        p = sub.add_parser(name, help=help_)
        p.add_argument("--remote", action="store_true", help=f"the store {URL_ENV} names")
        p.add_argument("--url", help=f"the remote store (instead of {URL_ENV})")
        if name == "prune":
            p.add_argument("--older-than", type=parse_age, required=True, help="e.g. 30d, 12h")
    args = parser.parse_args(argv)
    try:
        return commands[args.command][0](args, out)
    except (ImportError, ValueError) as e:
        print(f"jit_core.cache: {e}", file=sys.stderr)
        return 2
    except StoreRefused as e:
        print(f"jit_core.cache: the remote store {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - a store that fails: say so, no traceback
        print(f"jit_core.cache: the store failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
