"""Every check of the monorepo, on every Python of the matrix. Run through ``./dev``.

./dev test            lint + docs + the tests on Python 3.8 to 3.13
./dev test -- -k mlp  arguments after ``--`` go to pytest
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from typing import Callable, Dict, List

import nox

#: (free-threaded 3.13t is out of scope)
PYTHONS = ["3.8", "3.9", "3.10", "3.11", "3.12", "3.13"]
#: jit-core with its "onnx" extra: the ONNX export the onnxrt, tvm and tensorrt backends
#: share; its paddle2onnx (for graphs the direct export has no lowering for) comes on 3.8
#: to 3.12 only (2.x has no 3.13 wheels: there such graphs run on paddle).
#: jit-backend-tvm installs on every Python; TVM itself comes on 3.10+ only.
#: jit-backend-tensorrt installs without its "trt" extra: TensorRT's builder is not
#: installable on CI's machines (no NVIDIA GPU), so its backend is listed as unavailable.
PACKAGES = [
    # redis: the client of the remote compile cache's built-in store (its tests need it)
    "packages/jit-core[onnx,redis]",
    "packages/jit-opcodes",
    "packages/backend-onnxrt",
    "packages/backend-tvm",
    "packages/backend-tensorrt",
    "packages/jit-eval",
]
#: backends the conformance suite runs on besides the default paddle backend, with the
#: environment they need. tvm checks correctness on sampled schedules (no tuning):
#: tuning whole models on every run would not fit CI (its unit tests tune a small kernel
#: instead). A backend's column is n/a where the backend cannot run (tvm on 3.8/3.9,
#: tensorrt wherever TensorRT or a CUDA device is missing: all of CI): every test is skipped
#: at collection with the reason (``n_a_backends``).
CONFORMANCE_BACKENDS = {"onnxrt": {}, "tvm": {"JIT_TVM_TUNE": "off"}, "tensorrt": {}}
#: backends whose conformance runs in one process of its own where they can run
#: (tensorrt: one GPU); the others run with the unit tests, in one pytest run with
#: JIT_TEST_WORKERS workers (conformance/conftest.py runs each test on each backend):
#: every separate run costs its start (two workers importing Paddle) and its tail (one
#: worker idle on the last long test), about 15 s on 2 cores
ONE_PROCESS_BACKENDS = {"tensorrt"}
#: the sources of a checkout that tvm's conformance runs depend on, and the kinds of file
#: among them that count (``_source_digest``)
BUILD_SOURCES = ("packages", "conformance", "examples")
BUILD_SOURCE_KINDS = (".py", ".toml", ".cc", ".c", ".h", ".json", ".txt", ".cfg")
#: of those, what decides the library tvm builds from a graph beyond what the entry's key
#: holds (the graph's code and the objects it names, its parameters, the input specs,
#: Paddle's and TVM's versions, the exporter's and code generator's revisions): the
#: backend, and all of jit-core (the ONNX kit, the passes and shape inference whose meta the
#: exporter reads, the cache's format, the helpers graph code calls) but the capture
#: (``LIBRARY_SOURCES_SKIPPED``), which only forms graphs: a change there forms other graphs
#: with other keys, or the same graphs, for which what was built before holds
LIBRARY_SOURCES = (
    "packages/backend-tvm/src",
    "packages/jit-core/src",
    "examples/onnx-lowering-plugin",
)
LIBRARY_SOURCES_SKIPPED = tuple(
    os.path.join("packages", "jit-core", "src", "jit_core", name)
    for name in ("bytecode", "codegen", "executor", "variables", "runtime")
    + ("api.py", "capture.py", "explain.py", "controls.py")
)


def _source_digest(tops=BUILD_SOURCES, skipped=()) -> str:
    """A digest of every source file under ``tops`` but ``skipped`` (names and contents):
    two checkouts with the same digest of ``BUILD_SOURCES`` build the same libraries from
    the same graphs, and test them alike."""
    digest = hashlib.sha256()
    for top in tops:
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(
                d
                for d in dirs
                if d not in ("__pycache__", "build", "dist")
                and not d.startswith(".")
                and not d.endswith(".egg-info")
                and os.path.join(folder, d) not in skipped
            )
            for name in sorted(files):
                path = os.path.join(folder, name)
                if name.endswith(BUILD_SOURCE_KINDS) and path not in skipped:
                    digest.update(path.encode() + b"\0")
                    with open(path, "rb") as f:
                        digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()[:16]


#: the compile cache tvm's conformance runs share: across the Pythons of one ``./dev test``
#: (TVM compiles the same graphs alike on every Python, and the entries do not depend on the
#: process: 3.11 to 3.13 load what 3.10 built, 40 s instead of 4 minutes each on 2 cores),
#: and across runs on one machine, in the user's cache folder: a clean clone of a commit
#: tested before loads everything that run stored (a folder per digest of the sources), and
#: one whose ``LIBRARY_SOURCES`` are those of an earlier run loads the libraries that run
#: built (``LIBRARY_NAMESPACES``, linked from a folder per digest of those sources), and
#: builds only those of the graphs it forms anew. The latest ``TVM_CACHES_KEPT`` of each stay.
TVM_CACHES = os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser(os.path.join("~", ".cache")),
    "jit-core-ci",
    "tvm-conformance",
)
TVM_LIBRARIES = os.path.join(os.path.dirname(TVM_CACHES), "tvm-libraries")
TVM_CACHES_KEPT = 3
#: tvm's libraries and its verdicts on how a graph builds (refused; per input shape only)
LIBRARY_NAMESPACES = ("tvm", "tvm-refused", "tvm-per-shape")


def _latest(folder: str, name: str) -> str:
    """``folder/name``, made and marked the latest; beyond ``TVM_CACHES_KEPT`` the oldest
    go."""
    path = os.path.join(folder, name)
    os.makedirs(path, exist_ok=True)
    os.utime(path)
    others = sorted(
        (os.path.join(folder, d) for d in os.listdir(folder)), key=os.path.getmtime, reverse=True
    )
    for old in others[TVM_CACHES_KEPT:]:
        shutil.rmtree(old, ignore_errors=True)
    return path


def tvm_shared_cache() -> str:
    """This checkout's tvm conformance cache folder, its library namespaces linked to the
    folder of its ``LIBRARY_SOURCES``."""
    path = _latest(TVM_CACHES, _source_digest())
    libraries = _latest(TVM_LIBRARIES, _source_digest(LIBRARY_SOURCES, LIBRARY_SOURCES_SKIPPED))
    for namespace in LIBRARY_NAMESPACES:
        target = os.path.join(libraries, namespace)
        os.makedirs(target, exist_ok=True)
        link = os.path.join(path, namespace)
        if os.path.islink(link) and os.readlink(link) != target:
            os.unlink(link)
        elif os.path.isdir(link) and not os.path.islink(link):
            shutil.rmtree(link)  # (a folder of a run before the links)
        if not os.path.lexists(link):
            os.symlink(target, link)
    return path


#: example plugins that exist to be installed in the test environment (see their READMEs)
TEST_PLUGINS = [
    p for p in ["examples/opcode-plugin", "examples/onnx-lowering-plugin"] if os.path.isdir(p)
]
RUFF = "ruff==0.17.5"
#: mypy, and the typed libraries jit-core imports (Paddle and NumPy count as Any there)
MYPY = ["mypy==2.4.1", "bytecode>=0.13", "pluggy>=1.0"]
DOCS = ["sphinx==9.1.1", "furo==2025.12.19"]
#: the Paddle each test venv gets (3.3.1 on 3.9 to 3.13); jit-core itself allows 3.3.x on
#: 3.9+, the pin keeps every run (and the published timings) on the same release
PADDLE = {"3.8": "paddlepaddle==3.0.0"}
PADDLE_DEFAULT = "paddlepaddle==3.3.1"
#: Paddle imports setuptools at import time (its cpp_extension) on 3.8 to 3.11 without
#: declaring it, and a venv made by uv holds nothing but what is installed into it
PADDLE_NEEDS = ["setuptools"]

# Every session's Python writes the bytecode of what it imports (``__pycache__``, in the
# session's venv and under the checkout's sources, which git ignores), even where the
# calling environment says not to: with PYTHONDONTWRITEBYTECODE set (some machines and
# containers set it), each process of a run (the pytest workers, the hundreds of
# subprocesses tests start, the build workers) compiles Paddle from source again:
# ``import paddle`` 2.2 s instead of 0.7 s, the 3.11 tests 3m46s instead of 3m05s on 2 cores
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

nox.options.sessions = ["lint", "docs", "tests", "wheels"]
nox.options.reuse_existing_virtualenvs = True
# uv makes and fills the venvs in seconds where pip took minutes (./dev installs it next to
# nox). It makes 3.8's too, which recent virtualenv releases can no longer seed; its venvs
# hold no pip or setuptools (PADDLE_NEEDS).
nox.options.default_venv_backend = "uv"
nox.options.error_on_missing_interpreters = True


#: the remote compile cache's tests and bench/cache.py start a real Redis server
REDIS_SERVER = "redis-server"
#: tells the tests a missing server is a failure here, not a reason to skip
REDIS_REQUIRED = {"JIT_REQUIRE_REDIS": "1"}
#: the compiled tensor check of guards must build in the tests session (it has a compiler)
NATIVE_REQUIRED = {"JIT_REQUIRE_NATIVE_GUARDS": "1"}
CXX_COMPILERS = ("c++", "g++", "clang++")


def ensure_cxx(session: nox.Session) -> None:
    """A C++ compiler: the compiled tensor check of guards is built with one."""
    ensure_debian_package(
        session,
        "g++",
        lambda: bool(os.environ.get("CXX")) or any(shutil.which(c) for c in CXX_COMPILERS),
        "the compiled tensor check of guards is built with it",
        "the tests build jit_core's compiled tensor check and need a C++ compiler: install "
        "one (Debian/Ubuntu: `sudo apt-get install g++`, macOS: Xcode's command line tools) "
        "and run again",
    )


def ensure_redis_server(session: nox.Session) -> None:
    """redis-server: the remote compile cache's tests start one."""
    ensure_debian_package(
        session,
        "redis-server",
        lambda: shutil.which(REDIS_SERVER) is not None,
        "the remote compile cache's tests need one",
        "the remote compile cache's tests need redis-server on PATH and it could not be "
        "installed here: install it (Debian/Ubuntu: `sudo apt-get install redis-server`, "
        "macOS: `brew install redis`) and run again",
    )


