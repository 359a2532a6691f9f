"""Python's ``random`` inside a traced function: drawn again on every call.

Eager Python draws new numbers on each call, and so does ``torch.compile``
(dynamo replays the calls before its graph runs). A trace does the same: each
``random.random()``, ``random.uniform(a, b)``, ``random.randint(a, b)`` ... the
traced code makes becomes an input of the trace, and the prologue calls the
same function with the same arguments, in the same order, on every call::

    def prologue(args, kwargs):
        ...
        d_random0 = _draw0()          # random.random() at model.py:12
        s1 = _draw1(1, 6)             # random.randint(1, 6) at model.py:13
        if not (s1 <= 3): return 5    # the code branched on it
        return (x, s1, d_random0)

The values drawn while tracing are those of the call traced, so the random
module's state after each call is eager's. A float draw is an opaque float of
the trace; an int draw a size symbol, whose decisions are guards like any
other. Draws come after every other check, and a prologue that rejects a call
after drawing puts the module's state back (``keeping_random``), so that the
next entry, or the trace of a new one, draws the same numbers.

What cannot be drawn again makes the function run eagerly (``DrawsEagerly``),
with the state put back first: a decision in Python on a drawn float, a draw
whose result is not a number (``choice``, ``shuffle``, ``sample``), a draw
with a tensor among its arguments, and draws in a trace that splits at reads
of tensor data. So do draws from a ``random.Random`` instance and from NumPy's
global generator (``trace/side_effects.py``). So do draws through functions
bound before tracing (``from random import random``): the wrappers do not see
them, but their draws move ``random``'s state, which is compared with the
draws seen when the traced code returns (``Draws.check_all_seen``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import torch

from symshape.ir import Var
from symshape.sym.source import user_location
from symshape.trace.errors import RunsEagerly
from symshape.trace.side_effects import draws_elsewhere
from symshape.trace.symfloat import Opaque

_FLOATS = frozenset(
    (
        "random", "uniform", "triangular", "gauss", "normalvariate", "lognormvariate",
        "expovariate", "vonmisesvariate", "gammavariate", "betavariate", "paretovariate",
        "weibullvariate",
    )
)  # fmt: skip
_INTS = frozenset(("randint", "randrange", "getrandbits", "binomialvariate"))


class DrawsEagerly(RunsEagerly):
    """The traced code uses Python's ``random`` in a way a trace cannot draw
    again on later calls; ``what`` says how and where."""

    def __init__(self, why: str):  # `random.choice` at model.py:12 returns a Python object
        fix = "draw with torch (torch.rand, torch.randint), or draw outside and pass the value in."
        super().__init__(why, fix, _eager_message(why))


def _call_text(name: str, args: tuple, kwargs: dict) -> str:
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"random.{name}({', '.join(parts)})"


def _int_range(name: str, args: tuple, kwargs: dict) -> tuple[int | None, int | None]:
    """The values an int draw can take, where its arguments say (else unbounded)."""
    try:
        if name == "randint":
            a, b = (list(args) + [kwargs.get("a"), kwargs.get("b")])[:2]
            return int(a), int(b)
        if name == "randrange" and not kwargs:
            start, stop, step = (args + (None, None))[:3] if len(args) > 1 else (0, args[0], None)
            if step in (None, 1):
                return int(start), int(stop) - 1
        if name == "getrandbits" and not kwargs:
            return 0, (1 << int(args[0])) - 1
    except (TypeError, ValueError, IndexError):
        pass
    return None, None


@dataclass
class Draws:
    """The draws of one trace, in order: the prologue's lines that repeat them."""

    b: object  # the prologue Builder
    lines: list = field(default_factory=list)  # (line drawing, line with the traced value)
    splits: bool = False  # the trace splits at reads: draws cannot follow it
    # random's state after the draws seen so far: any other is a draw not seen
    expected: tuple = field(default_factory=random.getstate)
    elsewhere: int = field(default_factory=draws_elsewhere)  # other threads' draws

    def __bool__(self) -> bool:
        return bool(self.lines)

    def __call__(self, name: str, fn, args: tuple, kwargs: dict):
        """``random.<name>(*args, **kwargs)`` called by the traced code: draw now (the
        call traced is the first call) and return a value the trace takes as an input."""
        where = user_location()
        at = f" at {where}" if where is not None else ""
        if self.splits:
            raise DrawsEagerly(f"`random.{name}`{at} follows a read of tensor data")
        if name not in _FLOATS and name not in _INTS and name != "seed":
            raise DrawsEagerly(f"`random.{name}`{at} returns a Python object, not a number")
        args = tuple(_plain(a, name, at) for a in args)
        kwargs = {k: _plain(v, name, at) for k, v in kwargs.items()}
        value = fn(*args, **kwargs)
        self.expected = random.getstate()
        b, ctx = self.b, self.b.ctx
        call = f"{b.const(fn, f'_random_{name}')}({_arguments(b, args, kwargs)})"
        label = _call_text(name, args, kwargs) + at
        if name == "seed":  # no value: it sets the state the next draws start from
            self.lines.append((call, "pass"))
            return value
        if name in _FLOATS:
            var = Var(ctx.reserve(f"d_{name}{len(self.lines)}"), "float")
            b.float_inputs.append(var)
            b.values[id(var)] = value
            ctx.float_labels[id(var)] = label
            ctx.draw_labels.add(label)
            self.lines.append((f"{var.name} = {call}", f"{var.name} = {value!r}"))
            return ctx.symfloat(Opaque(var, label, is_input=True))
        lo, hi = _int_range(name, args, kwargs)
        s = ctx.env.symbol(ctx.fresh("s"), value, min=lo, max=hi, source=label)
        var = Var(s.name, s)
        ctx.sym_vars[s] = var
        b.int_inputs.append((s, label))
        self.lines.append((f"{s.name} = {call}", f"{s.name} = {value!r}"))
        return ctx.symint(s)

    def check_all_seen(self) -> None:
        """After the traced code ran: did it draw from ``random`` only through the
        module's functions? One bound before tracing (``from random import random``,
        ``rand = random.randint``) draws unseen, and a trace would keep its value.
        Where another thread drew meanwhile, the state cannot tell: not checked."""
        if random.getstate() != self.expected and draws_elsewhere() == self.elsewhere:
            raise DrawsEagerly(
                "the code drew from `random` through a function bound before it was "
                "traced (`from random import random`, `draw = random.random`), which a "
                "trace cannot see"
            )

    def split_message(self) -> str:
        return "the code draws from `random` and reads tensor data"

    def emit(self, out: list) -> None:
        """The prologue's draws, after its other checks (before the guards that may
        name what they draw)."""
        out.extend(line for line, _ in self.lines)


