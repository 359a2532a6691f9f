"""Random numbers: the global generator's state, and ops that draw from it.

Every op here is ``random`` (never merged by CSE) and keeps its place in the
trace, so a trace draws the same numbers in the same order as eager. The
Python-level state functions (``torch.manual_seed``, ``torch.seed``,
``torch.get_rng_state``, ``torch.set_rng_state``) reach these rules through the tracing mode's
``PYTHON_LEVEL`` routing; they become nodes, so seeding inside a compiled
function happens on every call, not once at trace time::

    _manual_seed(42)
    t0 = _get_rng_state()                 # u8[5056]
    t1 = _bernoulli(x)                    # f32[s0, s1]
    _set_rng_state(t0)

A ``torch.Generator`` the traced function received is an input of the trace
(``GeneratorMeta``, trace/generator.py): ops that take ``generator=`` name its Var,
so every call draws from, and advances, the generator it is given::

    t0 = _randn((s0, 4), generator=g)     # f32[s0, 4]
    _normal_(t0, generator=g)
    _generator_manual_seed(g, 7)

Shapes: ``bernoulli`` and the in-place fills keep their input's; ``normal``
broadcasts its tensor arguments (or takes a size); ``multinomial`` replaces
the last dimension by ``num_samples``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from symshape.ops._helpers import broadcast_shapes, device_of, generator_kw, is_tensor, sym_tuple
from symshape.ops.registry import register, tensor_method
from symshape.sym import logic as L

# -- the generator's state ------------------------------------------------------------


@register("manual_seed", "torch.random.manual_seed", torch.manual_seed, effect=True, random=True)
def manual_seed(ctx, op, seed):
    ctx.emit(op, (seed,), {}, effect=True)
    return torch.default_generator


@register(
    "seed", "symshape.ops.runtime.seed", torch.seed, torch.random.seed, effect=True, random=True
)
def seed(ctx, op):
    """``torch.seed()`` on every call, in its place among the draws: a fresh seed
    from the operating system, an int only the run knows (``s = torch.seed();
    torch.manual_seed(s % n)``)."""
    u = ctx.unbacked("torch.seed()", min=0, max=2**64 - 1)
    ctx.emit_binding(op, (), {}, [u])
    return ctx.symint(u)


@register(
    "initial_seed",
    "symshape.ops.runtime.initial_seed",
    torch.initial_seed,
    torch.random.initial_seed,
    random=True,
)
def initial_seed(ctx, op):
    """``torch.initial_seed()``: read on every call (a ``manual_seed`` between
    calls changes it), an int only the run knows."""
    u = ctx.unbacked("torch.initial_seed()", min=0, max=2**64 - 1)
    ctx.emit_binding(op, (), {}, [u])
    return ctx.symint(u)


_STATE_SIZE = torch.default_generator.get_state().numel()  # fixed by the generator's kind


@register("get_rng_state", "torch.random.get_rng_state", torch.get_rng_state, random=True)
def get_rng_state(ctx, op):
    return ctx.emit(op, (), {}, ctx.out_meta((_STATE_SIZE,), torch.uint8, torch.device("cpu")))


@register("set_rng_state", "torch.random.set_rng_state", torch.set_rng_state, effect=True)
def set_rng_state(ctx, op, new_state):
    m = ctx.meta(new_state)
    if m.dtype is not torch.uint8:
        raise TypeError(f"set_rng_state expects a torch.ByteTensor, found {m.dtype}")
    ctx.emit(op, (new_state,), {}, effect=True)


# -- a Generator the traced function received (trace/generator.py) ------------------------------


@register("generator_manual_seed", "torch.Generator.manual_seed", effect=True, random=True)
def generator_manual_seed(ctx, op, g, seed):
    ctx.sym(seed)  # an int, as eager requires
    ctx.emit(op, (g, seed), {}, effect=True)
    return g


@register("generator_get_state", "torch.Generator.get_state", random=True)
def generator_get_state(ctx, op, g):
    n = ctx.generator_meta(g).state_size
    return ctx.emit(op, (g,), {}, ctx.out_meta((n,), torch.uint8, torch.device("cpu")))


@register("generator_set_state", "torch.Generator.set_state", effect=True, random=True)
def generator_set_state(ctx, op, g, new_state):
    m = ctx.meta(new_state)
    if m.dtype is not torch.uint8 or m.ndim != 1:
        raise TypeError(
            f"Generator.set_state expects a 1-d torch.ByteTensor (what get_state() returns), "
            f"found a {m.dtype} tensor of {m.ndim} dimensions"
        )
    ctx.emit(op, (g, new_state), {}, effect=True)
    return g


# -- drawing ---------------------------------------------------------------------------


def _no_generator(op, kwargs) -> None:
    if kwargs.pop("generator", None) is not None:
        raise TypeError(f"{op.name}() got an unexpected keyword argument 'generator'")


def _like_input(ctx, op, input, *args, **kwargs):
    m = ctx.meta(input)
    kwargs |= generator_kw(ctx, op, kwargs, m.device)
    if not (m.dtype.is_floating_point or m.dtype.is_complex):
        raise RuntimeError(f"{op.name} expects a floating point input, found {m.dtype}")
    return ctx.emit(op, (input, *args), kwargs, ctx.out_meta(m.shape, m.dtype, m.device))


register("bernoulli", "torch.bernoulli", tensor_method("bernoulli"), random=True)(_like_input)


def _fill_(ctx, op, input, *args, **kwargs):
    m = ctx.meta(input)
    kwargs |= generator_kw(ctx, op, kwargs, m.device)
    ctx.emit(op, (input, *args), kwargs, effect=True)
    return input


for _n in (
    "uniform_",
    "normal_",
    "cauchy_",
    "exponential_",
    "geometric_",
    "log_normal_",
    "random_",
):
    register(_n, f"torch.Tensor.{_n}", effect=True, random=True)(_fill_)
register("bernoulli_", "torch.Tensor.bernoulli_", effect=True, random=True)(_fill_)


@register("normal", "torch.normal", random=True)
def normal(ctx, op, mean, std=1.0, size=None, **kwargs):
    generator = kwargs.pop("generator", None)
    tensors = [t for t in (mean, std) if is_tensor(t)]
    if not tensors:  # normal(float, float, size, dtype=..., ...)
        if size is None:
            raise TypeError("normal() with float mean and std needs a size")
        shape = sym_tuple(ctx, (size,))
        dtype = kwargs.get("dtype") or torch.get_default_dtype()
        device = torch.device(kwargs.get("device") or "cpu")
        kwargs |= generator_kw(ctx, op, {"generator": generator}, device)
        return ctx.emit(op, (mean, std, shape), kwargs, ctx.out_meta(shape, dtype, device))
    if size is not None or kwargs:
        raise TypeError("normal() with a tensor mean or std takes no size or options")
    shape = broadcast_shapes(ctx, *(ctx.meta(t).shape for t in tensors))
    dtype = ctx.meta(tensors[0]).dtype
    for t in tensors:
        if not ctx.meta(t).dtype.is_floating_point:
            raise RuntimeError(f"normal expects floating point tensors, found {ctx.meta(t).dtype}")
    device = device_of(ctx, *tensors)
    kw = generator_kw(ctx, op, {"generator": generator}, device)
    return ctx.emit(op, (mean, std), kw, ctx.out_meta(shape, dtype, device))


@register("multinomial", "torch.multinomial", tensor_method("multinomial"), random=True)
def multinomial(ctx, op, input, num_samples, replacement=False, **kwargs):
    m = ctx.meta(input)
    kw = generator_kw(ctx, op, kwargs, m.device)
    if kwargs:
        raise TypeError(f"multinomial() got an unexpected keyword argument '{next(iter(kwargs))}'")
    if m.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    n = ctx.sym(num_samples)
    if not ctx.guard_or(L.gt(n, 0), True):
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    if not replacement and not ctx.guard_or(L.le(n, m.shape[-1]), True):
        raise RuntimeError(
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement"
        )
    shape = (*m.shape[:-1], n)
    return ctx.emit(
        op, (input, num_samples, replacement), kw, ctx.out_meta(shape, torch.int64, m.device)
    )


@register("rrelu", "torch.rrelu", F.rrelu, random=True)
def rrelu(ctx, op, input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, **kw):
    if inplace:
        raise NotImplementedError("F.rrelu(inplace=True) is not supported while tracing")
    _no_generator(op, kw)
    m = ctx.meta(input)
    if training and torch.is_grad_enabled() and m.requires_grad:
        # the gradient multiplies by each element's random slope: keep it
        metas = (ctx.out_meta(m.shape, m.dtype, m.device),) * 2
        return ctx.emit(_rrelu_noise, (input, lower, upper), {}, metas)[0]
    return ctx.emit(
        op, (input, lower, upper, training), {}, ctx.out_meta(m.shape, m.dtype, m.device)
    )


def rrelu_noise(input, lower, upper):
    """Eager's ``F.rrelu(training=True)`` (``at::rrelu``: ``rrelu_with_noise`` into a
    fresh noise tensor, so the same random draws), also returning that noise: the
    slope of each element, 1 where the input is >= 0."""
    noise = torch.empty_like(input, memory_format=torch.contiguous_format)
    return torch.ops.aten.rrelu_with_noise(input, noise, lower, upper, True), noise


@register("rrelu_noise", "symshape.ops.random.rrelu_noise", random=True)
def _rrelu_noise(ctx, op, input, lower, upper):
    m = ctx.meta(input)
    metas = (ctx.out_meta(m.shape, m.dtype, m.device),) * 2
    return ctx.emit(op, (input, lower, upper), {}, metas)
