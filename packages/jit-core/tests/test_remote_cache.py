"""The remote tier of the compile cache on a real redis-server (the ``redis_server`` fixture
of the root conftest): trust, faults, chunking and concurrent writers."""

from __future__ import annotations

import multiprocessing
import os
import time
import warnings

import pytest

from jit_core import plugins
from jit_core.cache import disk as compile_cache
from jit_core.cache import redis_store
from jit_core.cache import remote as remote_cache
from jit_core.cache.disk import DiskCache
from jit_core.cache.remote import KEY_ENV, KEY_FILE_ENV, TRUST_ENV, URL_ENV, set_remote_cache


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.ENV_VAR, str(tmp_path / "local"))
    for name in (URL_ENV, KEY_ENV, KEY_FILE_ENV, TRUST_ENV):
        monkeypatch.delenv(name, raising=False)
    remote_cache.reset()
    yield
    remote_cache.reset()


def local(namespace="onnxrt", executable=False, kind=None):
    return DiskCache(namespace, executable=executable, kind=kind)


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


def test_a_refusal_names_where_the_key_came_from(redis_server, monkeypatch, tmp_path):
    monkeypatch.setenv(KEY_ENV, "one")
    set_remote_cache(redis_server.url)
    local().put("a", b"A")
    wipe_local(tmp_path)
    monkeypatch.delenv(KEY_ENV)
    key_file = tmp_path / "other key"
    key_file.write_text("two")
    monkeypatch.setenv(KEY_FILE_ENV, str(key_file))
    set_remote_cache(redis_server.url)
    value, said = caught(lambda: local().get("a"))
    assert value is None
    assert f"not signed with this machine's key (from {KEY_FILE_ENV}={key_file})" in said[0]
    assert f"({KEY_ENV})" not in said[0]


@pytest.mark.parametrize("password", ["", "wrong"])
def test_a_missing_or_wrong_password_is_one_clear_line(
    redis_server_with_password, monkeypatch, password
):
    server = redis_server_with_password
    url = f"redis://:{password}@{server.address}" if password else f"redis://{server.address}"
    monkeypatch.setenv(KEY_ENV, "k")
    monkeypatch.setenv(URL_ENV, url)
    value, said = caught(lambda: local().get("a"))
    assert value is None and compile_cache.last_origin() == "miss"
    assert len(said) == 1
    if password:
        assert f"remote cache redis://***@{server.address} refused the user name or " in said[0]
        assert "wrong" not in said[0]  # the password is not shown
    else:
        assert f"remote cache {url} needs a password, and its URL gives none: " in said[0]
        assert "redis://:PASSWORD@host:port/db" in said[0]
    assert f"(the URL comes from {URL_ENV})" in said[0]
    assert "HELLO" not in said[0] and "AuthenticationError" not in said[0]
    assert local().put("a", b"A") is not None  # the local disk goes on
    # the right password works
    monkeypatch.setenv(URL_ENV, server.url)
    remote_cache.reset()
    local().put("b", b"B")
    assert server.client().exists(redis_store.PREFIX + "onnxrt/b") == 1


def test_the_cache_log_channel_shows_hits_misses_refusals_and_stores(
    redis_server, monkeypatch, tmp_path, caplog
):
    from jit_core import logs

    assert "cache" in logs.CHANNELS
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    with caplog.at_level("DEBUG", logger="jit_core.cache"):
        assert local().get("m") is None
        local().put("m", b"M")
        local().get("m")
        wipe_local(tmp_path)
        local().get("m")
        _forge(redis_server, "onnxrt/m", b"forged")
        wipe_local(tmp_path)
        caught(lambda: local().get("m"))
    said = [r.getMessage() for r in caplog.records if r.name == "jit_core.cache"]
    assert said[:2] == ["remote miss onnxrt/m", "miss onnxrt/m"]
    assert "disk store onnxrt/m (1 bytes)" in said and "remote store onnxrt/m (1 bytes)" in said
    assert "disk hit onnxrt/m" in said and "remote hit onnxrt/m" in said
    assert "refused onnxrt/m: not signed with the key of JIT_CORE_CACHE_KEY" in said


