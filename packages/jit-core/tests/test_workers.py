"""jit_core.workers: a child process that serves requests, and what its death becomes."""

from __future__ import annotations

import logging
import sys

import pytest

from jit_core.workers import Worker, WorkerDied

#: a worker that echoes each request, logs it, and dies of the signal a request names
CHILD = """
import logging, os, signal, sys
if sys.argv[1:] == ["paddle"]:
    import paddle  # its fatal-signal handlers must not speak for the worker's crash
from jit_core.workers import serve

def handle(request, step):
    step("reading")
    logging.getLogger("jit_core.test").info("got %s", request["n"])
    logging.getLogger("jit_core.test").debug("below the level: not sent")
    if "die" in request:
        step("dying")
        sys.stderr.write("a library's last words\\n")
        sys.stderr.flush()
        os.kill(os.getpid(), getattr(signal, request["die"]))
    return {"echo": request["n"], "pid": os.getpid()}

serve(handle, {"answers": 42})
"""


@pytest.fixture
def worker():
    w = Worker([sys.executable, "-c", CHILD], "test")
    yield w
    w.close()


@pytest.fixture
def worker_with_paddle():
    w = Worker([sys.executable, "-c", CHILD, "paddle"], "test")
    yield w
    w.close()


def test_requests_are_answered_in_one_process_and_its_logs_logged_here(worker, caplog):
    with caplog.at_level("INFO", logger="jit_core.test"):
        first = worker.request({"n": 1})
        second = worker.request({"n": 2})
    assert (first["echo"], second["echo"]) == (1, 2)
    assert first["pid"] == second["pid"]
    assert worker.info == {"answers": 42, "ready": True}
    assert [r.getMessage() for r in caplog.records if r.name == "jit_core.test"] == [
        "got 1",
        "got 2",
    ]


@pytest.mark.parametrize("signal_name", ["SIGFPE", "SIGABRT"])
def test_a_death_names_the_step_the_signal_and_the_last_words(worker_with_paddle, signal_name):
    worker = worker_with_paddle
    pid = worker.request({"n": 0})["pid"]
    with pytest.raises(WorkerDied) as died:
        worker.request({"n": 1, "die": signal_name})
    assert died.value.step == "dying"
    assert died.value.how == f"it died of {signal_name}: a library's last words"
    # the next request starts a new worker
    assert worker.request({"n": 2})["pid"] != pid


def test_a_worker_that_cannot_start_says_so():
    w = Worker([sys.executable, "-c", "import sys; sys.stderr.write('no module\\n'); exit(3)"], "t")
    with pytest.raises(WorkerDied) as died:
        w.request({})
    assert died.value.step == "its start"
    assert died.value.how == "its process exited with code 3: no module"


def test_an_interrupted_request_leaves_no_reply_for_the_next(worker, monkeypatch):
    first = worker.request({"n": 0})

    def interrupt(*args):
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C while the worker ran

    monkeypatch.setattr(logging.getLogger("jit_core.test"), "log", interrupt)
    with pytest.raises(KeyboardInterrupt):
        worker.request({"n": 1})
    monkeypatch.undo()
    # a new worker answers the next request: not the interrupted one's reply
    second = worker.request({"n": 2})
    assert second["echo"] == 2 and second["pid"] != first["pid"]