def ensure_debian_package(
    session: nox.Session, package: str, found: Callable[[], bool], why: str, otherwise: str
) -> None:
    """Install Debian's ``package`` when ``found()`` says it is missing (as root, through
    apt-get); anywhere else, stop with ``otherwise`` (what to install)."""
    if found():
        return
    apt = shutil.which("apt-get")
    if apt and os.geteuid() == 0:
        session.log(f"installing {package} ({why})")
        session.run(apt, "update", "-qq", external=True)
        session.run(apt, "install", "-y", "-qq", "--no-install-recommends", package, external=True)
        if found():
            return
    session.error(otherwise)


#: the one Python whose session installs jit-eval's "cluster" extra (Ray, 80 MB) and runs
#: jit-eval's test on a local two-node Ray cluster; elsewhere that test is skipped, saying so
CLUSTER_PYTHON = "3.12"


def paddle_for(session: nox.Session) -> List[str]:
    """The Paddle release the session's Python gets, with what it imports undeclared."""
    return [PADDLE.get(str(session.python), PADDLE_DEFAULT), *PADDLE_NEEDS]


def install_project(session: nox.Session) -> None:
    """Paddle, the test tools and every package (editable) in one install (jit-core
    requires jit-opcodes: both from this checkout, not from an index)."""
    packages = list(PACKAGES)
    if session.python == CLUSTER_PYTHON:
        packages = [p + "[cluster]" if p == "packages/jit-eval" else p for p in packages]
    editable = [arg for pkg in packages + TEST_PLUGINS for arg in ("-e", pkg)]
    session.install(*paddle_for(session), "-r", "requirements-test.txt", *editable)


