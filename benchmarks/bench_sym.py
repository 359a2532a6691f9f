"""The symbolic engine against sympy and PyTorch's ShapeEnv, side by side.

    python benchmarks/bench_sym.py [--models 8] [--layers 14] [--trials 3]

One workload: the shape arithmetic a decoder-only transformer produces while
it is traced, for several models (each with its own batch B, sequence S and
KV-cache length P symbols, ranges [2, 64] / [2, 4096] / [2, 4096], so nothing
is shared between models and memoization cannot carry one into the next) and
14 layers each (chunk sizes, sliding windows and expert counts vary by layer):
products of batch/sequence/hidden sizes, ``//`` and ``%`` by constants (head
splits, ``-1`` in views, ceil-division for chunking and padding), max/min,
broadcast comparisons (is this size 1? are these sizes equal?), range
questions (is a size >= 1? is B*nh*S*T < 2**31?), guards on the hints, and
range queries. The same function drives three systems through a tiny adapter:

- symshape: ``ShapeEnv.symbol`` with hint and range, Python operators,
  ``env.known`` / ``env.guard`` / ``env.bounds``.
- sympy: ``Symbol(integer=True, positive=True)`` (sympy cannot state a range),
  ``//`` (``floor``), ``%`` (``Mod``), ``Max``/``Min``, ``Eq``/``Ne`` and the
  relational operators. A decision is sympy's standard assumption query on the
  expanded difference: ``d = expand(lhs - rhs)``, then ``d.is_zero`` for
  ``==``/``!=`` and ``d.is_negative`` / ``d.is_nonpositive`` / ... for the
  inequalities (``simplify()`` is much slower and decides nothing more here).
  A guard that sympy cannot decide is evaluated at the hints with ``subs`` and
  recorded; range queries have no sympy counterpart and are skipped.
- PyTorch: ``ShapeEnv.create_symbol(hint, ConstantSource(name),
  dynamic_dim=DimDynamic.DYNAMIC)`` + ``constrain_symbol_range`` +
  ``create_symintnode``, arithmetic on the ``SymInt``s, decisions with
  ``statically_known_true`` (on the condition and on its negation, for a
  three-valued answer), guards with ``bool(symbool)`` (``evaluate_expr``), and
  ranges with ``ShapeEnv.bound_sympy``.

Every answer is checked against the plain-int evaluation at the hints, and the
answers of the three systems are compared: a *conflict* is a True where
another system says False (or disjoint ranges); "undecided" counts questions a
system could not answer statically (a capability difference, not an error).
Times are the best of ``--trials`` runs of the whole workload (the systems take
turns, so a busy machine slows them alike), each with fresh symbol names,
excluding imports.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

INT32 = 2**31


# ---------------------------------------------------------------------------
# The workload: one function, any system
# ---------------------------------------------------------------------------


def transformer(sys_, tag: str, model: int, layers: int) -> None:
    """The shape arithmetic of tracing one decoder-only transformer."""
    hidden = (1024, 2048, 4096, 3072, 5120, 2560, 1536, 8192)[model % 8]
    heads = (16, 16, 32, 24, 40, 20, 12, 64)[model % 8]
    hd = hidden // heads
    vocab = 32000 + 256 * model
    B = sys_.symbol(f"B{tag}", 2 + model % 7, 2, 64)
    S = sys_.symbol(f"S{tag}", 100 + 37 * model, 2, 4096)
    P = sys_.symbol(f"P{tag}", 64 + 29 * model, 2, 4096)
    eq, ne, known, guard, bounds = sys_.eq, sys_.ne, sys_.known, sys_.guard, sys_.bounds

    tokens = B * S
    T = P + S
    known(tokens >= 1)
    known(eq(S, 1))
    known(eq(B, 1))
    known(tokens * vocab < INT32)  # logits [B, S, V] fit int32 indexing?
    bounds(tokens * hidden)
    guard(S <= P)  # e.g. prefill vs decode branch in user code
    for layer in range(layers):
        # qkv projection, then view(B, S, 3, nh, hd): numel must match
        qkv = tokens * (3 * hidden)
        known(eq(qkv, B * S * 3 * heads * hd))
        known(eq(qkv // (3 * heads * hd), tokens))  # the -1 in view(-1, 3, nh, hd)
        known(eq(qkv % (3 * hidden), 0))
        # grouped-query attention: kv heads split
        kv_heads = max(1, heads // (1 + layer % 4))
        known(eq((heads // kv_heads) * kv_heads, heads))
        # KV cache concat along the sequence: [B, nh, P, hd] ++ [B, nh, S, hd]
        kT = P + S
        known(eq(kT, T))
        known(eq(kT - S, P))
        # scores [B, nh, S, T]: int32 indexing and broadcast of the causal mask [S, T]
        scores = B * heads * S * kT
        known(scores < INT32)
        known(scores * 2 < INT32 * 64)
        known(eq(kT, 1))
        known(ne(S, kT))
        known(eq(S, kT))
        # sliding window, varying by layer: effective length min(T, w)
        w = 256 * (1 + layer % 6)
        win = sys_.min(kT, w)
        known(win <= kT)
        known(win >= 1)
        lo_pos = sys_.max(kT - w, 0)
        known(lo_pos + win >= kT)
        # attention output [B, nh, S, hd] back to [B, S, H]
        known(eq(B * heads * S * hd, tokens * hidden))
        # flash-style chunking of the sequence with chunk C: ceil-div and padding
        C = 16 * (1 + layer % 8)
        nchunk = (S + C - 1) // C
        pad = nchunk * C - S
        known(nchunk >= 1)
        known(pad >= 0)
        known(pad < C)
        known(eq((S + pad) % C, 0))
        # paged KV cache: pages of 16 tokens, with the last page partly filled
        pages = (kT + 15) // 16
        known(pages * 16 >= kT)
        known(eq(kT // 16 + (kT % 16 + 15) // 16, pages))
        # MLP [tokens, H] -> [tokens, 4H] -> [tokens, H], with view(-1, 4H)
        known(eq(tokens * 4 * hidden // (4 * hidden), tokens))
        # mixture of experts: capacity = ceil(tokens * k / E)
        E = 4 << (layer % 3)
        cap = (tokens * 2 + E - 1) // E
        known(cap * E >= tokens * 2)
        known(cap >= 1)
        known(eq(cap, tokens))
        # guards a tracer takes on the hints (the answers are learned)
        guard(eq(S % 8, 0))
        guard(B * S >= 256)
        bounds(nchunk)
        bounds(scores)


# ---------------------------------------------------------------------------
# Adapters
# ---------------------------------------------------------------------------


class Recorder:
    """Shared bookkeeping: the answers, in order."""

    name = ""

    def __init__(self):
        self.answers: list = []

    def run(self, tag: str, models: int, layers: int) -> None:
        for m in range(models):
            self.start()
            transformer(self, f"{tag}m{m}", m, layers)

    def start(self) -> None:
        pass


class Reference(Recorder):
    """Plain ints at the hints, counting every operation: the ground truth."""

    name = "ints"

    def __init__(self):
        super().__init__()
        self.ops = 0

    def symbol(self, name, hint, lo, hi):
        return Counted(hint, self)

    def _bool(self, c):
        self.ops += 1
        return bool(c)

    def eq(self, a, b):
        return self._bool(_v(a) == _v(b))

    def ne(self, a, b):
        return self._bool(_v(a) != _v(b))

    def known(self, c):
        self.answers.append(("known", self._bool(c)))

    def guard(self, c):
        self.answers.append(("guard", self._bool(c)))

    def bounds(self, e):
        self.ops += 1
        self.answers.append(("bounds", _v(e)))

    def max(self, a, b):
        self.ops += 1
        return Counted(max(_v(a), _v(b)), self)

    def min(self, a, b):
        self.ops += 1
        return Counted(min(_v(a), _v(b)), self)


def _v(x):
    return x.v if isinstance(x, Counted) else x


class Counted:
    """An int that counts the arithmetic done on it."""

    __slots__ = ("r", "v")

    def __init__(self, v, r):
        self.v, self.r = v, r

    def _op(self, f, o):
        self.r.ops += 1
        return Counted(f(self.v, _v(o)), self.r)

    def __add__(self, o):
        return self._op(lambda a, b: a + b, o)

    def __radd__(self, o):
        return self._op(lambda a, b: b + a, o)

    def __sub__(self, o):
        return self._op(lambda a, b: a - b, o)

    def __rsub__(self, o):
        return self._op(lambda a, b: b - a, o)

    def __mul__(self, o):
        return self._op(lambda a, b: a * b, o)

    def __rmul__(self, o):
        return self._op(lambda a, b: b * a, o)

    def __floordiv__(self, o):
        return self._op(lambda a, b: a // b, o)

    def __mod__(self, o):
        return self._op(lambda a, b: a % b, o)

    def __lt__(self, o):
        return self.v < _v(o)

    def __le__(self, o):
        return self.v <= _v(o)

    def __gt__(self, o):
        return self.v > _v(o)

    def __ge__(self, o):
        return self.v >= _v(o)


class Symshape(Recorder):
    name = "symshape"

    def __init__(self):
        super().__init__()
        from symshape import sym

        self.sym = sym
        self.env = None

    def start(self):
        self.env = self.sym.ShapeEnv()

    def symbol(self, name, hint, lo, hi):
        return self.env.symbol(name, hint, min=lo, max=hi)

    def eq(self, a, b):
        return a == b

    def ne(self, a, b):
        return a != b

    def max(self, a, b):
        return self.sym.sym_max(a, b)

    def min(self, a, b):
        return self.sym.sym_min(a, b)

    def known(self, c):
        self.answers.append(("known", self.env.known(c)))

    def guard(self, c):
        self.answers.append(("guard", self.env.guard(c)))

    def bounds(self, e):
        lo, hi = self.env.bounds(e)
        self.answers.append(("bounds", (lo, hi)))


class Sympy(Recorder):
    name = "sympy"

    def __init__(self):
        super().__init__()
        import sympy

        self.sp = sympy
        self.hints: dict = {}
        self.guards: list = []

    def start(self):
        self.hints = {}
        self.guards = []

    def symbol(self, name, hint, lo, hi):
        s = self.sp.Symbol(name, integer=True, positive=True)
        self.hints[s] = hint
        return s

    def eq(self, a, b):
        return self.sp.Eq(a, b)

    def ne(self, a, b):
        return self.sp.Ne(a, b)

    def max(self, a, b):
        return self.sp.Max(a, b)

    def min(self, a, b):
        return self.sp.Min(a, b)

    def decide(self, c):
        sp = self.sp
        if c in (True, False) or c is sp.true or c is sp.false:
            return bool(c)
        d = sp.expand(c.lhs - c.rhs)
        if isinstance(c, sp.Eq):
            z = d.is_zero
            return None if z is None else bool(z)
        if isinstance(c, sp.Ne):
            z = d.is_zero
            return None if z is None else not z
        if isinstance(c, sp.StrictLessThan):
            yes, no = d.is_negative, d.is_nonnegative
        elif isinstance(c, sp.LessThan):
            yes, no = d.is_nonpositive, d.is_positive
        elif isinstance(c, sp.StrictGreaterThan):
            yes, no = d.is_positive, d.is_nonpositive
        else:  # GreaterThan
            yes, no = d.is_nonnegative, d.is_negative
        return True if yes else False if no else None

    def known(self, c):
        self.answers.append(("known", self.decide(c)))

    def guard(self, c):
        r = self.decide(c)
        if r is None:
            r = bool(c.subs(self.hints))
            self.guards.append(c if r else self.sp.Not(c))
        self.answers.append(("guard", r))

    def bounds(self, e):
        self.answers.append(("bounds", None))  # sympy has no range analysis to compare


class Torch(Recorder):
    name = "torch"

    def __init__(self):
        super().__init__()
        import torch
        from torch._dynamo.source import ConstantSource
        from torch.fx.experimental.symbolic_shapes import (
            DimDynamic,
            ShapeEnv,
            statically_known_true,
        )

        self.torch = torch
        self.ConstantSource, self.DimDynamic, self.ShapeEnv = ConstantSource, DimDynamic, ShapeEnv
        self.skt = statically_known_true
        self.env = None

    def start(self):
        self.env = self.ShapeEnv()

    def symbol(self, name, hint, lo, hi):
        src = self.ConstantSource(name)
        s = self.env.create_symbol(hint, src, dynamic_dim=self.DimDynamic.DYNAMIC)
        self.env.constrain_symbol_range(s, compiler_min=lo, compiler_max=hi)
        return self.env.create_symintnode(s, hint=hint, source=src)

    def eq(self, a, b):
        return a == b

    def ne(self, a, b):
        return a != b

    def max(self, a, b):
        return self.torch.sym_max(a, b)

    def min(self, a, b):
        return self.torch.sym_min(a, b)

    def known(self, c):
        if isinstance(c, bool):
            r = c
        elif self.skt(c):
            r = True
        elif self.skt(self.torch.sym_not(c)):
            r = False
        else:
            r = None
        self.answers.append(("known", r))

    def guard(self, c):
        self.answers.append(("guard", bool(c)))

    def bounds(self, e):
        if isinstance(e, int):
            self.answers.append(("bounds", (e, e)))
            return
        vr = self.env.bound_sympy(e.node.expr)
        self.answers.append(("bounds", (_num(vr.lower), _num(vr.upper))))


def _num(v):
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        return -math.inf if v < 0 else math.inf


# ---------------------------------------------------------------------------
# Comparison and report
# ---------------------------------------------------------------------------


def compare(truth: list, systems: list) -> dict:
    """Per system: wrong answers (against the hints), undecided count; overall conflicts."""
    report = {}
    for s in systems:
        wrong = undecided = 0
        for (kind, want), (_, got) in zip(truth, s.answers):
            if got is None:
                undecided += 1
            elif kind == "bounds":
                wrong += not (got[0] <= want <= got[1])
            elif got != want:
                wrong += 1
        report[s.name] = (wrong, undecided, len(s.answers) == len(truth))
    conflicts = 0
    for i, (kind, _) in enumerate(truth):
        got = [s.answers[i][1] for s in systems if s.answers[i][1] is not None]
        if kind == "bounds":
            conflicts += any(a[1] < b[0] or b[1] < a[0] for a in got for b in got)
        else:
            conflicts += len(set(got)) > 1
    report["conflicts"] = conflicts
    return report


def timed(systems: list, models: int, layers: int, trials: int) -> dict:
    """Best wall time of each system over ``trials`` rounds. The rounds interleave
    the systems, so a busy machine slows them alike; each run has fresh names."""
    best = {name: math.inf for name, _ in systems}
    last = {}
    for t in range(trials):
        for name, make in systems:
            s = make()
            # Objects left by earlier runs (of any system) must not slow this one
            # down through the garbage collector's full scans.
            gc.collect()
            gc.freeze()
            t0 = time.perf_counter()
            s.run(f"{name[:2]}{t}", models, layers)
            best[name] = min(best[name], time.perf_counter() - t0)
            last[name] = s
    return {name: (best[name], last[name]) for name, _ in systems}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--layers", type=int, default=14)
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args(argv)

    ref = Reference()
    ref.run("ref", args.models, args.layers)
    n_q = sum(1 for k, _ in ref.answers if k == "known")
    n_g = sum(1 for k, _ in ref.answers if k == "guard")
    n_b = sum(1 for k, _ in ref.answers if k == "bounds")
    print(
        f"workload: {args.models} models x {args.layers} layers = {ref.ops} operations "
        f"({n_q} known, {n_g} guards, {n_b} range queries, the rest arithmetic)"
    )

    import sympy  # noqa: F401  (imports are not timed)
    import torch  # noqa: F401

    import symshape.sym  # noqa: F401

    systems = [("symshape", Symshape), ("torch ShapeEnv", Torch), ("sympy", Sympy)]
    results = timed(systems, args.models, args.layers, args.trials)
    rows = [(name, *results[name]) for name, _ in systems]
    report = compare(ref.answers, [r[2] for r in rows])

    base = rows[0][1]
    print()
    print(
        f"{'system':<16}{'time (s)':>10}{'us/op':>9}{'vs symshape':>13}{'undecided':>11}{'wrong':>7}"
    )
    for name, seconds, system in rows:
        wrong, undecided, complete = report[system.name]
        ratio = seconds / base
        print(
            f"{name:<16}{seconds:>10.3f}{seconds / ref.ops * 1e6:>9.1f}{ratio:>12.1f}x"
            f"{undecided:>11}{wrong:>7}" + ("" if complete else "  (incomplete!)")
        )
    speedup = {name: seconds / base for name, seconds, _ in rows}
    print(
        f"\naims: 20x faster than sympy ({speedup['sympy']:.1f}x: "
        f"{'met' if speedup['sympy'] >= 20 else 'MISSED'}), 5x faster than PyTorch's "
        f"ShapeEnv ({speedup['torch ShapeEnv']:.1f}x: "
        f"{'met' if speedup['torch ShapeEnv'] >= 5 else 'MISSED'})"
    )
    print(f"conflicts between systems: {report['conflicts']}")
    print("(undecided: questions answered None statically; sympy has no range queries)")
    ok = report["conflicts"] == 0 and all(report[r[2].name][0] == 0 for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
