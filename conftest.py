"""Shared by every test folder: keep Paddle's import-time noise out of the test output."""

import os
import warnings

# The call that captures a graph on the paddle backend returns the capture's own eager
# results (``convert_frame.FirstFromCapture``). The suites check the compiled graph on
# every call, the first included; jit-core's tests/test_first_call.py checks that feature.
os.environ.setdefault("JIT_FIRST_CALL_FROM_CAPTURE", "0")

# Paddle warns at import when the optional C++-extension cache tool is missing; it says
# nothing about what is tested here. Pytest's own filterwarnings only applies inside tests.
warnings.filterwarnings("ignore", message="No ccache found", category=UserWarning)


# ------------------------------------------------------- the conformance suite's backends


def pytest_addoption(parser):
    # here, not in conformance/conftest.py: a run of every test folder (no path given)
    # only reads this file's options before it parses the command line
    parser.addoption(
        "--backend",
        default="paddle",
        help="the jit_core backend the conformance suite runs on (default: paddle), or "
        "several, comma-separated: each test then runs on each, in one pytest run",
    )


# ------------------------------------------------------------- tests run on one Python

#: set by the nox tests session to the one Python that runs the ``one_python`` tests: what
#: they check (a worker process surviving a native crash, say) does not depend on the
#: Python, and each takes minutes
ONE_PYTHON_ENV = "JIT_ONE_PYTHON"


def pytest_collection_modifyitems(config, items):
    import sys

    import pytest

    chosen = os.environ.get(ONE_PYTHON_ENV)
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if not chosen or chosen == here:
        return
    skip = pytest.mark.skip(
        reason=f"runs on Python {chosen} only in CI ({ONE_PYTHON_ENV}): the same on every Python"
    )
    for item in items:
        if "one_python" in item.keywords:
            item.add_marker(skip)


# ------------------------------------------------------------- a real Redis for the tests

import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import pytest  # noqa: E402

#: set by the nox tests session, which installs redis-server: there a missing server fails
REQUIRE_REDIS_ENV = "JIT_REQUIRE_REDIS"
#: the most seconds a test's redis-server lives, whatever happens to the test process
REDIS_LIFETIME = 300


class RedisServer:
    """A redis-server of one test: loopback only, no persistence, stopped at teardown and
    in any case after ``REDIS_LIFETIME`` seconds (``timeout`` wraps it). ``url`` carries
    the password where the server asks for one."""

    def __init__(self, port: int, proc: subprocess.Popen, password: str = ""):
        self.port = port
        self.password = password
        self.address = f"127.0.0.1:{port}/0"
        self.url = f"redis://:{password}@{self.address}" if password else f"redis://{self.address}"
        self.proc = proc

    def client(self):
        import redis

        return redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password or None, socket_timeout=5
        )

    def stop(self) -> None:
        # SIGTERM: ``timeout`` passes it on to the server (a SIGKILL would orphan it)
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve_redis(password: str = ""):
    exe = shutil.which("redis-server")
    if exe is None:
        why = (
            "redis-server is not installed (Debian: `apt-get install redis-server`; "
            "`./dev test` installs it)"
        )
        if os.environ.get(REQUIRE_REDIS_ENV):
            pytest.fail(why)
        pytest.skip(why)
    try:
        import redis  # noqa: F401
    except ImportError:
        why = "the redis client is not installed: pip install jit-core[redis]"
        if os.environ.get(REQUIRE_REDIS_ENV):
            pytest.fail(why)
        pytest.skip(why)
    auth = ["--requirepass", password] if password else []
    for _ in range(5):  # another process may take the port between probe and bind
        port = _free_port()
        proc = subprocess.Popen(
            ["timeout", str(REDIS_LIFETIME), exe, "--port", str(port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no", "--protected-mode", "yes"]
            + auth,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server = RedisServer(port, proc, password)
        deadline = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if server.client().ping():
                    break
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.02)
        if proc.poll() is None:
            try:
                yield server
            finally:
                server.stop()
            return
    pytest.fail("redis-server did not start on a free loopback port")


@pytest.fixture
def redis_server():
    yield from _serve_redis()


@pytest.fixture
def redis_server_with_password():
    """A redis-server that asks for the password ``s3cret`` (its ``url`` gives it)."""
    yield from _serve_redis("s3cret")


# --------------------------------------------------- the ONNX export's view of paddle2onnx


@pytest.fixture
def paddle2onnx_at(monkeypatch):
    """``paddle2onnx_at(version)``: the ONNX export's metadata lookup reports paddle2onnx at
    ``version`` (None: not installed), every other package as it is. The backends that
    export through ONNX decide from it whether they can run."""
    from jit_core.kit.onnx import export

    real = export.installed_version

    def at(version):
        monkeypatch.setattr(
            export,
            "installed_version",
            lambda dist: version if dist == "paddle2onnx" else real(dist),
        )

    return at


# ------------------------------------------------------------- plugins a test installs


@pytest.fixture
def install_plugin():
    """``install_plugin(plugin, name)`` registers a plugin object for one test; after the
    test every such plugin is unregistered and the entry points load again."""
    from jit_core import plugins

    installed = []

    def install(plugin, name: str):
        plugins.register_plugin(plugin, name=name)
        installed.append(plugin)
        return plugin

    yield install
    pm = plugins.get_plugin_manager()
    for plugin in installed:
        if pm.is_registered(plugin):
            pm.unregister(plugin)
    plugins.reset_plugins()
