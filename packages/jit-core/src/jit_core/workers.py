"""Worker processes for the native steps of a build that can end the process they run in.

A backend's native library can die of a signal on a graph it was never meant to see (ONNX's
shape inference divides by zero on some dynamic models, an LLVM assertion aborts, an
uncaught C++ exception calls ``std::terminate``). In the user's process that ends the
program, not just the graph. A backend runs such a step in a ``Worker`` instead: a child
process started once and kept, which answers one JSON request per line. A worker that
dies raises ``WorkerDied`` naming the step it was in, the signal, and the last lines the
library printed; the backend turns that into its compile error, and the graph falls back
like any other that the backend refuses.

The protocol, both ends in this module (``Worker`` here, ``serve`` in the child): the
child first writes a line ``{"ready": true, ...}`` (what it says of itself lands in
``Worker.info``); for each request it may write ``{"step": NAME}`` lines (the step under
way), ``{"log": [LOGGER, LEVEL, MESSAGE]}`` lines (re-logged here, so ``caplog``, the
``JIT_CORE_LOGS`` channels and progress output see them as if logged here), and then one
reply line: any object without those two keys. What the library prints goes to the
child's stderr, kept in a file for the error message.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, cast

log = logging.getLogger("jit_core")


class WorkerDied(Exception):
    """The worker process ended while it served a request."""

    def __init__(self, step: str, how: str, stderr: str = ""):
        super().__init__(f"{how} ({step})" if step else how)
        #: the step it was in: its last ``{"step": ...}`` line, "its start" or "the request"
        self.step = step
        #: the signal or exit code, and the last lines it printed
        self.how = how
        #: the end of what it printed (up to 2,000 characters)
        self.stderr = stderr


def child_argv(entry: str) -> List[str]:
    """The command that starts a worker whose end is ``entry``, "module:function" (a
    function that calls ``serve``)."""
    return [sys.executable, "-m", "jit_core.workers", entry]


class Worker:
    """A child process started on first use (or by ``start``) and kept for every request.

    ``argv`` runs the child (``child_argv``); ``env`` is added to this
    process's environment. Requests are served one at a time. A process forked from this
    one (jit-eval's workers) starts a worker of its own rather than talk to its parent's.
    """

    def __init__(self, argv: Sequence[str], name: str, env: Optional[Dict[str, str]] = None):
        self.argv: List[str] = list(argv)
        self.name = name
        self.env = dict(env or {})
        #: what the child said of itself in its ready line
        self.info: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._proc: Optional[subprocess.Popen] = None
        self._stderr: Optional[IO[bytes]] = None
        self._ready = False
        self._owner = os.getpid()

    def start(self) -> None:
        """Start the child if none runs, without waiting for it to be ready (its imports
        then overlap with the caller's work)."""
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> subprocess.Popen:
        if self._owner != os.getpid():
            self._proc, self._owner = None, os.getpid()
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stderr = tempfile.TemporaryFile()
        env = dict(os.environ, PYTHONWARNINGS="ignore", GLOG_minloglevel="2", **self.env)
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
            text=True,
        )
        self._ready = False
        log.debug("%s worker started (pid %d)", self.name, self._proc.pid)
        return self._proc

    def request(
        self, req: Dict[str, Any], on_step: Optional[Callable[[str], None]] = None
    ) -> Dict[str, Any]:
        """Send one request; its reply. Raises ``WorkerDied`` where the child ended.
        ``on_step(name)`` is called at each step the child announces, while the child
        goes on: this process can do its own share of the work meanwhile. What it raises
        is raised once the reply has been read (the next request must not read it)."""
        with self._lock:
            proc = self._start_locked()
            # started with stdin=PIPE, stdout=PIPE and text=True: both are text pipes
            stdin, stdout = cast(IO[str], proc.stdin), cast(IO[str], proc.stdout)
            step = "its start"
            failed: Optional[BaseException] = None
            answer: Optional[Dict[str, Any]] = None
            try:
                if not self._ready:
                    hello = stdout.readline()
                    if hello:
                        self.info = json.loads(hello)
                        self._ready = True
                if self._ready:
                    step = "the request"
                    stdin.write(json.dumps(req) + "\n")
                    stdin.flush()
                    for line in stdout:
                        reply = json.loads(line)
                        if "step" in reply:
                            step = reply["step"]
                            if on_step is not None and failed is None:
                                try:
                                    on_step(step)
                                except Exception as e:  # noqa: BLE001 - raised after the reply
                                    failed = e
                        elif "log" in reply:
                            name, level, message = reply["log"]
                            logging.getLogger(name).log(level, "%s", message)
                        else:
                            self.take_stderr()  # forget what a good request printed
                            answer = reply
                            break
            except (BrokenPipeError, OSError, ValueError):
                if proc.poll() is None:  # a line that is not the protocol's: start afresh
                    proc.kill()
            except BaseException:
                # interrupted (Ctrl-C, a timeout's exception): the worker may still answer
                # this request, and its reply must not be read as the next one's
                proc.kill()
                proc.wait()
                self._proc = None
                raise
            if answer is not None:
                if failed is not None:
                    raise failed
                return answer
            proc.wait()
            self._proc = None
            tail = self.take_stderr(2000)
            raise WorkerDied(step, f"{how_it_ended(proc.returncode)}{_detail(tail)}", tail)

    def take_stderr(self, limit: int = 600) -> str:
        """The last ``limit`` characters the child wrote to stderr, which is emptied."""
        file = self._stderr
        if file is None:
            return ""
        file.seek(0)
        text = file.read().decode(errors="replace")
        file.seek(0)
        file.truncate()
        return text[-limit:]

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and self._owner == os.getpid() and proc.poll() is None:
            try:
                cast(IO[str], proc.stdin).close()  # started with stdin=PIPE
                proc.wait(timeout=5)
            except Exception:  # noqa: BLE001 - shutting down anyway
                proc.kill()


def scratch_dir(size: int) -> Optional[str]:
    """Where the files a worker reads and writes (a model, its inputs) go: a memory file
    system with room for ``size`` bytes four times over (what the worker writes back,
    with room to spare), else None: the usual temporary directory. Writing ResNet18's
    45 MB model to a disk took up to 0.1 s of its 0.6 s first call; to memory about
    0.4 ms a MB."""
    shm = "/dev/shm"
    try:
        room = os.statvfs(shm)
    except (AttributeError, OSError):  # no such directory, or not a POSIX system
        return None
    if room.f_bavail * room.f_frsize < 4 * size + (64 << 20) or not os.access(shm, os.W_OK):
        return None
    return shm


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"it died of {signal.Signals(-returncode).name}"
        except ValueError:
            return f"it died of signal {-returncode}"
    return f"its process exited with code {returncode}"


def _detail(stderr: str) -> str:
    """The last lines the child printed before it ended (a C++ exception's among them)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f": {' | '.join(lines[-4:])[-400:]}" if lines else ""


# -- the child's end --


class _Forward(logging.Handler):
    def __init__(self, send: Callable[[Dict[str, Any]], None]):
        super().__init__()
        self._send = send

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._send({"log": [record.name, record.levelno, record.getMessage()]})
        except Exception:  # noqa: BLE001 - a log line must not end a build
            self.handleError(record)


def serve(
    handle: Callable[[Dict[str, Any], Callable[[str], None]], Dict[str, Any]],
    info: Dict[str, Any],
    forward: str = "jit_core",
    level: int = logging.INFO,
) -> None:
    """The child's loop: say ``info``, then answer each request line with
    ``handle(request, step)``; ``step(name)`` tells the parent the step under way. What
    the loggers under ``forward`` log at ``level`` and above is re-logged by the parent."""
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything printed goes to stderr, off the protocol
    sys.stdout = sys.stderr
    lock = threading.Lock()

    def send(message: Dict[str, Any]) -> None:
        with lock:
            replies.write(json.dumps(message) + "\n")

    # a crash ends the worker plainly, with the library's last words on stderr: not with
    # a report from a fatal-signal handler another import installed (Paddle's prints a
    # dozen lines of its own, where the library's message would be)
    for name in ("SIGSEGV", "SIGFPE", "SIGABRT", "SIGBUS", "SIGILL"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    logger = logging.getLogger(forward)
    logger.addHandler(_Forward(send))
    logger.setLevel(level)
    logger.propagate = False
    send(dict(info, ready=True))
    for line in sys.stdin:
        send(handle(json.loads(line), lambda name: send({"step": name})))


if __name__ == "__main__":
    _module, _, _function = sys.argv[1].partition(":")
    getattr(importlib.import_module(_module), _function)()
