"""Tuning records pooled through the compile cache's remote tier.

Each tuning database (one per target, TVM version and way of measuring: ``tuning.
database_dir``) has one remote entry: the best record of every kernel any machine tuned,
as JSON. A process merges it into its database before it first looks for records (only
where the tier has a signing key: the merged records stay on this disk, and nothing
unsigned is kept there), and after it tunes it merges its own best
records into the pooled entry and writes it back: the better measured time wins.

Two machines that push at the same moment may each write a pool without the other's new
records; the next push of either brings them back, since every database keeps its own.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Dict, List, Optional, Tuple

# a pool only steers which schedules are tried (a library built from them is checked
# against Paddle like any other)
from jit_core.cache.remote import HINT

log = logging.getLogger("jit_core.tuning")

NAMESPACE = "tvm-tuning"
WORKLOADS = "database_workload.json"
RECORDS = "database_tuning_record.json"
_VERSION = 1
#: the databases this process has merged the pool into already
_pulled = set()
_lock = threading.Lock()

#: workload (its JSON line, as text) -> (mean seconds, the workload, the record)
Best = Dict[str, Tuple[float, list, list]]


def _tier():
    from jit_core.cache.remote import remote_tier

    return remote_tier()


def _lines(path: str) -> list:
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append(None)  # keeps the indices of the lines after it
    return out


def _mean(record) -> Optional[float]:
    try:
        secs = [float(s) for s in record[1] or ()]
    except (TypeError, ValueError, IndexError):
        return None
    return sum(secs) / len(secs) if secs else None


def _better(best: Best, workload, record) -> bool:
    """Keep ``record`` in ``best`` if it is the fastest of its workload so far."""
    mean = _mean(record)
    if mean is None or workload is None:
        return False
    key = json.dumps(workload, sort_keys=True)
    if key in best and best[key][0] <= mean:
        return False
    best[key] = (mean, workload, record)
    return True


def local_best(folder: str) -> Best:
    workloads = _lines(os.path.join(folder, WORKLOADS))
    best: Best = {}
    for line in _lines(os.path.join(folder, RECORDS)):
        try:
            index, record = int(line[0]), line[1]
        except (TypeError, ValueError, IndexError):
            continue
        if 0 <= index < len(workloads):
            _better(best, workloads[index], record)
    return best


def _parse_pool(payload: bytes) -> Best:
    best: Best = {}
    try:
        data = json.loads(payload.decode())
        if data.get("version") != _VERSION:
            return best
        for workload, record in data["entries"]:
            _better(best, workload, record)
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        log.warning("the pooled tuning records in the remote cache are unreadable; ignored")
        return {}
    return best


def _pool_bytes(best: Best) -> bytes:
    entries = [[w, r] for _, (_, w, r) in sorted(best.items())]
    return json.dumps({"version": _VERSION, "entries": entries}, sort_keys=True).encode()


def pull(folder: str) -> int:
    """Merge the pooled records into the database in ``folder`` (once per process);
    returns how many records were added (those faster than this machine's own)."""
    tier = _tier()
    with _lock:
        if tier is None or folder in _pulled:
            return 0
        _pulled.add(folder)
    if not tier.signed:
        log.info("tuning records of the remote cache not merged: it has no signing key")
        return 0
    payload = tier.fetch(NAMESPACE, os.path.basename(folder), kind=HINT)
    if payload is None:
        return 0
    pooled = _parse_pool(payload)
    mine = local_best(folder)
    wanted = [
        (w, r) for key, (mean, w, r) in pooled.items() if key not in mine or mean < mine[key][0]
    ]
    if wanted:
        _append(folder, wanted)
        log.info("%d tuning records from the remote cache", len(wanted))
    return len(wanted)


def _append(folder: str, items: List[Tuple[list, list]]) -> None:
    os.makedirs(folder, exist_ok=True)
    workloads_path = os.path.join(folder, WORKLOADS)
    workloads = _lines(workloads_path)
    index = {json.dumps(w, sort_keys=True): i for i, w in reversed(list(enumerate(workloads)))}
    new = [w for w, _ in items if json.dumps(w, sort_keys=True) not in index]
    if new:
        with open(workloads_path, "a", encoding="utf-8") as f:
            for w in new:
                f.write(json.dumps(w) + "\n")
        # read back: another process may have appended in between, which moves our lines
        for i, w in enumerate(_lines(workloads_path)):
            index.setdefault(json.dumps(w, sort_keys=True), i)
    with open(os.path.join(folder, RECORDS), "a", encoding="utf-8") as f:
        for w, r in items:
            f.write(json.dumps([index[json.dumps(w, sort_keys=True)], r]) + "\n")


def push(folder: str) -> None:
    """Merge this database's best records into the pool and write it back."""
    tier = _tier()
    if tier is None or not tier.writable:
        return
    name = os.path.basename(folder)
    payload = tier.fetch(NAMESPACE, name, kind=HINT)
    best = _parse_pool(payload) if payload is not None else {}
    changed = False
    for _, (_, w, r) in local_best(folder).items():
        changed |= _better(best, w, r)
    if changed:
        tier.store_entry(NAMESPACE, name, _pool_bytes(best), kind=HINT)


def forget() -> None:
    """Pull again at the next use (tests)."""
    with _lock:
        _pulled.clear()
