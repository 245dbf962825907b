"""TVM tuning records pooled through a real Redis (the root conftest's ``redis_server``):
the merge itself is JSON work, so it is checked on hand-made databases on every Python."""

from __future__ import annotations

import json
import os

import pytest
from jit_backend_tvm import shared_records

from jit_core.cache import disk as compile_cache
from jit_core.cache import remote as remote_cache
from jit_core.cache.remote import KEY_ENV, set_remote_cache

NAME = "0123456789abcdef-cold-weights"


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch, redis_server):
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "local"))
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    shared_records.forget()
    yield
    remote_cache.reset()
    shared_records.forget()


def workload(n):
    return [f"hash{n}", f"module {n}"]


def record(seconds):
    # a MetaSchedule record: trace, run_secs, target, args
    return [["trace"], [str(s) for s in seconds], {"kind": "llvm"}, []]


def database(folder, rows):
    """``rows``: (workload number, seconds) in the order a machine tuned them."""
    os.makedirs(folder, exist_ok=True)
    order = []
    for n, _ in rows:
        if n not in order:
            order.append(n)
    with open(os.path.join(folder, shared_records.WORKLOADS), "w") as f:
        f.writelines(json.dumps(workload(n)) + "\n" for n in order)
    with open(os.path.join(folder, shared_records.RECORDS), "w") as f:
        f.writelines(json.dumps([order.index(n), record(s)]) + "\n" for n, s in rows)
    return folder


def best_of(folder):
    return {w[0]: round(mean, 6) for mean, w, _ in shared_records.local_best(folder).values()}


def test_machines_pool_their_best_records(tmp_path):
    a = database(str(tmp_path / "a" / NAME), [(1, [2e-3, 2e-3]), (1, [1e-3]), (2, [5e-3])])
    b = database(str(tmp_path / "b" / NAME), [(3, [7e-3]), (1, [5e-4])])
    shared_records.push(a)
    shared_records.push(b)
    # a new machine starts from the best of both
    c = str(tmp_path / "c" / NAME)
    assert shared_records.pull(c) == 3
    assert best_of(c) == {"hash1": 5e-4, "hash2": 5e-3, "hash3": 7e-3}
    # machine a gets what b measured better or a lacks, keeps its own, and only once
    assert shared_records.pull(a) == 2
    assert best_of(a) == {"hash1": 5e-4, "hash2": 5e-3, "hash3": 7e-3}
    assert shared_records.pull(a) == 0
    # the workload indices of appended records point at the right workloads
    with open(os.path.join(a, shared_records.WORKLOADS)) as f:
        assert [json.loads(line)[0] for line in f] == ["hash1", "hash2", "hash3"]


def test_a_slower_record_does_not_replace_the_pooled_one(tmp_path):
    fast = database(str(tmp_path / "fast" / NAME), [(1, [1e-3])])
    slow = database(str(tmp_path / "slow" / NAME), [(1, [9e-3])])
    shared_records.push(fast)
    shared_records.push(slow)
    fresh = str(tmp_path / "fresh" / NAME)
    shared_records.pull(fresh)
    assert best_of(fresh) == {"hash1": 1e-3}


def test_without_a_key_records_are_neither_pooled_nor_merged(tmp_path, monkeypatch, redis_server):
    """A pool merged into the database stays on this disk, so an unsigned one is not taken:
    the database is this machine's own (nothing unsigned reaches the disk)."""
    a = database(str(tmp_path / "a" / NAME), [(1, [1e-3])])
    shared_records.push(a)
    monkeypatch.delenv(KEY_ENV)
    set_remote_cache(redis_server.url)
    b = database(str(tmp_path / "b" / NAME), [(2, [1e-3])])
    shared_records.push(b)  # read-only: nothing written
    fresh = str(tmp_path / "fresh" / NAME)
    assert shared_records.pull(fresh) == 0
    assert not os.path.exists(fresh)
    # with the key again, the pool holds a's record only
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    shared_records.forget()
    assert shared_records.pull(fresh) == 1
    assert best_of(fresh) == {"hash1": 1e-3}
