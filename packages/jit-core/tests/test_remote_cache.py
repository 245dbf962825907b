"""The remote tier of the compile cache on a real redis-server (the ``redis_server`` fixture
of the root conftest): trust, faults, chunking and concurrent writers."""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings

import pytest

from jit_core import compile_cache, plugins, redis_store, remote_cache
from jit_core.compile_cache import DiskCache
from jit_core.remote_cache import KEY_ENV, KEY_FILE_ENV, URL_ENV, set_remote_cache


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "local"))
    for name in (URL_ENV, KEY_ENV, KEY_FILE_ENV):
        monkeypatch.delenv(name, raising=False)
    remote_cache.reset()
    yield
    remote_cache.reset()


def local(namespace="onnxrt", executable=False):
    return DiskCache(namespace, executable=executable)


def wipe_local(tmp_path):
    import shutil

    compile_cache.wait_for_writes()  # remote hits are kept on disk in the background
    shutil.rmtree(tmp_path / "local", ignore_errors=True)


def caught(fn):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        value = fn()
    return value, [str(w.message) for w in got]


def test_a_remote_hit_is_kept_locally_and_counted(redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "team secret")
    monkeypatch.setenv(URL_ENV, redis_server.url)
    local().put("k1", b"model bytes")
    wipe_local(tmp_path)
    before = dict(compile_cache.stats.get("onnxrt", {}))
    assert local().get("k1") == b"model bytes"
    assert compile_cache.last_origin() == "remote"
    assert compile_cache.stats["onnxrt"]["remote"] == before.get("remote", 0) + 1
    compile_cache.wait_for_writes()
    assert local().get_local("k1") == b"model bytes"
    # now on disk: the store is not asked again
    redis_server.stop()
    assert local().get("k1") == b"model bytes"
    assert compile_cache.last_origin() == "disk"


def test_entries_signed_with_another_key_are_refused_once(redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "key one")
    set_remote_cache(redis_server.url)
    local().put("a", b"A")
    local().put("b", b"B")
    wipe_local(tmp_path)
    monkeypatch.setenv(KEY_ENV, "key two")
    set_remote_cache(redis_server.url)
    value, said = caught(lambda: (local().get("a"), local().get("b")))
    assert value == (None, None)
    assert len(said) == 1 and "not signed with this machine's key" in said[0]
    assert compile_cache.last_origin() == "miss"
    # rebuilt here, it replaces the entry with one this key signs
    local().put("a", b"A")
    wipe_local(tmp_path)
    assert local().get("a") == b"A"


