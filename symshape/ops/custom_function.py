"""Custom ``torch.autograd.Function``s applied to tensors that need gradients.

The forward is traced like any code (under ``no_grad``, as eager runs it); its
outputs then pass through one node that stands for the Function in the
trace's backward. Its VJP is one node of the backward trace that calls the
Function's own ``backward`` when the backward runs, with a context rebuilt
from what the forward kept: the tensors it saved (``ctx.save_for_backward``)
or set as attributes, and its other attributes, sizes as that call's ints::

    t3 = _mm(x, w)                                  # the forward, traced
    t4, = _custom_function(0, (x, w), (t3,), (w,), (s0,))
    ...
    g_x, = _custom_function_backward(0, (w,), (s0,), (g_t4,), ...)   # the backward

so gradients are the Function's own, whatever its forward computes, and the
forward runs once (nothing is recomputed). The context answers
``saved_tensors``, ``needs_input_grad`` and the attributes the forward set;
a gradient the backward returns is checked, reduced to its input's shape and
cast to its dtype as eager's engine does. ``mark_non_differentiable`` and
``set_materialize_grads`` are honoured.

Not traced (the Function runs eagerly at a split, as before): ``mark_dirty``
(an in-place forward), a forward that returns an input as it is (eager makes
it a view whose ``grad_fn`` is the Function's: module backward hooks' own
``BackwardHookFunction`` registers on it), keyword arguments, a forward that sets an attribute
holding a traced tensor inside an object other than a list, tuple or dict, and
``symshape.export``. A tensor the code closed over (an argument, a saved tensor)
is a constant of the trace; one that needs gradients makes the computation run
under eager autograd, which takes the Function's backward to it.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass

import torch

from symshape.ops.grad import needs, vjp
from symshape.ops.registry import register
from symshape.trace.custom_apply import NOT_TRACED, has_setup_context, set_custom_apply
from symshape.trace.errors import TracingError
from symshape.trace.proxy import TensorProxy

log = logging.getLogger("symshape")


class Untraced(Exception):
    """The Function cannot be traced here (see the module's docstring): it runs eagerly."""


@dataclass
class _State:
    """What a traced apply recorded, shared by its forward and backward nodes."""

    cls: type
    attrs: dict  # attribute name -> encoded value (``_encode``)
    n_saved: int
    needs_input_grad: tuple
    materialize: bool
    differentiable: tuple = ()  # per tensor output: does it carry a gradient
    # per output of forward, in order: is it a tensor (backward takes None for the others)
    tensor_outputs: tuple = ()
    tensor_inputs: tuple = ()  # per input of apply: is it a tensor (else its gradient is None)
    # per saved tensor: did it require grad when saved (a backward may ask: checkpoint's)
    saved_grad: tuple = ()

    @property
    def wanted(self) -> list[int]:
        """Positions of the inputs the backward gives a gradient for."""
        return [i for i, w in enumerate(self.needs_input_grad) if w]


_STATES: dict[int, _State] = {}
_keys = itertools.count()


class RecordingCtx:
    """The ``ctx`` a traced forward receives: what it saves and sets is recorded."""

    def __init__(self, needs_input_grad: tuple):
        object.__setattr__(self, "_ss", {"saved": (), "non_diff": [], "materialize": True})
        self.needs_input_grad = needs_input_grad

    def save_for_backward(self, *tensors) -> None:
        self._ss["saved"] = tensors

    def save_for_forward(self, *tensors) -> None:
        raise Untraced("ctx.save_for_forward (forward-mode AD)")

    def mark_dirty(self, *tensors) -> None:
        raise Untraced("ctx.mark_dirty (an in-place forward)")

    def mark_non_differentiable(self, *tensors) -> None:
        self._ss["non_diff"].extend(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self._ss["materialize"] = bool(value)

    @property
    def saved_tensors(self) -> tuple:
        return tuple(self._ss["saved"])


class ReplayCtx:
    """The ``ctx`` the Function's backward receives when the backward runs."""

    def __init__(self, st: _State, tensors: tuple, scalars: tuple):
        saved = tensors[: st.n_saved]
        self.saved_tensors = tuple(map(_as_saved, saved, st.saved_grad or (False,) * len(saved)))
        self.needs_input_grad = st.needs_input_grad
        for name, enc in st.attrs.items():
            setattr(self, name, _decode(enc, tensors, scalars))

    def mark_non_differentiable(self, *tensors) -> None:
        return None  # a backward's call of it changes nothing, as in eager

    def set_materialize_grads(self, value: bool) -> None:
        return None


def _as_saved(t, requires_grad: bool):
    """A saved tensor as eager's backward unpacks it: requiring grad where the one
    saved did (reentrant checkpointing re-runs its function on such inputs, and
    differentiates with respect to those that do)."""
    if requires_grad and isinstance(t, torch.Tensor) and not t.requires_grad:
        return t.detach().requires_grad_()
    return t


def _encode(x, tensors: list, scalars: list):
    """An attribute's value as a spec over ``tensors`` and ``scalars`` (its traced
    parts, run-time inputs of the backward) and constants."""
    t = type(x)
    if t is TensorProxy:
        tensors.append(x)
        return ("t", len(tensors) - 1)
    if isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        scalars.append(x)
        return ("s", len(scalars) - 1)
    if t in (tuple, list, torch.Size):
        return ("seq", t, [_encode(y, tensors, scalars) for y in x])
    if t is dict:
        return ("dict", list(x), [_encode(v, tensors, scalars) for v in x.values()])
    if _holds_traced(x):
        raise Untraced(f"a context attribute, a {t.__name__}, holding traced values")
    return ("c", x)


def _lifted(ctx, x):
    """``x``, or the trace's constant for it when it is a real tensor."""
    if isinstance(x, torch.Tensor) and type(x) is not TensorProxy:
        return ctx.lift(x)
    return x


def _holds_traced(x) -> bool:
    d = getattr(x, "__dict__", None)
    return isinstance(d, dict) and any(
        isinstance(v, (TensorProxy, torch.SymInt, torch.SymFloat)) for v in d.values()
    )


def _decode(enc, tensors, scalars):
    kind = enc[0]
    if kind == "t":
        return tensors[enc[1]]
    if kind == "s":
        return scalars[enc[1]]
    if kind == "seq":
        return enc[1]([_decode(e, tensors, scalars) for e in enc[2]])
    if kind == "dict":
        return {k: _decode(e, tensors, scalars) for k, e in zip(enc[1], enc[2])}
    return enc[1]


def traced_apply(ctx, cls, args: tuple):
    """``cls.apply(*args)`` with inputs that need gradients, traced (the caller runs
    the tracing mode); ``NOT_TRACED`` where it cannot be (nothing recorded)."""
    start = len(ctx.nodes)
    try:
        return _traced_apply(ctx, cls, args, start)
    except (Untraced, TracingError) as e:  # its forward does what a trace cannot
        del ctx.nodes[start:]  # what the forward recorded: unused, the Function runs eagerly
        log.debug("symshape: %s.apply is not traced: %s", cls.__name__, e)
        return NOT_TRACED


def _traced_apply(ctx, cls, args: tuple, start: int):
    if ctx.exporting:
        raise Untraced("symshape.export")
    # a tensor the code closed over: a constant of the trace, which the computation
    # then runs under eager autograd (its gradient reaches that tensor)
    args = tuple(_lifted(ctx, a) for a in args)
    needs_input_grad = tuple(type(a) is TensorProxy and a.requires_grad for a in args)
    fctx = RecordingCtx(needs_input_grad)
    with torch.no_grad():
        out = _forward(cls, fctx, args)
    return _recorded(ctx, cls, fctx, args, out, start)


def _forward(cls, fctx, args: tuple):
    if has_setup_context(cls):
        out = cls.forward(*args)  # the forward without ctx; setup_context sets it
        cls.setup_context(fctx, args, out)
        return out
    return cls.forward(fctx, *args)


def _recorded(ctx, cls, fctx: RecordingCtx, args: tuple, out, start: int):
    outs = out if isinstance(out, tuple) else (out,)
    tensors = [o for o in outs if type(o) is TensorProxy]
    if any(isinstance(o, torch.Tensor) and type(o) is not TensorProxy for o in outs):
        raise Untraced("a forward that returns a tensor it did not compute from its inputs")
    if any(o is a for o in tensors for a in args):  # eager returns a view with its grad_fn,
        raise Untraced("a forward that returns an input as it is")  # which hooks read
    # a tensor the code closed over: a constant of the trace, as an argument is
    saved = [_lifted(ctx, s) for s in fctx._ss["saved"]]
    attrs, scalars = {}, []
    for name, value in vars(fctx).items():
        if name not in ("_ss", "needs_input_grad"):
            attrs[name] = _encode(value, saved, scalars)
    non_diff = {id(t) for t in fctx._ss["non_diff"]}
    diff = tuple(id(t) not in non_diff and _differentiable(ctx, t) for t in tensors)
    key = next(_keys)
    _STATES[key] = _State(cls, attrs, len(fctx._ss["saved"]), fctx.needs_input_grad,
                          fctx._ss["materialize"], diff,
                          tuple(type(o) is TensorProxy for o in outs),
                          tuple(isinstance(a, torch.Tensor) for a in args),
                          tuple(type(t) is TensorProxy and t.requires_grad for t in saved))  # fmt: skip
    metas = tuple(ctx.meta(t).like(requires_grad=d) for t, d in zip(tensors, diff))
    if not metas:
        return out
    # the inputs by position (a gradient per tensor); other objects need no place in it
    inputs = tuple(a if type(a) is TensorProxy else None for a in args)
    node_args = (key, inputs, tuple(tensors), tuple(saved), tuple(scalars))
    made = ctx.emit(CUSTOM_FUNCTION, node_args, {}, metas)
    for m, d in zip(made, diff):  # ctx.mark_non_differentiable: no grad, as eager's
        if not d and m._ss_meta.requires_grad:
            m._ss_var.meta = m._ss_meta = m._ss_meta.like(requires_grad=False)
            with torch._C.DisableTorchFunction():
                m.requires_grad_(False)
    kept = {id(t) for t in saved}
    computed = {id(v) for n in ctx.nodes[start:] for v in n.outputs}
    for t, m in zip(tensors, made):  # an output the forward allocated and kept nothing of
        if id(t._ss_var) in computed and id(t._ss_var) in ctx.allocated and id(t) not in kept:
            ctx.allocated.add(id(m._ss_var))  # may be updated in place as a new value
    # eager's apply gives the forward's own tensor objects their grad_fn: a reference the
    # forward kept (`z.append(out)`) is the output too, so each now stands for its output
    for t, m in zip(tensors, made):
        t._ss_var, t._ss_meta = m._ss_var, m._ss_meta
        if t.requires_grad != m.requires_grad:
            with torch._C.DisableTorchFunction():
                t.requires_grad_(m.requires_grad)
    return out


def _differentiable(ctx, t) -> bool:
    return ctx.meta(t).dtype.is_floating_point or ctx.meta(t).dtype.is_complex


def custom_function(key, args, outs, saved, scalars):
    """The forward node: the forward's outputs, as they are (the backward is the
    node's VJP). Where the computation runs its ops under eager autograd (it made
    tensors that require grad, or a gradient reaches a tensor the code closed
    over) and an input needs a gradient, the outputs come out of an
    autograd.Function whose backward is the Function's own."""
    if torch.is_grad_enabled() and any(
        isinstance(a, torch.Tensor) and a.requires_grad for a in args
    ):
        return _EagerBackward.apply(_Call(key, outs, saved, scalars), *args)
    return tuple(outs)


class _Call:
    """What one call's forward node holds for ``_EagerBackward`` (not a tensor input)."""

    def __init__(self, key, outs, saved, scalars):
        self.key, self.outs, self.saved, self.scalars = key, outs, saved, scalars


class _EagerBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, call: _Call, *args):
        st = _STATES[call.key]
        ctx.call = call
        ctx.args_meta = [
            (tuple(a.shape), a.dtype, a.device) if isinstance(a, torch.Tensor) else None
            for a in args
        ]
        ctx.set_materialize_grads(st.materialize)
        outs = tuple(o.view_as(o) for o in call.outs)  # tensors of this Function's own
        ctx.mark_non_differentiable(*(o for o, d in zip(outs, st.differentiable) if not d))
        return outs

    @staticmethod
    def backward(ctx, *grads):
        call, metas = ctx.call, ctx.args_meta
        st = _STATES[call.key]
        shapes = [metas[i] for i in st.wanted]
        got = iter(custom_function_backward(call.key, call.saved, call.scalars, grads, shapes))
        return (None, *(next(got) if w else None for w in st.needs_input_grad))


@register("custom_function", "symshape.ops.custom_function.custom_function")
def _forward_rule(ctx, op, key, args, outs, saved, scalars):
    raise AssertionError("symshape bug: custom_function is recorded by traced_apply only")


CUSTOM_FUNCTION = _forward_rule
CUSTOM_FUNCTION.extra["aliases"] = 2  # its outputs are the forward's (``outs``), as they are
# a trace of the same call made again (a split's continuation) has a new state key: the
# Function's class and what it saved and set stand for it
CUSTOM_FUNCTION.extra["sig"] = lambda args: (_state_sig(_STATES[args[0]]), *args[1:])


def _state_sig(st) -> str:
    attrs = sorted((k, repr(v)) for k, v in st.attrs.items())
    return f"{st.cls.__module__}.{st.cls.__qualname__}{attrs!r}{st.n_saved}{st.differentiable}"


def custom_function_backward(key, saved, scalars, grads, shapes):
    """The Function's own backward, with a context rebuilt from the forward's."""
    st = _STATES[key]
    rctx = ReplayCtx(st, tuple(saved), tuple(scalars))
    if not all(st.tensor_outputs):  # eager's backward takes None for each other output
        it = iter(grads)
        grads = [next(it) if t else None for t in st.tensor_outputs]
    with torch.no_grad():
        res = st.cls.backward(rctx, *grads)
    res = res if isinstance(res, tuple) else (res,)
    n = len(st.needs_input_grad)
    if len(res) < n or any(r is not None for r in res[n:]):
        raise RuntimeError(
            f"function {st.cls.__name__}Backward returned an incorrect number of gradients "
            f"(expected {n}, got {len(res)})"
        )
    for i, (r, t) in enumerate(zip(res, st.tensor_inputs)):
        if r is not None and not t:
            raise RuntimeError(
                f"function {st.cls.__name__}Backward returned a gradient different than None "
                f"at position {i + 1}, but the corresponding forward input was not a Variable"
            )
    out = []
    for i, shape_dtype in zip(st.wanted, shapes):
        out.append(_checked(st.cls.__name__, i, res[i], *shape_dtype))
    return tuple(out)


def _checked(name: str, i: int, g, shape, dtype, device):
    """A gradient as eager's engine takes it: zeros for None (marked: where they reach
    the input as they are, the Function gives it None, as eager's leaves ``.grad``
    None), reduced to the input's shape where it was broadcast, in its dtype."""
    if g is None:  # zeros that say they stand for None: returned as they are, None again
        z = torch.zeros(shape, dtype=dtype, device=device)
        z._ss_none = True
        return z
    if tuple(g.shape) != tuple(shape):
        try:
            g = g.sum_to_size(shape)
        except RuntimeError:
            raise RuntimeError(
                f"Function {name}Backward returned an invalid gradient at index {i} - got "
                f"{list(g.shape)} but expected shape compatible with {list(shape)}"
            ) from None
    return g if g.dtype == dtype else g.to(dtype)


@register("custom_function_backward", "symshape.ops.custom_function.custom_function_backward")
def _backward_rule(ctx, op, key, saved, scalars, grads, shapes):
    metas = tuple(ctx.out_meta(s, d, dev) for s, d, dev in shapes)
    return ctx.emit(op, (key, saved, scalars, grads, shapes), {}, metas)


_backward_rule.differentiable = False
CUSTOM_BACKWARD = _backward_rule


@vjp("custom_function")
def _(ctx, grads, outs, key, args, fouts, saved, scalars):
    st = _STATES[key]
    paths = [i for i, a in enumerate(args) if needs(a)]
    if not paths:
        return {}
    gs = []
    for g, o in zip(grads, outs):
        if g is None and st.materialize:
            g = torch.zeros_like(o)
        gs.append(g)
    shapes = []
    for i in st.wanted:
        m = ctx.meta(args[i])
        shapes.append((tuple(m.shape), m.dtype, m.device))
    bw = CUSTOM_BACKWARD
    got = bw.rule(ctx, bw, key, tuple(saved), tuple(scalars), tuple(gs), tuple(shapes))
    by_input = dict(zip(st.wanted, got))
    return {1: [by_input.get(i) if i in paths else None for i in range(len(args))]}


set_custom_apply(traced_apply)
