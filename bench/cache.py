"""The first call of ResNet18 in a fresh process, by where the compile cache has it.

    python bench/cache.py [--backend all|onnxrt|tvm] [--repeat N] [--size 224]

Per backend (``onnxrt``; ``tvm`` on Python 3.10+, with sampled schedules: tuning is
``bench/resnet.py``'s business), each in a new process, batch 1, ``freeze=True``,
``no_grad``:

- (a) empty caches: the export (and for tvm the build) runs;
- (a+) the same with a remote cache to fill: what writing to Redis adds;
- (b) warm local cache: the model or library comes from the disk;
- (c) empty local cache, warm remote cache: it comes from Redis (and is kept on disk).

The remote cache is a redis-server this script starts on a free loopback port and stops
at the end (Debian: ``apt-get install redis-server``; ``./dev bench`` installs it), with a
signing key. The target: (c) within 1.5x of (b). Eager Paddle's first call
in a fresh process is the reference row. Each cell is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

FIRST_CALL = """
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import paddle, jit_core
from paddle.vision.models import resnet18
paddle.seed(0)
net = resnet18(); net.eval()
x = paddle.rand([1, 3, SIZE, SIZE])
fn = net if BACKEND is None else jit_core.optimize(net, backend=BACKEND, freeze=True, **OPTIONS)
with paddle.no_grad():
    start = time.perf_counter()
    fn(x)
    spent = time.perf_counter() - start
from jit_core.cache import disk as compile_cache
print(json.dumps({"s": spent, "cache": {k: dict(v) for k, v in compile_cache.stats.items()}}))
"""


def first_call(
    backend: Optional[str], size: int, local: str, url: Optional[str], **options
) -> dict:
    code = FIRST_CALL.replace("SIZE", str(size)).replace("BACKEND", repr(backend))
    code = code.replace("OPTIONS", repr(options))
    env = dict(os.environ, JIT_CORE_CACHE_DIR=local, GLOG_minloglevel="2")
    env.pop("JIT_CORE_REMOTE_CACHE", None)
    if url:
        env.update(JIT_CORE_REMOTE_CACHE=url, JIT_CORE_CACHE_KEY="bench key")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


class Redis:
    """A redis-server on a free loopback port, for this run only (``timeout`` bounds it)."""

    def __init__(self):
        exe = shutil.which("redis-server")
        if exe is None:
            sys.exit(
                "bench/cache.py needs redis-server (Debian: `apt-get install redis-server`; "
                "`./dev bench` installs it)"
            )
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            ["timeout", "3600", exe, "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"redis://127.0.0.1:{self.port}/0"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        sys.exit("redis-server did not start")

    def flush(self) -> None:
        import redis

        redis.Redis(host="127.0.0.1", port=self.port).flushdb()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # ``timeout`` passes it on
            self.proc.wait(10)


def measure(backend: str, size: int, repeat: int, server: Redis, options: dict) -> Dict:
    cells: Dict[str, List[float]] = {"a": [], "a+": [], "b": [], "c": []}
    origins = {}
    with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as tmp:
        for i in range(repeat):
            server.flush()
            cold = os.path.join(tmp, f"cold{i}")
            cells["a"].append(first_call(backend, size, cold, None, **options)["s"])
            filler = os.path.join(tmp, f"filler{i}")
            cells["a+"].append(first_call(backend, size, filler, server.url, **options)["s"])
            # interleaved: machine drift hits (b) and (c) alike
            got = first_call(backend, size, cold, None, **options)
            cells["b"].append(got["s"])
            origins["b"] = got["cache"]
            got = first_call(backend, size, os.path.join(tmp, f"empty{i}"), server.url, **options)
            cells["c"].append(got["s"])
            origins["c"] = got["cache"]
    result = {k: statistics.median(v) for k, v in cells.items()}
    result["origins"] = origins
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="all", choices=["all", "onnxrt", "tvm"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size", type=int, default=224)
    args, _ = parser.parse_known_args()  # ./dev bench hands every script the same args

    import jit_core

    installed = jit_core.backends()
    backends = []
    onnxrt = installed.get("onnxrt")
    # (onnxrt and tvm are n/a on 3.13: paddle2onnx 2.x has no wheels there)
    if args.backend in ("all", "onnxrt") and onnxrt is not None and not onnxrt.unavailable:
        backends.append(("onnxrt", {}))
    tvm = installed.get("tvm")
    if args.backend in ("all", "tvm") and tvm is not None and not tvm.unavailable:
        backends.append(("tvm", {"tune": "off"}))
    if not backends:
        print("bench/cache.py: neither onnxrt nor tvm is installed and runnable here")
        return

    server = Redis()
    try:
        with tempfile.TemporaryDirectory(prefix="jit_bench_cache_") as tmp:
            eager = statistics.median(
                first_call(None, args.size, tmp, None)["s"] for _ in range(args.repeat)
            )
        rows = [
            (name, measure(name, args.size, args.repeat, server, opts)) for name, opts in backends
        ]
    finally:
        server.stop()

    print(
        f"\nResNet18 {args.size}x{args.size}, batch 1, first call of a fresh process, seconds "
        f"(median of {args.repeat}); Python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    print(f"eager Paddle: {eager:.2f} s")
    head = ("backend", "(a) empty", "(a+) +redis", "(b) local", "(c) remote", "c / b", "<= 1.5x")
    print("{:10} {:>10} {:>12} {:>10} {:>11} {:>6} {:>8}".format(*head))
    for name, r in rows:
        ratio = r["c"] / r["b"]
        print(
            f"{name:10} {r['a']:10.2f} {r['a+']:12.2f} {r['b']:10.2f} {r['c']:11.2f} "
            f"{ratio:6.2f} {'yes' if ratio <= 1.5 else 'NO':>8}"
        )
    for name, r in rows:
        # where the artifact came from, to show each column measured what it says
        print(f"{name}: cache counts (b) {r['origins']['b']}, (c) {r['origins']['c']}")


if __name__ == "__main__":
    main()