def first_source(lines: list, src: str) -> str:
    """The prologue for the call traced: the values it drew (``Draws.lines``), not
    new draws."""
    for line, traced in lines:
        src = src.replace(f"    {line}\n", f"    {traced}\n", 1)
    return src


def _arguments(b, args: tuple, kwargs: dict) -> str:
    """A draw's arguments as the prologue passes them: literals where they are."""

    def text(v) -> str:
        if type(v) in (int, bool) or (type(v) is float and v - v == 0.0):
            return repr(v)
        return b.const(v, "_k")

    return ", ".join([text(a) for a in args] + [f"{k}={text(v)}" for k, v in kwargs.items()])


def _plain(a, name: str, at: str):
    """A draw's argument as a Python constant: a size is made static (guarded)."""
    if isinstance(a, torch.Tensor):
        raise DrawsEagerly(f"`random.{name}`{at} takes a tensor argument")
    if isinstance(a, torch.SymInt):
        return int(a)
    if isinstance(a, torch.SymFloat):
        return float(a)
    return a


def _eager_message(why: str) -> str:
    return (
        f"{why}: a trace cannot draw it again on later calls, so the function runs "
        "eagerly (as without symshape) on each call no trace serves. Fix: draw with torch "
        "(torch.rand, torch.randint, torch.randperm; keep a decision in a tensor with "
        "torch.where), or draw outside the jit-compiled function and pass the value in."
    )


def decision_message(label: str) -> str:
    """A decision in Python on a drawn float."""
    return f"the code decides in Python on `{label}`"


def keeping_random(check):
    """A prologue that draws: where it rejects the call (or raises), the random
    module's state is put back, so that nothing was drawn."""
    getstate, setstate = random.getstate, random.setstate

    def prologue(*args):
        state = getstate()
        try:
            r = check(*args)
        except BaseException:
            setstate(state)
            raise
        if type(r) is not tuple:
            setstate(state)
        return r

    return prologue


def not_drawing(explain):
    """The explaining prologue draws nothing that stays drawn."""

    def run(*args):
        state = random.getstate()
        try:
            return explain(*args)
        finally:
            random.setstate(state)

    return run