def test_jit_logs_cache_turns_the_channel_on(tmp_path):
    import subprocess
    import sys

    code = (
        "from jit_core.cache.disk import DiskCache\n"
        "DiskCache('demo').get('k'); DiskCache('demo').put('k', b'v'); DiskCache('demo').get('k')\n"
    )
    env = dict(os.environ, JIT_LOGS="cache", JIT_CORE_CACHE_DIR=str(tmp_path))
    env.pop(URL_ENV, None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    # (formatted by Paddle's handler on the root logger where it installed one first)
    said = [line for line in out.stderr.splitlines() if " demo/k" in line]
    assert len(said) == 3
    for line, message in zip(
        said, ["miss demo/k", "disk store demo/k (1 bytes)", "disk hit demo/k"]
    ):
        assert line.endswith(message)


def _signed_entries(redis_server, monkeypatch, tmp_path):
    """A model, a native library and a tuning hint, written with a key; then the key goes
    and the local disk is wiped."""
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    local("onnxrt").put("model", b"onnx")
    local("tvm", executable=True).put("lib", b"\x7fELF")
    local("tvm-tuning", kind="hint").put("records", b"json")
    wipe_local(tmp_path)
    monkeypatch.delenv(KEY_ENV)


def on_disk(namespace, key):
    compile_cache.wait_for_writes()
    return DiskCache(namespace).get_local(key)


def test_without_a_key_the_store_is_read_only_for_hints_and_keeps_nothing_on_disk(
    redis_server, monkeypatch, tmp_path, caplog
):
    _signed_entries(redis_server, monkeypatch, tmp_path)
    with caplog.at_level("WARNING", logger="jit_core.cache"):
        set_remote_cache(redis_server.url)
    assert "read-only, for backend choices" in caplog.text
    assert f"ONNX models are not read from it unsigned ({TRUST_ENV}=1 would)" in caplog.text
    assert "native libraries are neither loaded from it nor shared" in caplog.text
    # a hint is read (and used), a model and native code are not
    assert local("tvm-tuning", kind="hint").get("records") == b"json"
    assert local("onnxrt").get("model") is None
    assert compile_cache.last_origin() == "miss"
    assert local("tvm", executable=True).get("lib") is None
    # what came unsigned is not kept: off the store, it is gone
    assert on_disk("tvm-tuning", "records") is None
    # nothing is written without a key
    local("onnxrt").put("new", b"unsigned")
    assert redis_server.client().exists(redis_store.PREFIX + "onnxrt/new") == 0
    assert redis_server.client().exists(redis_store.PREFIX + "onnxrt/model") == 1


def _forge(redis_server, name: str, payload: bytes) -> None:
    """What anyone who can write to the store can do: a new payload, its head made to match."""
    import hashlib
    import time

    head = remote_cache.Head(len(payload), hashlib.sha256(payload).hexdigest(), time.time(), False)
    db = redis_server.client()
    db.delete(redis_store.PREFIX + name)
    db.rpush(redis_store.PREFIX + name, head.to_bytes(), payload)


def test_a_forged_model_is_used_only_with_the_opt_in_and_never_reaches_the_disk(
    redis_server, monkeypatch, tmp_path
):
    _signed_entries(redis_server, monkeypatch, tmp_path)
    _forge(redis_server, "onnxrt/model", b"forged onnx")
    set_remote_cache(redis_server.url)
    assert local("onnxrt").get("model") is None  # rebuilt here instead
    assert on_disk("onnxrt", "model") is None

    monkeypatch.setenv(TRUST_ENV, "1")
    value, said = caught(lambda: set_remote_cache(redis_server.url))
    value, said = caught(lambda: (local("onnxrt").get("model"), local("onnxrt").get("model")))
    assert value == (b"forged onnx", b"forged onnx")  # what the user asked for
    assert len(said) == 1 and f"read without a signing key ({TRUST_ENV}=1)" in said[0]
    assert "it is not kept on the local disk" in said[0]
    assert on_disk("onnxrt", "model") is None
    set_remote_cache(None)
    assert local("onnxrt").get("model") is None  # turning the store off turns it off
    # the opt-in never reaches native code
    set_remote_cache(redis_server.url, trust_unsigned=True)
    assert local("tvm", executable=True).get("lib") is None
    # and a key makes it moot: the forgery is refused again
    monkeypatch.setenv(KEY_ENV, "k")
    set_remote_cache(redis_server.url)
    value, said = caught(lambda: local("onnxrt").get("model"))
    assert value is None and "not signed with this machine's key" in said[0]


def test_the_opt_in_is_a_yes_or_no(redis_server, monkeypatch):
    monkeypatch.setenv(TRUST_ENV, "maybe")
    with pytest.raises(ValueError, match=f"{TRUST_ENV}='maybe': set it to 1"):
        set_remote_cache(redis_server.url)


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

    from jit_core.cache import cli as cache

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


def test_the_cli_says_a_password_is_missing(redis_server_with_password, capsys):
    assert cli("info", "--remote", "--url", f"redis://{redis_server_with_password.address}")[0] == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jit_core.cache: the remote store needs a password, and its URL gives")
    assert len(err.splitlines()) == 1


def test_the_cli_says_what_is_missing(monkeypatch, capsys):
    with pytest.raises(SystemExit, match="--remote needs a store"):
        cli("ls", "--remote")
    with pytest.raises(SystemExit):
        cli("prune", "--older-than", "soon")
    assert "is not an age" in capsys.readouterr().err
