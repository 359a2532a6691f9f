"""The padded interpreter: a trace run with its padded symbols at their buckets.

Each tensor is held at its physical (padded) size with its tags
(``layout.py``); each size an expression of a padded symbol is held twice, as
its physical value (what a shape argument takes) and its true value (what an
arithmetic argument takes: ``x / x.size(1)`` divides by the true length).
Every op runs through its rule (``rules.py``); an op without one that meets a
padded tensor or size refuses (``PaddingError``).
"""

from __future__ import annotations

import torch

from symshape.ir.node import ASSERT, CONST, SYM, TensorMeta, Var, map_vars
from symshape.ir.runtime import assert_failed_fn
from symshape.ir.trace import Trace
from symshape.jit.padding import rules
from symshape.jit.padding.buckets import PadPlan
from symshape.jit.padding.errors import PaddingError
from symshape.jit.padding.layout import Masks, PadDim, PadInt, cut, pad, sizes
from symshape.jit.padding.state import State
from symshape.sym import expr as E


class PaddedRun:
    """``trace`` run padded by ``plan``: a callable with the trace's signature.

    ``keep``: output positions returned padded, not cut (the saved tensors a
    backward reads, padded as well)."""

    def __init__(self, trace: Trace, plan: PadPlan, keep: frozenset = frozenset()):
        self.trace = trace
        self.plan = plan
        self.keep = keep
        # tags of inputs that come padded by position (a backward's saved tensors,
        # as its forward laid them out: a merged [B*T] is not a prefix of B*T)
        self.input_tags: dict = {}
        self.output_tags: dict = {}  # tags of the kept outputs, by position
        self._sources = self._symbol_sources()
        # inputs with a padded dimension (parameters and the like have none)
        padded = plan.padded
        self.padded_inputs = frozenset(
            i
            for i, v in enumerate(trace.inputs)
            if isinstance(v.meta, TensorMeta) and any(padded(e) for e in v.meta.shape)
        )
        self._check_rules()

    def _check_rules(self) -> None:
        """Refuse at once, naming the op, where a node meets padding and has no rule."""
        for n in self.trace.nodes:
            if n.op in (SYM, ASSERT, CONST) or n.op.name in rules.RULES:
                continue
            if self._touches_padding(n):
                raise rules.no_rule(n)

    def _touches_padding(self, n) -> bool:
        padded = self.plan.padded
        for v in n.inputs():
            m = v.meta
            if isinstance(m, TensorMeta) and any(padded(d) for d in m.shape):
                return True
            if isinstance(m, E.Expr) and padded(m):
                return True
        return any(
            isinstance(v.meta, TensorMeta) and any(padded(d) for d in v.meta.shape)
            for v in n.outputs
        )

    def bindings(self, args, known: dict | None = None) -> tuple[dict, dict] | None:
        """``(physical, true)`` values of the trace's symbols for ``args`` (and the
        true values ``known`` already: a backward's, from its forward); None when a
        size is above its largest bucket."""
        true: dict = dict(known) if known else {}
        ints, dims = self._sources
        for sym, i in ints:
            if sym not in true and isinstance(args[i], (int, torch.SymInt)):
                true[sym] = args[i]
        for sym, i, d in dims:
            if sym not in true and isinstance(args[i], torch.Tensor):
                true[sym] = args[i].shape[d]
        phys = self.plan.physical(true)
        return None if phys is None else (phys, true)

    def _symbol_sources(self) -> tuple[list, list]:
        """Where each symbol's value is in the arguments: int inputs first, then
        the first tensor dimension of that size."""
        ints, dims, seen = [], [], set()
        for i, v in enumerate(self.trace.inputs):
            if isinstance(v.meta, E.Symbol):
                ints.append((v.meta, i))
        for i, v in enumerate(self.trace.inputs):
            if isinstance(v.meta, TensorMeta):
                for d, e in enumerate(v.meta.shape):
                    if type(e) is E.Symbol and (e.name, i) not in seen:
                        seen.add((e.name, i))
                        dims.append((e, i, d))
        return ints, dims

    def __call__(self, *args):
        b = self.bindings(args)
        if b is None:
            raise PaddingError("a size is above its largest bucket")
        return self.run(args, *b)

    def run(self, args, phys: dict, true: dict):
        """The trace's outputs for ``args``, run at ``phys`` and cut to ``true``."""
        st = self._interpret(args, phys, true)
        return self._outputs(st)

    def run_padded(self, args, phys: dict, true: dict):
        """``(outputs, tags)``: the outputs still padded, and the tags of every
        value (by id of its Var), for a caller that cuts them itself."""
        st = self._interpret(args, phys, true)
        out = map_vars(self.trace.output, st.read)
        return sizes(out, False), st.tags

    def _interpret(self, args, phys: dict, true: dict):
        masks = Masks(phys, true, self.plan.padded, None)
        st = State(masks, self.plan)
        padded, env = self.padded_inputs, st.env
        for i, (v, a) in enumerate(zip(self.trace.inputs, args)):
            if i in padded or not isinstance(a, torch.Tensor):
                st.bind_input(v, a, self.input_tags.get(i))
            else:  # no padded dimension: as it comes
                env[id(v)] = a
                st.tags[id(v)] = (None,) * a.dim()
        consts = self.trace.constants
        fail = assert_failed_fn(self.trace.asserts)
        for n in self.trace.nodes:
            if n.op is SYM:
                expr, pairs = n.args
                p = E.evaluate(expr, {s: sizes(st.read(v), True) for s, v in pairs})
                t = E.evaluate(expr, {s: sizes(st.read(v), False) for s, v in pairs})
                st.env[id(n.outputs[0])] = PadInt(p, t) if self.plan.padded(expr) else p
            elif n.op is ASSERT:
                cond, index, pairs = n.args
                values = {s: sizes(st.read(v), False) for s, v in pairs}
                if not E.evaluate(cond, values):
                    fail(index, **{v.name: values[s] for s, v in pairs})
            elif n.op is CONST:
                st.env[id(n.outputs[0])] = n.args[0]
            else:
                rules.apply(st, n, consts)
        return st

    def _outputs(self, st):
        def out(v: Var):
            x = st.read(v)
            if type(x) is PadInt:
                return x.true
            if isinstance(x, torch.Tensor) and id(v) not in keep:
                tags = st.tags.get(id(v))
                if tags is not None and any(t is not None for t in tags):
                    return cut(x, tags, st.masks).contiguous()
            return x

        outs = self.trace.output
        keep = {id(v) for i, v in enumerate(outs) if i in self.keep} if self.keep else set()
        if keep and not self.output_tags:
            self.output_tags = {i: st.tags.get(id(outs[i])) for i in self.keep}
        return map_vars(outs, out)


__all__ = ["PadDim", "PadInt", "PaddedRun", "pad"]
