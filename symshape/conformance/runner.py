"""Checking one OpInfo against eager PyTorch, forward and backward, with its
scalar arguments traced as constants and as dynamic arguments.

For each OpInfo, its own sample generator gives float32 CPU inputs (float64
ones with ``requires_grad`` for gradients, where the op supports them).
Samples are grouped by *structure*: the same pytree of (input, args, kwargs),
the same tensor dtypes and ranks, and the same non-tensor arguments. One
``symshape.jit(dynamic=True)`` function per group closes over the non-tensor
arguments and takes the tensors; it is traced at the group's first sample and
then run at the others and at a *cropped* copy of the first (sizes >= 3
shrunk, keeping which sizes are 0, 1 or equal; eager decides whether the op
still accepts it). Every result is compared with eager's (``assert_close``, exact
dtype and shape, NaNs equal); with gradients, ``torch.autograd.grad`` of both
for the same random cotangents.

Each OpInfo is checked twice. In the *constant* columns the int and float
arguments are constants of the traced function, as above. In the *dynamic
scalar* columns they are arguments of the traced function too (``fn(inp,
*args, **kwargs)`` with every int and float leaf passed in, so that under
``dynamic=True`` they are symbols), and samples that differ only in those
values share one jit function: an op that needs a value specializes it with a
guard, and another value retraces (which sizes are 1 and equal, and the scalar
values themselves, are the structure a trace may specialize on). Samples with
no int or float argument are the same in both, and are run once.

Each column (forward, backward) of an OpInfo is classified, worst first:

- ``wrong``: a value, dtype, shape or structure differs from eager's (a
  soundness bug);
- ``crash``: any other exception (a bug), with its text;
- ``unsupported``: a clear error at trace time (``UnsupportedOpError``,
  ``DataDependentError``, ``NoGradientRuleError``, a ``NotImplementedError``
  raised by a symshape rule, or another ``TracingError``, which says what
  cannot be represented in a trace; one that reports a symshape bug is a crash);
- ``recompiles``: all match, but a group needed more traces than it has
  distinct structures: which sizes are 1 (eager's broadcasting branches on
  it), which sizes are equal (eager code compares shapes: ``mask.shape !=
  input.shape``), the values of scalar arguments, each tensor's strides class
  (the prologue checks it: ``layout_class``), and the output's structure
  (``unbind`` returns one tensor per element of a dimension);
- ``pass``; ``skipped``: no sample to compare (no float32 support, every
  sample rejected by eager, or no differentiable output).

An OpInfo with many structures is checked on at most ``MAX_GROUPS`` of them
(evenly spread, so the same ones on every run) and ``MAX_PER_GROUP`` samples
of each, which keeps the full sweep to minutes.

Ops whose values are uninitialized memory (``VALUES_UNDEFINED``) are compared
on structure, dtype and shape only, as PyTorch's own OpInfo tests do.
"""

from __future__ import annotations

import contextlib
import math
import re
import signal
import threading
import time
import traceback
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.utils._pytree as pytree

import symshape
from symshape.autograd import NoGradientRuleError
from symshape.conformance._opdb import full_name
from symshape.jit.guards.layouts import dense_order, narrowed_dim
from symshape.ops.fallback import recording as fallback_recording
from symshape.trace.proxy import contiguous_strides

STATUSES = ("pass", "recompiles", "unsupported", "crash", "wrong")
# Bounds on the work per OpInfo column (a few OpInfos generate over a thousand samples):
# at most MAX_GROUPS structures, evenly spread, and MAX_PER_GROUP samples of each
# (in a dynamic-scalar column, whose groups join those that differ in scalar values
# only, taken in turn from each set of values).
MAX_GROUPS, MAX_PER_GROUP = 48, 8
VALUES_UNDEFINED = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
)
# ops that grow a tensor in place: the elements past its old size are uninitialized
# memory, so only the old ones are compared
GROWS_UNDEFINED = frozenset({"resize_", "resize_as_"})
_RANK = {"skipped": -1, **{s: i for i, s in enumerate(STATUSES)}}


class Mismatch(AssertionError):
    """symshape's result differs from eager's."""


class BudgetExceeded(Exception):
    """An OpInfo ran past its time budget."""