#: prints why each installed backend cannot run in the session's venv ("" where it can):
#: ``jit_core.backends()``, whose reasons the conformance suite skips with
BACKENDS_PROBE = """
import json, warnings
warnings.filterwarnings("ignore")
import jit_core
reasons = {name: b.unavailable for name, b in jit_core.backends().items()}
print("unavailable:", json.dumps(reasons))
"""


def n_a_backends(session: nox.Session) -> Dict[str, str]:
    """The backends installed in the session's venv that cannot run there, with the reason
    (a few seconds: one import of Paddle). Where the answer cannot be read, none: the runs
    then only take longer."""
    out = session.run("python", "-c", BACKENDS_PROBE, silent=True, env={"GLOG_minloglevel": "2"})
    for line in (out or "").splitlines():  # (empty where nothing ran: nox --install-only)
        if line.startswith("unavailable: "):
            reasons = json.loads(line[len("unavailable: ") :])
            return {name: why for name, why in reasons.items() if why}
    return {}


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The unit tests of every package, and the conformance suite on every backend."""
    install_project(session)
    ensure_redis_server(session)
    ensure_cxx(session)
    workers = os.environ.get("JIT_TEST_WORKERS", "2")
    env = {
        "GLOG_minloglevel": "2",
        **REDIS_REQUIRED,
        **NATIVE_REQUIRED,
        # tests marked one_python run in one session (conftest.py)
        "JIT_ONE_PYTHON": CLUSTER_PYTHON,
        # the pytest workers fill the cores already: Paddle's OpenMP threads, one per core
        # in each worker, would only compete (the 3.11 unit tests: 4m44s -> 4m18s on 2 cores)
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
    }
    n_a = n_a_backends(session)
    together, alone = ["paddle"], []
    for backend, backend_env in CONFORMANCE_BACKENDS.items():
        if backend in n_a:
            session.log(f"conformance on {backend}: n/a here, every test skipped ({n_a[backend]})")
        elif backend == "tvm":
            backend_env = {**backend_env, "JIT_CONFORMANCE_CACHE_DIR_TVM": tvm_shared_cache()}
        env.update(backend_env)
        (alone if backend in ONE_PROCESS_BACKENDS and backend not in n_a else together).append(
            backend
        )
    # the unit tests, and the conformance suite on every backend but those run alone
    session.run("pytest", "-n", workers, "--backend", ",".join(together), *session.posargs, env=env)
    for backend in alone:
        session.run(
            "pytest", "-n", "0", "conformance", "--backend", backend, *session.posargs, env=env
        )


#: the distributions users install, built from these folders
DISTRIBUTIONS = ["packages/jit-core", "packages/jit-opcodes", "packages/backend-onnxrt"]
DISTRIBUTIONS += ["packages/backend-tvm", "packages/backend-tensorrt", "packages/jit-eval"]


def _version() -> str:
    """The version every package has (CHANGELOG.md; jit-core's test_docs_text.py keeps
    them equal), read from jit-core's pyproject.toml."""
    with open(os.path.join("packages", "jit-core", "pyproject.toml")) as f:
        found = re.search(r'^version = "([^"]+)"', f.read(), re.M)
    assert found, "packages/jit-core/pyproject.toml names no version"
    return found.group(1)


