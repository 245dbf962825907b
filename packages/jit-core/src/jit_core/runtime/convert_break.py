"""The code of a capture that stopped at an instruction the graph can break at: the
frame's replacement (the graph, then the instruction in CPython), the resume functions
that run the rest of the frame, and the drivers of loops whose body is captured as a
function of its own."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from ..codegen import breaks as graph_breaks
from ..codegen import loops
from ..codegen import resume as resume_codes
from ..config import CONTROLS
from ..errors import RAISES, RECONSTRUCT, Unsupported
from ..logs import breaks_log
from ..sources import LocalSource
from .frame_cache import FrameResult
from .frame_calls import LoopCall, LoopExit, ResumeCall, empty_closure

if TYPE_CHECKING:  # pragma: no cover
    from .convert_frame import Traced

#: names whose use reads the variables of the running frame: code that names one is never
#: split by a graph break (the resume function would be another frame, with other locals)
_FRAME_READERS = frozenset({"locals", "_getframe", "currentframe"})


def _reads_own_frame(code: types.CodeType) -> bool:
    return not _FRAME_READERS.isdisjoint(code.co_names)


class BreakCompiler:
    """The graph-break half of ``FrameCompiler`` (a mixin: it reads the options, the
    backend, the compile context and the caches of resume functions and loop bodies of
    the frame compiler it is part of)."""

    # what it reads of the frame compiler it is part of
    ctx: Any
    options: Any
    backend: Any
    _resumes: Dict[Any, Any]
    _loop_bodies: Dict[Any, types.CodeType]
    _body_roots: Dict[types.CodeType, types.CodeType]

    def _where_to_break(self, code: types.CodeType, e: Unsupported):
        """A ``graph_breaks.Where`` when the graph can break for ``e`` in ``code``; else
        why not ("" when there is nothing to add to the reason)."""
        if CONTROLS.full_graph(self.options) or e.root_instruction is None:
            return ""
        if e.reads_frame or _reads_own_frame(code):
            return (
                "the frame reads its own variables (locals(), sys._getframe()), which the "
                "code after a graph break, a function of its own, would not have: the frame "
                "runs as it is"
            )
        # (a resumed frame that starts at the loop captures nothing before it, and so
        # runs eagerly rather than break before the loop again: see capture)
        return graph_breaks.where_to_break(code, e.root_instruction, e.category == RAISES)

    def loop_call(self, code, head: int, nstack: int, live, f_globals) -> Optional[LoopCall]:
        """The driver of the loop at ``head`` of ``code`` whose body is captured as a
        function of its own (``codegen.loops``), or None when the loop cannot be."""
        key = ("loop", code, head, nstack, tuple(live))
        call = self._resumes.get(key)
        if call is not None:
            return call
        # (values below the loop's own, an enclosing loop's, stay with the driver:
        # plan_loop refuses a body that reaches below them)
        plan = loops.plan_loop(code, head)
        if not isinstance(plan, loops.LoopPlan):
            breaks_log.info("the loop at %s:%d runs eagerly: %s", code.co_name, head, plan)
            return None
        body_code = self._loop_bodies.get((code, head))
        if body_code is None:
            body_code = self._loop_bodies[(code, head)] = loops.build_body_code(code, plan)
            self.ctx.adopt(body_code, code)
        body = types.FunctionType(
            body_code, f_globals, body_code.co_name, None, empty_closure(body_code)
        )
        call = self._resumes[key] = LoopCall(self.ctx, code, plan, body, tuple(live), f_globals)
        return call

    def body_root(self, code: types.CodeType) -> types.CodeType:
        """The loop body a resume function was made for (through breaks of breaks), or
        ``code`` itself."""
        return self._body_roots.get(code, code)

    def serves_every_value(self, body: types.CodeType, names) -> str:
        """Why the captures of a loop's ``body`` (and of its breaks' resume functions)
        cannot serve every value of the Python numbers ``names`` the loop carries, or ""
        when they can: the backend takes numbers as graph inputs, ``dynamic`` is not
        False, the body has not been made static or sent past its recompile limit, and
        none of its captures needed one of them as a Python value (``x[i]``)."""
        if not self.backend.number_inputs:
            return f"the backend {self.backend.name!r} takes no Python numbers as graph inputs"
        if self.options.dynamic is False:
            return "optimize(dynamic=False) keeps every number a constant"
        cache = self.ctx.cache.get(body)
        if cache is None:
            return ""
        if cache.static_reason is not None or cache.limit_reason is not None:
            return f"its body is captured per value: {cache.static_reason or cache.limit_reason}"
        pinned = [n for n in names if LocalSource(n).name() in cache.pinned_numbers]
        if pinned:
            return f"its body needs {pinned[0]!r} as a Python value (a capture per value)"
        return ""

    def eager_loop(self, code, plan: loops.LoopPlan, f_globals) -> types.FunctionType:
        """The loop function of the ``while`` loop of ``plan``: the whole loop as one call
        (``loops.build_body_code(..., whole=True)``), for ``LoopCall`` to run eagerly."""
        key = ("whole", code, plan.head)
        fn = self._resumes.get(key)
        if fn is None:
            loop_code = loops.build_body_code(code, plan, whole=True)
            self.ctx.adopt(loop_code, code)
            fn = self._resumes[key] = types.FunctionType(
                loop_code, f_globals, loop_code.co_name, None, empty_closure(loop_code)
            )
        return fn

    def resume_call(self, code, offset: int, nstack: int, live, f_globals) -> ResumeCall:
        key = (code, offset, nstack, tuple(live))
        call = self._resumes.get(key)
        if call is None:
            try:
                resume_code = resume_codes.build_resume_code(code, offset, nstack, live)
            except (ValueError, RuntimeError) as e:
                # the bytecode library refuses the entry (a stack it cannot follow)
                raise Unsupported(
                    f"the rest of {code.co_name} cannot be entered at offset {offset}: {e}",
                    category=RECONSTRUCT,
                ) from e
            if loops.is_body(code):
                # it keeps the body's exits, which read every name
                loops.BODY_CODES.add(resume_code)
                self._body_roots[resume_code] = self._body_roots.get(code, code)
            fn = types.FunctionType(
                resume_code, f_globals, resume_code.co_name, None, empty_closure(resume_code)
            )
            self.ctx.adopt(resume_code, code)
            call = self._resumes[key] = ResumeCall(self.ctx, fn)
        return call

    def _break_code(self, frame, code: types.CodeType, traced: Traced, compiled, stop, where):
        """``(result, resume codes)`` of a capture that stopped at ``stop``: the frame's
        replacement runs the graph, the breaking instruction in CPython and the resume
        functions (or the loop, a body at a time). ``stop.reason`` says where it broke."""
        resumes: List[types.CodeType] = []
        loop_body: List[str] = []
        point = traced.point  # traced with ``stop``: up to the instruction it broke at
        assert point is not None, "the capture did not stop where it broke before"

        def make_resume(offset: int, nstack: int, live) -> Callable:
            if point.before_loop and where.kind == "loop" and offset == point.next_offset:
                loop = self.loop_call(code, offset, nstack, live, frame.f_globals)
                if loop is not None:
                    resumes.append(loop.body.__code__)
                    loop_body.append(loop.body.__code__.co_name)
                    return loop
            leave = loops.exit_at(code, offset, nstack)
            if leave is not None and set(leave.names) <= set(live):
                return LoopExit(leave, live)
            call = self.resume_call(code, offset, nstack, live, frame.f_globals)
            resumes.append(call.fn.__code__)
            return call

        try:
            new_code, hooked_code = (
                graph_breaks.build_break_code(
                    code,
                    compiled,
                    traced.sources,
                    traced.tensors,
                    point,
                    traced.shared,
                    self.ctx.hooked_call,
                    make_resume,
                    rearm=rearm,
                )
                for rearm in (None, self.ctx.rearm)
            )
        except Unsupported as again:
            raise stop.could_not_break(again.reason) from None
        stop.move_to_root()
        # the entry keeps the break for explain(): not the frames of the capture that
        # its traceback holds (the translator, the example inputs: the first call's
        # tensors would live as long as the entry)
        stop.__traceback__ = stop.__context__ = stop.__cause__ = None
        if point.before_loop and loop_body:
            stop.reason = (
                f"{stop.reason} (in a loop: the loop runs in Python and its body is "
                f"captured as {loop_body[0]}, once per iteration)"
            )
        elif point.before_loop and where.kind == "raises":
            stop.reason = (
                f"{stop.reason} (the graph breaks before the instruction, which raises "
                "the error in Python)"
            )
        elif point.before_loop and where.kind == "block":
            stop.reason = (
                f"{stop.reason} (in a try or with block: the graph breaks before the "
                "block, which runs in Python with its handlers)"
            )
        elif point.before_loop:
            stop.reason = f"{stop.reason} (in a loop: the graph breaks before the loop)"
        result = FrameResult(new_code, True)
        result.hooked = FrameResult(hooked_code, True)
        return result, list(dict.fromkeys(resumes))  # (both codes asked for them)


__all__ = ["BreakCompiler"]