@dataclass
class Column:
    """The outcome of one column (forward or backward) of one OpInfo."""

    status: str = "skipped"
    reason: str = ""
    samples: int = 0  # samples compared with eager
    rejected: int = 0  # samples eager itself rejects (skipped)
    groups: int = 0
    traces: int = 0

    def note(self, status: str, reason: str) -> None:
        if _RANK[status] > _RANK[self.status]:
            self.status, self.reason = status, reason


@dataclass
class OpResult:
    name: str
    forward: Column = field(default_factory=Column)
    backward: Column = field(default_factory=Column)
    differentiable: bool = False
    seconds: float = 0.0
    forward_dtype: torch.dtype | None = None  # float32 unless the op has no float32 kernel
    # the same, with int and float arguments passed as dynamic arguments of the trace
    dyn_forward: Column = field(default_factory=Column)
    dyn_backward: Column = field(default_factory=Column)
    scalars: str = "both"  # which of the two kinds of columns ran: see ``check_op``
    fallback: list = field(default_factory=list)  # functions traced by the meta-kernel fallback


# the result columns: (attribute, label), constant scalars then dynamic ones
COLUMNS = (
    ("forward", "forward"),
    ("backward", "backward"),
    ("dyn_forward", "forward, dynamic scalars"),
    ("dyn_backward", "backward, dynamic scalars"),
)


def is_scalar(x) -> bool:
    """An int or float argument: a symbol of the trace in the dynamic-scalar columns."""
    return type(x) in (int, float)


@dataclass
class Case:
    """One sample as flat leaves: the tensors become the jit function's inputs."""

    leaves: list
    spec: object
    out_fn: Callable

    @property
    def tensor_pos(self) -> list[int]:
        return [i for i, x in enumerate(self.leaves) if isinstance(x, torch.Tensor)]

    def input_pos(self, dynamic: bool) -> list[int]:
        """The leaves the jit function takes: the tensors, and with ``dynamic`` the
        int and float arguments too."""
        return [
            i
            for i, x in enumerate(self.leaves)
            if isinstance(x, torch.Tensor) or (dynamic and is_scalar(x))
        ]

    def tensors(self) -> list[torch.Tensor]:
        return [self.leaves[i] for i in self.tensor_pos]

    def has_scalars(self) -> bool:
        return any(is_scalar(x) for x in self.leaves)

    def inputs(self, dynamic: bool) -> list:
        """Fresh copies of the tensors (and, with ``dynamic``, the scalars) to call with."""
        return [
            _clone(x) if isinstance(x, torch.Tensor) else x
            for x in (self.leaves[i] for i in self.input_pos(dynamic))
        ]

    def key(self, dynamic: bool = False) -> tuple:
        """What samples sharing one jit function have in common: the tree, the tensor
        kinds and the other arguments (with ``dynamic``, only the type of an int or
        float argument: its value is an input)."""
        parts = []
        for x in self.leaves:
            if isinstance(x, torch.Tensor):
                parts.append(("T", x.dtype, x.dim(), x.requires_grad, x.layout))
            elif dynamic and is_scalar(x):
                parts.append((type(x).__name__,))
            else:
                parts.append((type(x).__name__, repr(x)))
        return (str(self.spec), tuple(parts))

    def pattern(self) -> tuple:
        """The shape facts eager code may branch on without a bug in symshape: which
        sizes are 1 (broadcasting), and which sizes equal which (``a.shape != b.shape``);
        the values of scalar arguments; and each tensor's layout class (``layout_class``)."""
        sizes = [d for t in self.tensors() for d in t.shape]
        first = {}
        return (
            tuple(d == 1 for d in sizes),
            tuple(first.setdefault(d, len(first)) for d in sizes),
            tuple(repr(x) for x in self.leaves if is_scalar(x)),
            tuple(layout_class(t) for t in self.tensors()),
        )