VERSION = _version()
#: what a user types (README): resolved from the files built here, not from an index
USER_INSTALL = [f"jit-core=={VERSION}", f"jit-backend-onnxrt=={VERSION}"]
#: checks the installed (not editable) packages after the README's example: where they
#: came from, and that the backend plugin is found with its version
INSTALLED_CHECK = """
import os, sys, jit_core, jit_opcodes, jit_backend_onnxrt
for m in (jit_core, jit_opcodes, jit_backend_onnxrt):
    assert m.__file__.startswith(sys.prefix), f"{m.__name__} comes from {m.__file__}"
plugins = {dist: version for _, dist, version in jit_core.list_plugins() if dist}
assert plugins.get("jit-backend-onnxrt") == VERSION, plugins
import paddle
net = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.ReLU())
net.eval()
with paddle.no_grad():
    x = paddle.rand([3, 4])
    y = jit_core.optimize(net, backend="onnxrt")(x)
    assert float((y - net(x)).abs().max()) < 1e-5
# the wheel carries the compiled tensor check's source, and it builds here
from jit_core.runtime import native
assert native.status().startswith("on: "), native.status()
print("installed from the built wheels:", plugins)
"""
#: jit-backend-tensorrt installs from its wheel where TensorRT cannot run and says why
TENSORRT_INSTALLED_CHECK = """
import jit_core
plugins = {dist: version for _, dist, version in jit_core.list_plugins() if dist}
assert plugins.get("jit-backend-tensorrt") == VERSION, plugins
why = jit_core.backends()["tensorrt"].unavailable
assert "tensorrt" in why, why
print("jit-backend-tensorrt from its wheel, unavailable here:", why)
"""