def test_a_key_file_signs_like_the_variable(redis_server, monkeypatch, tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("from a file\n")
    monkeypatch.setenv(KEY_FILE_ENV, str(key_file))
    set_remote_cache(redis_server.url)
    local().put("a", b"A")
    wipe_local(tmp_path)
    monkeypatch.delenv(KEY_FILE_ENV)
    monkeypatch.setenv(KEY_ENV, "from a file")
    set_remote_cache(redis_server.url)
    assert local().get("a") == b"A"


def test_without_a_key_the_store_is_read_only_and_shares_no_native_code(
    redis_server, monkeypatch, tmp_path, caplog
):
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    local("onnxrt").put("model", b"onnx")
    local("tvm", executable=True).put("lib", b"\x7fELF")
    wipe_local(tmp_path)
    monkeypatch.delenv(KEY_ENV)
    with caplog.at_level("WARNING", logger="jit_core.cache"):
        set_remote_cache(redis_server.url)
    assert "read-only" in caplog.text and "native libraries" in caplog.text
    assert local("onnxrt").get("model") == b"onnx"
    assert local("tvm", executable=True).get("lib") is None
    local("onnxrt").put("new", b"unsigned")
    assert redis_server.client().exists(redis_store.PREFIX + "onnxrt/new") == 0
    assert redis_server.client().exists(redis_store.PREFIX + "onnxrt/model") == 1


def test_data_is_not_loaded_as_an_executable_entry(redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    local("tvm").put("x", b"data")  # stored as not executable
    wipe_local(tmp_path)
    assert local("tvm", executable=True).get("x") is None


def test_a_truncated_remote_entry_is_rebuilt_and_not_spread(redis_server, monkeypatch, tmp_path):
    monkeypatch.setattr(redis_store, "CHUNK", 1000)
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    payload = os.urandom(4500)
    local().put("big", payload)
    db = redis_server.client()
    name = redis_store.PREFIX + "onnxrt/big"
    assert db.llen(name) == 1 + 5  # head + chunks under the chunk size
    wipe_local(tmp_path)
    assert local().get("big") == payload  # chunks join up
    wipe_local(tmp_path)
    db.lset(name, -1, db.lindex(name, -1)[:100])  # the last chunk cut short
    value, said = caught(lambda: local().get("big"))
    assert value is None
    assert len(said) == 1 and "corrupt or truncated" in said[0]
    assert local().get_local("big") is None  # not spread to the disk
    local().put("big", payload)  # the rebuild replaces it
    wipe_local(tmp_path)
    assert local().get("big") == payload


def test_a_server_killed_mid_run_leaves_the_local_cache_working(
    redis_server, monkeypatch, tmp_path
):
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    local().put("before", b"1")
    written = compile_cache.stats["onnxrt"]["remote_stores"]
    redis_server.stop()
    started = time.monotonic()
    value, said = caught(
        lambda: [local().get("other"), local().get("more"), local().put("x", b"2")]
    )
    assert time.monotonic() - started < 5  # gave up at once, did not retry per call
    assert value[:2] == [None, None] and value[2] is not None
    assert len(said) == 1 and "uses the local disk" in said[0]
    assert local().get("x") == b"2" and local().get("before") == b"1"
    assert compile_cache.stats["onnxrt"]["remote_stores"] == written  # nothing got there


def test_a_stalled_server_times_out_instead_of_stalling_the_compile(redis_server, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    monkeypatch.setenv(remote_cache.TIMEOUT_ENV, "0.3")
    set_remote_cache(redis_server.url)
    local().put("warm", b"1")  # connected
    redis_server.client().execute_command("CLIENT", "PAUSE", "3000", "ALL")
    started = time.monotonic()
    value, said = caught(lambda: (local().get("a"), local().get("b")))
    waited = time.monotonic() - started
    assert value == (None, None)
    assert waited < 2.5, waited  # one timeout, then local only: the pause lasts 3 s
    assert len(said) == 1 and "TimeoutError" in said[0]


def test_a_full_store_stops_writes_but_not_reads(redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    local().put("small", b"s")
    wipe_local(tmp_path)
    db = redis_server.client()
    used = int(db.info("memory")["used_memory"])
    db.config_set("maxmemory", str(used + 200_000))
    db.config_set("maxmemory-policy", "noeviction")
    _, said = caught(lambda: [local().put(f"big{i}", os.urandom(300_000)) for i in range(3)])
    assert len(said) == 1 and "StoreFull" in said[0] and "writes to it" in said[0]
    assert local().get_local("big2") is not None  # the disk has it all the same
    assert local().get("small") == b"s"  # reads go on


def _write_same_key(url: str, root: str, payload: bytes, barrier) -> None:
    os.environ[compile_cache.ENV_VAR] = root
    os.environ[KEY_ENV] = "k"
    set_remote_cache(url)
    barrier.wait(30)
    for _ in range(20):
        DiskCache("race").put("same", payload)


# 3.12 warns on any fork of a process with threads (Paddle's, xdist's): the children run
# only the cache's code and the Redis client, which take no lock those threads hold
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_eight_processes_writing_one_key_leave_one_valid_entry(redis_server, monkeypatch, tmp_path):
    monkeypatch.setattr(redis_store, "CHUNK", 4096)
    # forked: the children only use the cache, and start in milliseconds instead of
    # importing Paddle again
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(8)
    payloads = [bytes([i]) * 40_000 for i in range(8)]
    procs = [
        ctx.Process(
            target=_write_same_key,
            args=(redis_server.url, str(tmp_path / f"w{i}"), payloads[i], barrier),
        )
        for i in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0] * 8
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    value, said = caught(lambda: DiskCache("race").get("same"))
    assert said == []
    assert value in payloads
    assert redis_server.client().llen(redis_store.PREFIX + "race/same") == 1 + 10


def test_an_unknown_scheme_lists_the_installed_stores():
    with pytest.raises(ValueError, match=r"installed stores take redis://, rediss://"):
        set_remote_cache("s3://bucket/cache")


def test_a_bad_environment_setting_warns_and_compiles_locally(monkeypatch):
    monkeypatch.setenv(URL_ENV, "memcached://host")
    _, said = caught(lambda: local().get("nothing"))
    assert len(said) == 1 and "is not used" in said[0]


def test_a_missing_client_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_redis(name, *a, **k):
        if name == "redis" or name.startswith("redis."):
            raise ImportError("No module named 'redis'")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_redis)
    with pytest.raises(ImportError, match=r"pip install jit-core\[redis\]"):
        set_remote_cache("redis://127.0.0.1:1/0")


def test_an_outside_store_plugs_in_through_the_hook(monkeypatch, tmp_path):
    from jit_core.hookspecs import hookimpl

    class MemoryStore(remote_cache.CacheStore):
        entries: dict = {}

        def __init__(self, url, timeout):
            self.timeout = timeout

        def get(self, name):
            return self.entries.get(name)

        def put(self, name, head, payload):
            self.entries[name] = (head, payload)

        def heads(self, prefix=""):
            return ((n, h) for n, (h, _) in self.entries.items() if n.startswith(prefix))

        def delete(self, name):
            self.entries.pop(name, None)

    class Plugin:
        @hookimpl
        def jit_register_cache_stores(self, register):
            register("mem", MemoryStore)

    plugins.register_plugin(Plugin(), name="memory-store")
    try:
        monkeypatch.setenv(KEY_ENV, "k")
        set_remote_cache("mem://")
        local().put("k", b"v")
        assert list(MemoryStore.entries) == ["onnxrt/k"]
        wipe_local(tmp_path)
        assert local().get("k") == b"v"
    finally:
        plugins.get_plugin_manager().unregister(name="memory-store")
        plugins.reset_plugins()


# ------------------------------------------------------------------ python -m jit_core.cache


def cli(*argv):
    import io

    from jit_core import cache

    out = io.StringIO()
    code = cache.main(list(argv), out=out)
    return code, out.getvalue()


def test_the_cli_shows_prunes_and_clears_both_tiers(redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "k")
    monkeypatch.setenv(URL_ENV, redis_server.url)
    old, new = "aa" + "0" * 62, "bb" + "1" * 62
    local().put(old, b"x" * 2048)
    local("tvm", executable=True).put(new, b"y" * 10)
    assert local().get(old) is not None
    compile_cache._save_counts()  # what the process would leave at exit
    ten_days = time.time() - 10 * 86400
    os.utime(local().path(old), (ten_days, ten_days))

    code, text = cli("info")
    assert code == 0
    onnxrt_row = next(line.split() for line in text.splitlines() if line.startswith("onnxrt"))
    # one entry of 2 KB, one disk hit, no remote hit, no miss
    assert onnxrt_row[:4] == ["onnxrt", "1", "2.0", "KB"] and onnxrt_row[-3:] == ["1", "0", "0"]
    assert "disk hits" in text
    code, text = cli("info", "--remote")
    assert code == 0 and "tvm" in text and "onnxrt" in text
    code, text = cli("ls")
    assert text.index(new[:16]) < text.index(old[:16])  # most recent use first

    code, text = cli("prune", "--older-than", "7d")
    assert code == 0 and "removed 1 local entries" in text
    assert local().get_local(old) is None and local("tvm").get_local(new) is not None
    code, text = cli("clear", "--remote")
    assert code == 0 and "removed 2 remote entries" in text
    assert not redis_server.client().keys(redis_store.PREFIX + "*")
    code, text = cli("clear")
    assert code == 0 and not os.listdir(tmp_path / "local")


def test_the_cli_says_what_is_missing(monkeypatch, capsys):
    with pytest.raises(SystemExit, match="--remote needs a store"):
        cli("ls", "--remote")
    with pytest.raises(SystemExit):
        cli("prune", "--older-than", "soon")
    assert "is not an age" in capsys.readouterr().err