def layout_class(t: torch.Tensor) -> tuple:
    """The strides class the jit's prologue checks (a trace serves one): contiguous,
    dense in another dimension order (a transpose, a Fortran-order matrix), or a
    slice along one dimension. Any other layout (strides of size-0 and size-1
    dimensions unlike a contiguous tensor's) is traced with static sizes, so its
    exact sizes and strides are its class."""
    if t.layout != torch.strided:
        return (str(t.layout),)
    if t.is_contiguous() and t.stride() == contiguous_strides([max(n, 1) for n in t.shape]):
        return ("contiguous",)
    order = dense_order(t)
    if order is not None:
        return ("dense", order)
    narrow = narrowed_dim(t)
    if narrow is not None:
        return ("slice", narrow[0])
    return ("static", tuple(t.shape), t.stride())


def _case(sample) -> Case:
    leaves, spec = pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
    return Case(leaves, spec, sample.output_process_fn_grad)


def _wrapper(op_fn: Callable, case: Case, dynamic: bool = False) -> Callable:
    """``f(*inputs)``: calls the op with the case's other arguments (``inputs`` are
    ``case.inputs(dynamic)``)."""
    consts = list(case.leaves)
    pos = case.input_pos(dynamic)

    def call_op(*inputs):
        vals = list(consts)
        for i, t in zip(pos, inputs):
            vals[i] = t
        inp, args, kwargs = pytree.tree_unflatten(vals, case.spec)
        return op_fn(inp, *args, **kwargs)

    return call_op