def _readme_example() -> str:
    """The README's first Python example, exactly as a user would paste it."""
    with open("README.md") as f:
        text = f.read()
    start = text.index("```python\n") + len("```python\n")
    return text[start : text.index("```", start)]


@nox.session(python="3.12")
def wheels(session: nox.Session) -> None:
    """What users install is what we test: the sdist and wheel of every package, built
    here; ``pip install jit-core jit-backend-onnxrt`` into a fresh venv, resolved from the
    built files (not editable); the README's first example run there."""
    # build's isolated build environments made by uv (its "uv" extra): pip would make
    # and fill one per package; the user's venv below still gets pip, as users have it
    session.install("build[uv]")
    dist = os.path.abspath(os.path.join(".nox", "dist"))
    shutil.rmtree(dist, ignore_errors=True)
    for pkg in DISTRIBUTIONS:
        # the wheel is built from the sdist: a file missing from the sdist fails here
        session.run("python", "-m", "build", "-q", "--installer", "uv", "--outdir", dist, pkg)
    check_licences(session, dist)
    venv = os.path.join(session.create_tmp(), "user-venv")
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", venv)
    python = os.path.join(venv, "bin", "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # Paddle is the user's choice of build (jit-core names none): the CPU one here
    session.run(*pip, "--find-links", dist, PADDLE_DEFAULT, *USER_INSTALL, external=True)
    env = {"GLOG_minloglevel": "2"}
    session.run(python, "-c", _readme_example(), external=True, env=env)
    session.run(python, "-c", f"VERSION = {VERSION!r}\n" + INSTALLED_CHECK, external=True, env=env)
    session.run(*pip, "--find-links", dist, f"jit-backend-tensorrt=={VERSION}", external=True)
    check = f"VERSION = {VERSION!r}\n" + TENSORRT_INSTALLED_CHECK
    session.run(python, "-c", check, external=True, env=env)


def check_licences(session: nox.Session, dist: str) -> None:
    """Every sdist and wheel ships the licence text its metadata declares (PEP 639:
    ``License-File``, the text under ``.dist-info/licenses/``)."""
    import tarfile
    import zipfile

    checked = 0
    for name in sorted(os.listdir(dist)):
        path = os.path.join(dist, name)
        if name.endswith(".whl"):
            with zipfile.ZipFile(path) as z:
                names = z.namelist()
                meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
                declared = "License-File: LICENSE" in z.read(meta).decode()
                ok = declared and any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
        elif name.endswith(".tar.gz"):
            with tarfile.open(path) as t:
                ok = any(n.count("/") == 1 and n.endswith("/LICENSE") for n in t.getnames())
        else:
            continue
        if not ok:
            session.error(f"{name} ships no LICENSE, or its metadata does not name it")
        checked += 1
    session.log(f"{checked} distributions ship their LICENSE")


@nox.session(python="3.12")
def lint(session: nox.Session) -> None:
    """ruff: lint and formatting; mypy on jit-core and jit-opcodes (pyproject.toml)."""
    session.install(RUFF, *MYPY)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")


@nox.session(python="3.12")
def fmt(session: nox.Session) -> None:
    """Apply ruff's fixes and formatting."""
    session.install(RUFF)
    session.run("ruff", "check", "--fix", ".")
    session.run("ruff", "format", ".")


@nox.session(python="3.12")
def docs(session: nox.Session) -> None:
    """Build the Sphinx site; any warning fails the build."""
    # bytecode and pluggy are small and real; Paddle is mocked (docs/conf.py)
    session.install(*DOCS, "bytecode", "pluggy")
    session.run(
        "sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", "docs/_build/html"
    )


#: what ``./dev demo -- --backend NAME`` installs besides Paddle, jit-core and jit-opcodes
#: (the default ``paddle`` backend needs nothing more; ``auto`` picks among what is installed)
DEMO_BACKENDS = {
    "onnxrt": ["packages/backend-onnxrt"],
    "auto": ["packages/backend-onnxrt"],
    "tvm": ["packages/backend-tvm"],
    "tensorrt": ["packages/backend-tensorrt[trt]"],
}


def demo_backend(args: List[str]) -> str:
    """The backend that demo.py's arguments name (``--backend NAME`` or ``--backend=NAME``)."""
    for i, arg in enumerate(args):
        if arg == "--backend" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--backend="):
            return arg.split("=", 1)[1]
    return "paddle"


@nox.session(python="3.12")
def demo(session: nox.Session) -> None:
    """ResNet18 and a small function on the default backend (another with ``--backend``)."""
    # only what the chosen backend needs: the demo is the first thing a newcomer runs, and
    # every backend with the test tools took four minutes to install on a fresh machine
    packages = ["packages/jit-core", "packages/jit-opcodes"]
    packages += DEMO_BACKENDS.get(demo_backend(session.posargs), [])
    editable = [arg for pkg in packages for arg in ("-e", pkg)]
    session.install(*paddle_for(session), *editable)
    session.run("python", "demo.py", *session.posargs, env={"GLOG_minloglevel": "2"})


#: benchmarks with sessions of their own (they install what they measure)
OWN_SESSION_BENCHES = {"libraries.py"}
#: what bench/libraries.py measures: PaddleNLP 2.8.1, and the versions of its dependencies
#: that it still imports with
LIBRARIES = [
    "paddlenlp==2.8.1",
    "huggingface_hub<0.25",
    "aistudio-sdk==0.2.6",
    "datasets<3",
    "pyarrow<16",
    # what PaddleSeg and PaddleClas import (installed without their pinned dependencies,
    # which clash with PaddleNLP's); opencv and faiss releases that take numpy 1.x
    "opencv-python-headless<4.11",
    "faiss-cpu==1.8.0.post1",
    # built against the numpy 1.x those take (scipy 1.14+ wants numpy 2's C API)
    "scipy<1.14",
    # PaddleNLP imports pip at import time, and a venv made by uv has none
    "pip",
]
#: installed with --no-deps: their own pins (numpy==1.24.4, opencv-python<=4.6) clash
#: with PaddleNLP's, and what they import is in LIBRARIES
VISION_LIBRARIES = ["paddleseg==2.8.0", "paddleclas==2.6.0"]


@nox.session(python=PYTHONS)
def bench(session: nox.Session) -> None:
    """Every script under bench/, each printing its table (bench-libs: the library models);
    ``-- SCRIPT.py ARGS`` runs one script with its arguments (docs/performance.rst)."""
    args = list(session.posargs)
    if args and args[0].endswith(".py"):
        script, args = os.path.basename(args[0]), args[1:]
        if script in OWN_SESSION_BENCHES or not os.path.isfile(os.path.join("bench", script)):
            session.error(f"bench/{script}: not a script `./dev bench` runs (./dev help)")
        scripts = [script]
    else:
        scripts = [s for s in sorted(os.listdir("bench")) if s.endswith(".py")]
        scripts = [s for s in scripts if not s.startswith("_") and s not in OWN_SESSION_BENCHES]
    install_project(session)
    ensure_redis_server(session)
    for script in scripts:
        session.run("python", os.path.join("bench", script), *args, env={"GLOG_minloglevel": "2"})


@nox.session(name="bench-libs", python="3.12")
def bench_libs(session: nox.Session) -> None:
    """bench/libraries.py: PaddleNLP's, PaddleSeg's and PaddleClas's models, in a venv of
    their own."""
    install_project(session)
    session.install(*LIBRARIES)
    session.install("--no-deps", *VISION_LIBRARIES)
    session.run("python", "bench/libraries.py", *session.posargs, env={"GLOG_minloglevel": "2"})
