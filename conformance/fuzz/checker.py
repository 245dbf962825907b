"""Run one generated program eagerly and through ``jit_core.optimize`` and compare
everything a user could observe: results, exceptions, printed output, and the state the
program mutates (module globals, the object argument, the layer, the inputs)."""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import linecache
import os
import tempfile
import traceback
from typing import Any, Callable, Optional, Tuple

import numpy as np
import paddle

import jit_core

from ..helpers import _tolerance
from .programs import Spec, example_inputs, render

_dir: Optional[str] = None
_counter = itertools.count()


def _source_file(source: str) -> str:
    """A real file, and the same text in ``linecache``: the JIT and Paddle read source
    and line numbers of what they capture (``to_static`` refuses code without source)."""
    global _dir
    if _dir is None:
        _dir = tempfile.mkdtemp(prefix="jit_fuzz_")
    path = os.path.join(_dir, f"prog_{os.getpid()}_{next(_counter)}.py")
    with open(path, "w") as f:
        f.write(source)
    linecache.cache[path] = (len(source), None, source.splitlines(True), path)
    return path


class Mismatch(AssertionError):
    pass


def _float_close(actual: float, expected: float, what: str) -> None:
    rtol = max(1e-5, _tolerance["rtol"])
    atol = max(1e-6, _tolerance["scaled_atol"] * abs(expected))
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def same(actual: Any, expected: Any, what: str) -> None:
    """Structural equality; tensors and floats within the backend's tolerance."""
    if isinstance(expected, paddle.Tensor):
        if not isinstance(actual, paddle.Tensor):
            raise Mismatch(f"{what}: expected a Tensor, got {type(actual).__name__}")
        if actual.dtype != expected.dtype or list(actual.shape) != list(expected.shape):
            raise Mismatch(
                f"{what}: {actual.dtype}{list(actual.shape)} != "
                f"{expected.dtype}{list(expected.shape)}"
            )
        if actual.stop_gradient != expected.stop_gradient:
            raise Mismatch(
                f"{what}: stop_gradient {actual.stop_gradient} != {expected.stop_gradient}"
            )
        e = expected.numpy()
        rtol, atol = 1e-5, 1e-6
        if _tolerance["rtol"] and e.dtype.kind == "f" and e.size:
            rtol = max(rtol, _tolerance["rtol"])
            finite = np.abs(e[np.isfinite(e)])
            if finite.size:
                atol = max(atol, _tolerance["scaled_atol"] * float(finite.max()))
        try:
            np.testing.assert_allclose(actual.numpy(), e, rtol=rtol, atol=atol)
        except AssertionError as err:
            # NumPy's message starts with an empty line: the first line names the value,
            # which is what a long run files its failures by
            raise Mismatch(f"{what}: values differ{err}") from None
    elif isinstance(expected, (list, tuple)):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            raise Mismatch(f"{what}: {_short(actual)} != {_short(expected)}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            same(a, e, f"{what}[{i}]")
    elif isinstance(expected, dict):
        if type(actual) is not type(expected) or list(actual) != list(expected):
            raise Mismatch(f"{what}: {_short(actual)} != {_short(expected)}")
        for k in expected:
            same(actual[k], expected[k], f"{what}[{k!r}]")
    elif isinstance(expected, float) and isinstance(actual, float):
        try:
            _float_close(actual, expected, what)
        except AssertionError as err:
            raise Mismatch(str(err)) from None
    elif type(actual) is not type(expected) or actual != expected:
        raise Mismatch(f"{what}: {_short(actual)} != {_short(expected)}")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) < 300 else text[:300] + "..."


class _Side:
    """One copy of the program: its own module namespace, object argument and layer."""

    def __init__(self, code, name: str, layer: bool):
        self.ns = {"__name__": name, "__file__": code.co_filename}
        exec(code, self.ns)
        self.obj = self.ns["Box"]()
        if layer:
            paddle.seed(1234)  # both copies get the same parameters
            self.entry = self.ns["Net"]()
            # another instance of the class, with parameters of its own: a function given
            # one layer and then the other shares its captures between them
            paddle.seed(4321)
            self.other = self.ns["Net"]()
        else:
            self.entry = self.ns["f"]
        self.layer = layer

    def call(self, fn: Callable, x, k, m) -> Tuple[Any, Optional[BaseException], str]:
        out = io.StringIO()
        result, exc = None, None
        with contextlib.redirect_stdout(out):
            try:
                result = fn(x, k, m, self.obj)
            except Exception as e:  # noqa: BLE001 - compared against the other side
                exc = e
        return result, exc, out.getvalue()

    def state(self) -> dict:
        state = {
            "LOG": self.ns["LOG"],
            "COUNT": self.ns["COUNT"],
            "obj": dict(vars(self.obj)),
        }
        if self.layer:
            for key, net in (("layer", self.entry), ("other", self.other)):
                state[key] = {"calls": net.calls, "hist": net.hist, "last": net.last}
                state[key + " params"] = [p.detach() for p in net.parameters()]
        return state