def _clone(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(t.requires_grad)


def _shrunk_sizes(sizes) -> dict:
    """A map of sizes to smaller ones that keeps sizes 0, 1 and 2 and the order and
    equalities of all sizes: each size >= 3 shrinks by one unless that would meet
    the (new) size below it."""
    new, below = {}, max([d for d in sizes if d < 3], default=1)
    for d in sorted({d for d in sizes if d >= 3}):
        new[d] = d - 1 if d - 1 > below else d
        below = new[d]
    return new


def _cropped(case: Case) -> Case | None:
    """The case with its tensors cropped to ``_shrunk_sizes`` (the leading part of
    each dim, so values keep their kind: a principal submatrix of a positive definite
    matrix is one too). None when no size shrinks."""
    if any(t.layout != torch.strided for t in case.tensors()):
        return None
    new = _shrunk_sizes([d for t in case.tensors() for d in t.shape])
    if all(a == b for a, b in new.items()):
        return None
    leaves = list(case.leaves)
    for i in case.tensor_pos:
        t = leaves[i]
        idx = tuple(slice(0, new.get(d, d)) for d in t.shape)
        leaves[i] = t.detach()[idx].clone().requires_grad_(t.requires_grad)
    return Case(leaves, case.spec, case.out_fn)


# -- comparing with eager ------------------------------------------------------------


def _tolerances(dtype: torch.dtype, grad: bool) -> dict:
    if grad and dtype in (torch.float32, torch.complex64):
        return {"atol": 1e-4, "rtol": 1e-4}  # VJP formulas are not eager's kernels
    if grad and dtype in (torch.float16, torch.bfloat16):
        return {"atol": 1e-2, "rtol": 1e-2}
    return {}  # assert_close's defaults for the dtype


def compare(
    got, want, where: str, *, grad: bool = False, check_requires_grad=False, values=True
) -> None:
    """Raise ``Mismatch`` unless ``got`` is eager's ``want`` (only its structure,
    dtypes and shapes when not ``values``)."""
    gl, gs = pytree.tree_flatten(got)
    wl, ws = pytree.tree_flatten(want)
    if gs != ws:
        raise Mismatch(f"{where}: output structure {gs} differs from eager's {ws}")
    for i, (g, w) in enumerate(zip(gl, wl)):
        at = f"{where}[{i}]"
        if isinstance(w, torch.Tensor):
            if not isinstance(g, torch.Tensor):
                raise Mismatch(f"{at}: got a {type(g).__name__}, eager returns a tensor")
            if check_requires_grad and g.requires_grad != w.requires_grad:
                raise Mismatch(
                    f"{at}: requires_grad={g.requires_grad}, eager's is {w.requires_grad}"
                )
            if not values:
                if (g.dtype, g.shape, g.device) != (w.dtype, w.shape, w.device):
                    raise Mismatch(
                        f"{at}: {g.dtype}{list(g.shape)} on {g.device}, eager's is "
                        f"{w.dtype}{list(w.shape)} on {w.device}"
                    )
                continue
            try:
                torch.testing.assert_close(
                    g.detach(),
                    w.detach(),
                    equal_nan=True,
                    check_dtype=True,
                    check_device=True,
                    check_layout=True,
                    **_tolerances(w.dtype, grad),
                )
            except AssertionError as e:
                raise Mismatch(f"{at}: {_first_lines(str(e), 4)}") from None
        elif isinstance(w, float) and isinstance(g, float) and math.isnan(w) and math.isnan(g):
            continue
        elif type(g) is not type(w) or g != w:
            raise Mismatch(f"{at}: {g!r} differs from eager's {w!r}")


def _first_lines(s: str, n: int) -> str:
    return " / ".join(line.strip() for line in s.strip().splitlines()[:n])


# -- classifying exceptions ---------------------------------------------------------------

_UNSUPPORTED = (symshape.UnsupportedOpError, symshape.DataDependentError, NoGradientRuleError)


def _raised_by_symshape(exc: BaseException) -> bool:
    tb = traceback.extract_tb(exc.__traceback__)
    if not tb:
        return False
    f = tb[-1].filename.replace("\\", "/")
    return "/symshape/" in f and "/symshape/conformance/" not in f


def _stage(exc: BaseException) -> str:
    names = {fr.name for fr in traceback.extract_tb(exc.__traceback__)}
    return "trace" if "trace_call" in names else "run"


def classify(exc: BaseException) -> tuple[str, str]:
    """``(status, reason)`` for an exception symshape raised on a valid input."""
    msg = _first_lines(str(exc), 1)[:220]
    if isinstance(exc, Mismatch):
        return "wrong", str(exc)[:600]
    if isinstance(exc, BudgetExceeded):
        return "crash", str(exc)
    if isinstance(exc, symshape.UnsupportedOpError):
        why = getattr(exc, "fallback_reason", "")  # why the meta-kernel fallback refused
        return "unsupported", f"no rule for `{exc.op_name}`" + (
            f" (fallback: {why})" if why else ""
        )
    if isinstance(exc, _UNSUPPORTED):
        return "unsupported", f"{type(exc).__name__}: {msg}"
    if isinstance(exc, NotImplementedError) and _raised_by_symshape(exc):
        return "unsupported", f"NotImplementedError: {msg}"
    if isinstance(exc, symshape.TracingError) and not re.search(r"\bbug\b|internal error", msg):
        return "unsupported", f"{type(exc).__name__}: {msg}"
    tb = traceback.extract_tb(exc.__traceback__)
    site = next(
        (f"{fr.filename.rsplit('/symshape/', 1)[-1]}:{fr.lineno}" for fr in reversed(tb)
         if "/symshape/" in fr.filename and "/conformance/" not in fr.filename),
        "torch",
    )  # fmt: skip
    return "crash", f"{type(exc).__name__} at {_stage(exc)} ({site}): {msg}"


# -- the time budget ---------------------------------------------------------------------


@contextlib.contextmanager
def hard_limit(seconds: float):
    """Interrupt Python code that runs past ``seconds`` (main thread only)."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise BudgetExceeded(f"BudgetExceeded: still running after {seconds:.0f} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# -- one OpInfo ----------------------------------------------------------------------------


def _samples(op, dtype: torch.dtype, requires_grad: bool, seed: int) -> list[Case]:
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [_case(s) for s in op.sample_inputs("cpu", dtype, requires_grad=requires_grad)]


def _grads(outs, case_tensors, gen_seed: int):
    """``autograd.grad`` of the outputs needing grad, for seeded random cotangents."""
    leaves = [
        o for o in pytree.tree_leaves(outs) if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    wrt = [t for t in case_tensors if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves or not wrt:
        return None
    gen = torch.Generator().manual_seed(gen_seed)
    cot = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in leaves]
    gs = torch.autograd.grad(leaves, wrt, cot, allow_unused=True)
    return [torch.zeros_like(x) if g is None else g for g, x in zip(gs, wrt)]


def _defined(x, n: int):
    """A grown tensor's first ``n`` elements (those it had), with its shape beside."""
    if isinstance(x, torch.Tensor) and x.numel() > n:
        return (torch.Size(x.shape), x.detach().reshape(-1)[:n])
    return x


def _run_group(op, cases: list[Case], grad: bool, seed: int, deadline: float, dynamic: bool):
    """One jit function for ``cases`` (a group): the group's own ``Column``."""
    col = Column()
    first = cases[0]
    name = full_name(op)
    jf = symshape.jit(_wrapper(op.op, first, dynamic), dynamic=True, cache_limit=64, name=name)
    eager = _wrapper(op.op, first, dynamic)
    crop = _cropped(first)
    values = name.split(".")[0] not in VALUES_UNDEFINED
    patterns = set()
    for n, case in enumerate([*cases, *([crop] if crop is not None else [])]):
        if time.monotonic() > deadline:
            col.note("crash", "BudgetExceeded: time budget spent before every sample ran")
            return col
        where = f"sample {n} {[tuple(t.shape) for t in case.tensors()]}"
        if dynamic:
            where += f" scalars {[x for x in case.leaves if is_scalar(x)]}"
        te = case.inputs(dynamic)
        try:
            torch.manual_seed(seed)
            want = eager(*te)
            want_g = _grads(case.out_fn(want), te, seed + 1) if grad else None
        except BudgetExceeded:
            raise
        except Exception:
            col.rejected += 1
            continue
        tj = case.inputs(dynamic)
        try:
            torch.manual_seed(seed)
            kept = tj[0].numel() if tj and isinstance(tj[0], torch.Tensor) else None
            got = jf(*tj)
            if name.split(".")[0] in GROWS_UNDEFINED and kept is not None:
                got, want = _defined(got, kept), _defined(want, kept)
            compare(got, want, where, check_requires_grad=grad, values=values)
            if grad:
                got_g = _grads(case.out_fn(got), tj, seed + 1)
                if (got_g is None) != (want_g is None):
                    raise Mismatch(
                        f"{where}: gradients exist in one run only (eager: {want_g is not None})"
                    )
                if want_g is not None:
                    compare(got_g, want_g, f"{where} grad", grad=True)
        except BudgetExceeded:
            raise
        except Exception as e:
            col.note(*classify(e))
            return col
        if grad and want_g is None:
            continue  # no differentiable output in this sample: nothing to compare
        col.samples += 1
        patterns.add((case.pattern(), str(pytree.tree_structure(want))))
    # a trace split at a read of tensor data continues with one trace per value read
    # (``allclose``'s bool): those continuations are the data's, not recompiles
    col.traces = len(jf.traces()) - getattr(jf.stats, "continuations", 0)
    if jf.stats.eager_calls or col.traces > max(len(patterns), 1):
        reasons = "; ".join(dict.fromkeys(jf.stats.recompile_reasons))
        col.note("recompiles", f"{col.traces} traces for {len(patterns)} structures: {reasons}")
    elif col.samples:
        col.note("pass", "")
    return col


def _interleaved(cases: list[Case]) -> list[Case]:
    """The cases, one of each set of scalar values in turn (so that a group's first
    samples try different values)."""
    by: dict[tuple, list[Case]] = {}
    for c in cases:
        by.setdefault(c.key(), []).append(c)
    rounds = max((len(v) for v in by.values()), default=0)
    return [v[k] for k in range(rounds) for v in by.values() if k < len(v)]


def _merge(col: Column, part: Column) -> None:
    col.note(part.status, part.reason)
    col.samples += part.samples
    col.rejected += part.rejected
    col.traces += part.traces


def _run_column(
    op, dtype, grad: bool, seed: int, deadline: float, dynamic: bool = False, done=None
) -> Column:
    """One column. ``done`` maps the key of a group without scalar arguments to its
    outcome, shared by the constant and dynamic-scalar runs of the same samples."""
    col = Column()
    done = {} if done is None else done
    try:
        cases = _samples(op, dtype, grad, seed)
    except Exception as e:
        col.reason = f"the OpInfo's sample generator fails: {type(e).__name__}: {e}"[:200]
        return col
    groups: dict[tuple, list[Case]] = {}
    for c in cases:
        groups.setdefault(c.key(dynamic), []).append(c)
    col.groups = len(groups)
    chosen = list(groups.items())
    if len(chosen) > MAX_GROUPS:  # an even spread, the same on every run
        chosen = [chosen[i * len(chosen) // MAX_GROUPS] for i in range(MAX_GROUPS)]
    for i, (key, cs) in enumerate(chosen):
        reuse = not cs[0].has_scalars()
        part = done.get((grad, key)) if reuse else None
        if part is None:
            cs = (_interleaved(cs) if dynamic else cs)[:MAX_PER_GROUP]
            part = _run_group(op, cs, grad, seed + 7 * i, deadline, dynamic)
            if reuse:
                done[(grad, key)] = part
        _merge(col, part)
    if col.status == "skipped" and not col.reason:
        col.reason = (
            "eager rejects every sample"
            if col.rejected
            else "no differentiable output"
            if grad
            else "no samples"
        )
    return col


# forward: float32, else the first of these the op runs in on the CPU (bitwise ops,
# gcd, one_hot and tril_indices have no float kernels; imag and view_as_real take
# complex inputs)
FORWARD_DTYPES = (torch.float32, torch.int64, torch.bool, torch.complex64, torch.int32)


def forward_dtype(op) -> torch.dtype | None:
    """The dtype the forward column is checked in."""
    return next((d for d in FORWARD_DTYPES if op.supports_dtype(d, "cpu")), None)


def grad_dtype(op) -> torch.dtype | None:
    """The dtype gradients are checked in: float64 where the op allows, else
    float32, else complex128 (ops defined on complex inputs only)."""
    if not op.supports_autograd:
        return None
    dts = op.supported_backward_dtypes("cpu")
    for d in (torch.float64, torch.float32, torch.complex128):
        if d in dts and op.supports_dtype(d, "cpu"):
            return d
    return None


def check_op(op, budget: float = 30.0, backward: bool = True, scalars: str = "both") -> OpResult:
    """``_check_op``, noting the functions the OpInfo traced through the generic
    meta-kernel fallback (``symshape/ops/fallback.py``): they have no rule."""
    with fallback_recording() as used:
        res = _check_op(op, budget, backward, scalars)
    res.fallback = sorted(used)
    return res


def _check_op(op, budget: float, backward: bool, scalars: str) -> OpResult:
    """Run and classify one OpInfo (forward in ``forward_dtype``, backward in
    ``grad_dtype``), with scalar arguments as constants, as dynamic arguments, or
    ``"both"`` (each with its own time ``budget``)."""
    if scalars not in ("both", "constant", "dynamic"):
        raise ValueError(f"scalars must be 'both', 'constant' or 'dynamic', not {scalars!r}")
    name = full_name(op)
    res = OpResult(name, differentiable=bool(op.supports_autograd), scalars=scalars)
    seed = zlib.crc32(name.encode()) % (1 << 30)
    t0 = time.monotonic()
    done: dict = {}
    modes = {"both": (False, True), "constant": (False,), "dynamic": (True,)}[scalars]
    for dynamic in modes:
        fwd_attr, bwd_attr = ("dyn_forward", "dyn_backward") if dynamic else ("forward", "backward")
        deadline = time.monotonic() + budget
        with warnings.catch_warnings(), hard_limit(budget * 2):
            warnings.simplefilter("ignore")
            try:
                fwd = forward_dtype(op)
                if fwd is not None:
                    col = _run_column(op, fwd, False, seed, deadline, dynamic, done)
                    setattr(res, fwd_attr, col)
                    res.forward_dtype = fwd
                else:
                    getattr(
                        res, fwd_attr
                    ).reason = "no CPU support in float32, int64, bool, complex64 or int32"
                dt = grad_dtype(op) if backward else None
                if dt is not None and getattr(res, fwd_attr).status != "skipped":
                    setattr(res, bwd_attr, _run_column(op, dt, True, seed, deadline, dynamic, done))
                elif op.supports_autograd:
                    getattr(res, bwd_attr).reason = "no forward sample" if backward else "not run"
            except BudgetExceeded as e:
                skipped = getattr(res, fwd_attr).status == "skipped"
                getattr(res, fwd_attr if skipped else bwd_attr).note("crash", str(e))
    res.seconds = time.monotonic() - t0
    return res
