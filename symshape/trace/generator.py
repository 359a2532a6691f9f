"""``GeneratorProxy``: what traced code sees instead of a ``torch.Generator`` argument.

A jit function that receives a generator reads and advances it on every call,
as eager does. The generator is an input of the trace (checked by type and
device, not identity), so one trace serves any generator of that device::

    def computation(x, s0, g):
        # g: Generator cpu
        t0 = _randn((s0, 4), generator=g)  # f32[s0, 4]
        return t0

The proxy is a ``torch.Generator`` (a CPU one of its own that draws nothing),
so PyTorch's argument parser accepts it for ``generator=``; the tracing mode
then hands it to the op's rule, which records the generator's Var. Its methods
that read or change the state (``manual_seed``, ``get_state``, ``set_state``)
become nodes too, routed to their rules in ``symshape/ops/random.py``; those that
return a value only the run knows (``seed``, ``initial_seed``) are refused.
"""

from __future__ import annotations

import torch

from symshape.trace.errors import TracingError


class GeneratorProxy(torch.Generator):
    """A traced generator: an SSA name (``_ss_var``, its meta a ``GeneratorMeta``)."""

    def __new__(cls, ctx, var, meta):
        return super().__new__(cls)  # a CPU generator: never drawn from

    def __init__(self, ctx, var, meta):
        self._ss_ctx = ctx
        self._ss_var = var
        self._ss_meta = meta

    @property
    def device(self) -> torch.device:
        return self._ss_meta.device

    def manual_seed(self, seed):
        from symshape.trace.mode import route  # late: mode imports construction, which imports us

        route(torch.Generator.manual_seed, self, seed)
        return self

    def get_state(self):
        from symshape.trace.mode import route  # late: mode imports construction, which imports us

        return route(torch.Generator.get_state, self)

    def set_state(self, new_state):
        from symshape.trace.mode import route  # late: mode imports construction, which imports us

        route(torch.Generator.set_state, self, new_state)
        return self

    def _refuse(self, what: str):
        raise TracingError(
            f"Generator.{what}() on a generator passed to a jit-compiled function returns a "
            "value known only when the trace runs, which Python code cannot branch on while "
            f"tracing. Fix: call {what}() outside the compiled function, or seed it with "
            "g.manual_seed(n) (recorded in the trace)."
        )

    def seed(self):
        self._refuse("seed")

    def initial_seed(self):
        self._refuse("initial_seed")

    def clone_state(self):
        self._refuse("clone_state")

    def graphsafe_get_state(self):
        self._refuse("graphsafe_get_state")

    def graphsafe_set_state(self, state):
        self._refuse("graphsafe_set_state")

    def __reduce__(self):
        raise TracingError("a traced Generator cannot be pickled or copied")

    def __deepcopy__(self, memo):
        raise TracingError("a traced Generator cannot be copied")

    def __repr__(self) -> str:
        return f"GeneratorProxy({self._ss_var.name}: {self._ss_meta})"


def is_generator_proxy(x) -> bool:
    return type(x) is GeneratorProxy


# the global generator's functions, as torch defines them (the tracer routes these names
# while it traces; the originals are what the trace's rules are registered for)
_GLOBAL = {
    "manual_seed": torch.random.manual_seed,
    "get_state": torch.random.get_rng_state,
    "set_state": torch.random.set_rng_state,
    "seed": torch.random.seed,
    "initial_seed": torch.random.initial_seed,
}


class DefaultGeneratorProxy(torch.Generator):
    """``torch.default_generator`` as the tracing thread sees it (trace/mode.py hides
    the attribute while a trace runs): its methods are C methods that would read
    and set the real state once, at trace time, with the state read baked into
    the trace. Here they become the trace's nodes for the global generator, as
    ``torch.get_rng_state()`` and friends do, so each call reads and sets the
    state of its own run. Ops given ``generator=`` this proxy draw from the
    global generator. Outside a trace (a proxy the code kept) each method is the
    real generator's."""

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def _call(self, name: str, *args):
        from symshape.trace.mode import _routing, route  # late: mode imports us

        if _routing.current() is None:
            return getattr(torch._C.default_generator, name)(*args)
        return route(_GLOBAL[name], *args)

    def manual_seed(self, seed):
        self._call("manual_seed", seed)
        return self

    def get_state(self):
        return self._call("get_state")

    def set_state(self, new_state):
        self._call("set_state", new_state)
        return self

    def seed(self):
        return self._call("seed")

    def initial_seed(self):
        return self._call("initial_seed")

    def _refuse(self, what: str, *args):
        from symshape.trace.mode import _routing  # late: mode imports us

        if _routing.current() is None:
            return getattr(torch._C.default_generator, what)(*args)
        raise TracingError(
            f"torch.default_generator.{what}() inside a jit-compiled function would read or "
            "set the generator once, while tracing, not on each call. Fix: call it outside "
            "the compiled function, or use torch.get_rng_state() / torch.set_rng_state() / "
            "torch.manual_seed(), which the trace records."
        )

    def get_offset(self):
        return self._refuse("get_offset")

    def set_offset(self, offset):
        return self._refuse("set_offset", offset)

    def clone_state(self):
        return self._refuse("clone_state")

    def graphsafe_get_state(self):
        return self._refuse("graphsafe_get_state")

    def graphsafe_set_state(self, state):
        return self._refuse("graphsafe_set_state", state)

    def __reduce__(self):
        return (getattr, (torch._C, "default_generator"))

    def __repr__(self) -> str:
        return "torch.default_generator (traced)"


__all__ = ["DefaultGeneratorProxy", "GeneratorProxy", "is_generator_proxy"]