def _call_net(net, x, k, m, obj):
    return net(x, k, m, obj)


#: whether a layer program also runs through a function given two instances of its class
INSTANCES = True


def check(
    spec: Spec, backend: str, source: Optional[str] = None, instances: bool = INSTANCES
) -> None:
    """Raise :class:`Mismatch` (the program's source in the message) on any difference."""
    source = source if source is not None else render(spec)
    try:
        _check(spec, backend, source, instances)
    except Exception as err:
        raise Mismatch(
            f"{type(err).__name__}: {err}\n\n--- program ({backend}) ---\n{source}"
        ) from err


def _own_message(exc: BaseException) -> bool:
    """The program's own raises have messages worth comparing; Paddle's carry C++ stack
    traces that say where, not what."""
    return any(w in str(exc) for w in ("fuzz", "helper", "missing"))


def _check(spec: Spec, backend: str, source: str, instances: bool) -> None:
    path = _source_file(source)
    code = compile(source, path, "exec")
    eager = _Side(code, "fuzz_eager", spec.layer)
    jitted = _Side(code, "fuzz_jit", spec.layer)
    fast = jit_core.optimize(jitted.entry, backend=backend)
    calls = [(i, xn, kn, m, None) for i, (xn, kn, m) in enumerate(example_inputs(spec))]
    if spec.layer and instances:
        # the first two inputs again, through one function given the first layer and then
        # its twin of the same class: the second call is served by a shared capture
        shared = jit_core.optimize(_call_net, backend=backend)
        calls += [
            (f"{i} of the {which} layer, through a function", xn, kn, m, (shared, which))
            for i, (xn, kn, m) in enumerate(example_inputs(spec)[:2])
            for which in ("first", "other")
        ]
    for n, (i, xn, kn, m, through) in enumerate(calls):
        where = f"call {i} (x{list(xn.shape)}, m={m})"
        xe, ke = paddle.to_tensor(xn), paddle.to_tensor(kn)
        xj, kj = paddle.to_tensor(xn), paddle.to_tensor(kn)
        if through is None:
            eager_fn, jit_fn = eager.entry, fast
        else:
            fn, which = through
            net_e = eager.entry if which == "first" else eager.other
            net_j = jitted.entry if which == "first" else jitted.other
            eager_fn = functools.partial(_call_net, net_e)
            jit_fn = functools.partial(fn, net_j)
        # both sides from the same seed: random ops draw alike, and leave the generator
        # where eager leaves it (a first call's capture and build draw nothing)
        seed = spec.seed + n
        paddle.seed(seed)
        res_e, exc_e, out_e = eager.call(eager_fn, xe, ke, m)
        next_e = paddle.rand([3])
        paddle.seed(seed)
        res_j, exc_j, out_j = jitted.call(jit_fn, xj, kj, m)
        next_j = paddle.rand([3])
        if type(exc_e) is not type(exc_j):
            detail = "".join(traceback.format_exception(type(exc_j), exc_j, exc_j.__traceback__))
            raise Mismatch(
                f"{where}: eager raised {exc_e!r}, compiled raised {exc_j!r}\n"
                + (detail[-3000:] if exc_j is not None else "")
            )
        if exc_e is None:
            same(res_j, res_e, f"{where}: result")
        elif _own_message(exc_e) and str(exc_e) != str(exc_j):
            raise Mismatch(f"{where}: exception message {str(exc_j)!r} != {str(exc_e)!r}")
        if out_j != out_e:
            raise Mismatch(f"{where}: printed {out_j!r}, eager printed {out_e!r}")
        same(jitted.state(), eager.state(), f"{where}: state")
        same(next_j, next_e, f"{where}: the random stream after the call")
        same([xj, kj], [xe, ke], f"{where}: inputs after the call")
