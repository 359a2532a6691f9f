"""A trace that reads tensor data, cut into segments at its reads.

Python read a value of the data (``if x.sum() > 0``, ``int(n)``, ``t.tolist()``)
at each *mark* of the trace (``trace/reads.py``). The nodes between two marks
are one *segment*, compiled on its own::

    segment0(inputs)              -> frame values, then what the read needs
    segment1(inputs, frame ...)   -> ...
    segmentK(inputs, frame ...)   -> the call's outputs

The *frame* carries values from one segment to the next, by name: the traced
tensors Python could still reach at the read (their proxies were alive), and
every scalar computed before it. A trace whose last read has no value yet (the
attempt stopped there, ``pending``) ends with that read's segment.

Paths traced for other values of the same reads share their first segments
node for node (tracing is deterministic): ``sig`` identifies a path up to the
end of a segment, so a call can leave one path at a read and go on in another
(``continuation.py``). Each segment is its own ``autograd.Function``: gradients flow
from one into the next through the frame tensors.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

import torch

from symshape.ir import ASSERT, Node, TensorMeta, Trace, Var, compile_trace, cse, dce, iter_vars
from symshape.ir.passes import draws, has_effect
from symshape.ops import grad_mode
from symshape.sym.expr import Symbol
from symshape.trace import autocast
from symshape.trace.modules import MISSING
from symshape.trace.reads import key, show


@dataclass
class Read:
    """The read a segment ends with: ``convert(*values of sources)``."""

    sources: tuple  # ("frame", name) | ("input", index) | ("const", value)
    convert: object
    text: str
    where: object
    eager: bool | str = False  # an op run eagerly (trace/eager.py): its tensors join the frame

    def describe(self) -> str:
        """``"`if x.sum() > 0:` at model.py:12 in forward"``: the user's line (an op
        run eagerly: ``"`torch.stft` (no rule: it runs eagerly) at ..."``)."""
        line = _code(self.where.line) if self.where is not None else ""
        what = f"`{line}`" if line and not self.eager else self.text
        return f"{what} at {self.where}" if self.where is not None else what

    def reason(self, value) -> str:
        """Why a continuation was traced, in words."""
        at = f" at {self.where}" if self.where is not None else ""
        if self.eager:
            return f"{self.describe()} returned {show(value)}; traced a new continuation"
        line = _code(self.where.line) if self.where is not None else ""
        what = f"`{line}`" if line else self.text
        return f"{what} read {show(value)}{at}; traced a new continuation"


def _code(line: str) -> str:
    """A source line without its comment."""
    if "#" not in line:
        return line
    try:
        for tok in tokenize.generate_tokens(io.StringIO(line).readline):
            if tok.type == tokenize.COMMENT:
                return line[: tok.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):  # an unfinished line (an open bracket)
        return line
    return line


@dataclass
class Segment:
    run: object  # compiled: (*inputs, *frame values of frame_in) -> outputs
    spec: object  # rebuilds the outputs of an autograd run (or the last segment's result)
    frame_in: tuple  # names taken from the frame, after the prologue's inputs
    frame_out: tuple  # names of the values it adds to the frame (its first outputs)
    keep: frozenset  # names the frame keeps after it
    read: Read | None  # None: the last segment, which returns the call's result
    computation: Trace
    backward: Trace | None
    sig: int  # the path up to this segment's end (nodes, frame, read)
    effects: bool  # has in-place updates or random draws
    tensors: frozenset = frozenset()  # the names in keep that are tensors
    before: frozenset = frozenset()  # the names in keep made before its read
    data: frozenset = frozenset()  # the scalars in keep read from data (not sizes)


@dataclass
class Path:
    """One traced path through the reads: ``values`` were read at the first marks."""

    trace: object  # Segmented: inputs (what the prologue returns), printable
    used: set
    segments: list
    values: tuple
    pending: bool  # the last segment ends in a read no value was traced for
    # per read, the frame names of the tensors an op run eagerly there returned
    results: tuple = ()
    sizes: tuple = ()  # (index in the inputs, label) of each dynamic size of the inputs
    states: tuple = ()  # per read, its State or None (a loop comes back to equal states)

    def __post_init__(self) -> None:
        self.keys = tuple(key(v) for v in self.values)  # what a read's value is compared by
        # read -> the other reads of this path in the same Python state
        self.loops: dict = {}
        self.jumps: dict = {}  # (read, key of its value) -> where it goes on (continuation.py)
        for j, s in enumerate(self.states):
            if s is not None:
                self.loops[j] = tuple(
                    i
                    for i, o in enumerate(self.states)
                    if i != j and o is not None and o.key == s.key
                )


@dataclass
class State:
    """The Python state at a read (``trace/frame_state.py``): ``key`` compares it,
    ``names`` are the frame values it holds, in the order the key pairs them
    (None: an input of the call, compared by the key)."""

    key: tuple
    names: tuple
    carried: tuple  # scalars of the sizes the rest of the path uses, by their names
    unused: tuple  # frame values later segments take but never read


class Segmented:
    """The segments of one path, printable as one computation."""

    def __init__(self, inputs: list, path: Path | None = None):
        self.inputs = inputs
        self.path = path

    @property
    def nodes(self) -> list:
        return [n for s in self.path.segments for n in s.computation.nodes]

    def __len__(self) -> int:
        return len(self.nodes)

    def python(self, release: bool = False) -> str:
        parts = []
        p = self.path
        for i, s in enumerate(p.segments):
            parts.append(s.computation.python(release=release).rstrip("\n"))
            if s.read is not None:
                got = (
                    f"traced for the value {p.values[i]!r}"
                    if i < len(p.values)
                    else "no value traced yet"
                )
                parts.append(f"# split: Python reads {s.read.describe()}; {got}")
        return "\n".join(parts) + "\n"

    def __str__(self) -> str:
        return self.python()


def undo_writes(writes: dict, read_states: list) -> None:
    """Put back what an attempt that stopped at a read wrote into modules and
    objects: the attempt that knows the value runs the same Python again."""
    from symshape.jit.boundary.writes import restore

    for mod, attr, old, _ in writes.values():
        if old is MISSING:
            if attr in mod.__dict__ or attr in mod._buffers:
                delattr(mod, attr)
        else:
            setattr(mod, attr, old)
    for obj, state in read_states:
        restore(obj, state)


def _shape(a):
    t = type(a)
    if t is Var:
        return "%" + a.name
    if t in (tuple, list):
        return tuple(_shape(x) for x in a)
    if t is dict:
        return tuple((k, _shape(v)) for k, v in a.items())
    if t is slice:
        return ("slice", _shape(a.start), _shape(a.stop), _shape(a.step))
    return repr(a)


def _node_sig(n: Node) -> tuple:
    # an op whose arguments name a per-trace object (a custom Function's state key)
    # says what stands for them in a signature
    sig = getattr(n.op, "extra", {}).get("sig")
    return (
        getattr(n.op, "name", repr(n.op)),
        tuple(v.name for v in n.outputs),
        _shape(sig(n.args) if sig is not None else n.args),
        _shape(n.kwargs),
    )


def build(
    ctx, b, marks: list, pending, output, out_spec, name: str, grad0: bool, target, results=None
):
    """Cut the recorded nodes at ``marks`` (and ``pending``) and compile each segment.
    ``results``: read index -> the Vars of what an op run eagerly there returned, which
    no node makes: the frame hands them to the segments after that read."""
    from symshape.jit.frontend.tracer import path_inputs

    results = results or {}
    cut = _Cut(ctx, marks, pending, output, results)
    inputs = path_inputs(ctx, b, cut.used, all_sizes=True)
    input_index = {id(v): i for i, v in enumerate(inputs)}
    segs: list[Segment] = []
    sig = 0  # the inputs a path fetches may differ (its later segments use others)
    where_from = getattr(target, "__qualname__", name)
    for j in range(cut.nseg):
        seg = _segment(cut, j, inputs, input_index, out_spec, name, grad0, where_from, sig)
        sig = seg.sig
        segs.append(seg)
    allm, pos, byid = cut.allm, cut.pos, cut.byid
    values = tuple(m.value for m in marks)
    names = tuple(tuple(v.name for v in results.get(j, ())) for j in range(len(allm)))
    sizes = tuple(
        (k, ctx.env.info(v.meta).source) for k, v in enumerate(inputs) if isinstance(v.meta, Symbol)
    )
    used_after = [{byid[i].name for i in cut.later[j] if i in byid} for j in range(len(allm))]
    states = _states(ctx, allm, segs, pos, input_index, used_after)
    path = Path(
        Segmented(inputs), cut.used, segs, values, pending is not None, names, sizes, states
    )
    path.trace.path = path
    return path


class _Cut:
    """The recorded nodes of one attempt, cut at its reads (``allm``: the marks, and
    ``pending``): where each value is made (``pos``: its node's index; an eager
    result's, just before its read), what each segment reads of earlier values
    (``uses``) and what the segments after it do (``later``)."""

    def __init__(self, ctx, marks: list, pending, output, results: dict):
        self.ctx, self.output = ctx, output
        nodes = list(ctx.nodes)
        self.allm = allm = list(marks) + ([pending] if pending is not None else [])
        if pending is not None:
            del nodes[pending.index :]  # the attempt ran on past the read: nothing of it is used
        self.nodes = nodes
        self.pos: dict[int, int] = {}
        self.byid: dict[int, Var] = {}
        for i, n in enumerate(nodes):
            for v in n.outputs:
                self.pos[id(v)] = i
                self.byid[id(v)] = v
        self.made: set = set()  # ids of the Vars of eager results: in the frame from their read on
        for j, m in enumerate(marks):
            for v in results.get(j, ()):
                self.pos[id(v)], self.byid[id(v)] = m.index - 0.5, v
                self.made.add(id(v))
        final_out = list(iter_vars(output)) if pending is None else []
        self.bounds = [0] + [m.index for m in allm] + ([len(nodes)] if pending is None else [])
        self.nseg = len(self.bounds) - 1
        # what each segment reads of earlier values: its nodes, its read, the result
        self.uses: list[set] = []
        for j in range(self.nseg):
            u = {id(v) for n in nodes[self.bounds[j] : self.bounds[j + 1]] for v in n.inputs()}
            if j < len(allm):
                u |= {id(v) for v in iter_vars(allm[j].inputs)}
            else:
                u |= {id(v) for v in final_out}
            self.uses.append(u)
        self.used = set().union(*self.uses) if self.uses else set()
        self.later = [set() for _ in range(self.nseg)]
        acc: set = set()
        for j in range(self.nseg - 1, -1, -1):
            self.later[j] = set(acc)
            acc |= self.uses[j]

    def live(self, m) -> set:
        """What the rest of the call can still reach at read ``m``."""
        alive = set(m.live)
        pos, byid = self.pos, self.byid
        out = {i for i, p in pos.items() if p < m.index and (i in alive or _scalar(byid[i]))}
        return out | {id(v) for v in iter_vars(m.inputs) if id(v) in pos}

    def handed_on(self, j: int, input_index: dict) -> tuple:
        """What segment ``j`` (not the last) returns, the frame values kept past its
        read, and the ``Read`` it ends with."""
        lo, hi = self.bounds[j], self.bounds[j + 1]
        pos, byid = self.pos, self.byid
        m = self.allm[j]
        reach = self.live(m) | self.later[j]
        order = sorted(reach, key=lambda i: pos.get(i, -1))
        mine = [byid[i] for i in order if lo <= pos.get(i, -1) < hi and i not in self.made]
        keep = [byid[i] for i in reach if i in pos]
        sources = tuple(_source(self.ctx, x, input_index) for x in m.inputs)
        return tuple(mine), keep, Read(sources, m.convert, m.text, m.where, m.eager)


def _scalar(v) -> bool:
    return not isinstance(v.meta, TensorMeta)


def _segment(
    cut: _Cut, j: int, inputs, input_index, out_spec, name, grad0, where_from, sig
) -> Segment:
    """Segment ``j`` of ``cut``, compiled (with its backward when it needs one);
    ``sig``: the signature of the path up to the segment before it."""
    from symshape.jit.frontend.differentiate import differentiated, with_backward, with_lifted

    ctx, pos, byid = cut.ctx, cut.pos, cut.byid
    lo, hi = cut.bounds[j], cut.bounds[j + 1]
    body = cut.nodes[lo:hi]
    before = sorted((i for i, p in pos.items() if p < lo), key=pos.get)
    frame_in = [byid[i] for i in before if i in cut.uses[j] or _scalar(byid[i])]
    mark_in = cut.allm[j - 1] if j > 0 else None
    if mark_in is not None and mark_in.grad != grad0:  # the read was inside a grad switch
        body = [Node(grad_mode.SET_GRAD, (mark_in.grad,), extra={"effect": True}), *body]
    if j == len(cut.allm):  # the last: it returns the call's output
        out, spec, read, keep = cut.output, out_spec, None, frame_in
        out_names: tuple = ()
    else:
        out, keep, read = cut.handed_on(j, input_index)
        spec, out_names = None, tuple(v.name for v in out)
    t = Trace(f"segment{j}", inputs + frame_in, body, out, ctx.asserts, dict(ctx.constants))
    t = dce(cse(t))
    t.doc = f"segment {j} of {where_from}" + (
        f", up to where Python reads {read.describe()}" if read else ""
    )
    t, g, spec = differentiated(ctx, t, spec, name)
    run = compile_trace(t)
    backward = None
    if g is not None:
        fname = f"{name.title().replace('_', '')}Segment{j}"
        run, backward = with_backward(ctx.env, t, run, g, fname)
        run = with_lifted(run, t, g)
    run = grad_mode.restoring(t, run)
    if torch._C._is_any_autocast_enabled():  # traced under it: the casts are in the trace
        run = autocast.no_autocast(run)
    # what the path is up to here: its nodes and the read. Not what Python can
    # reach there: which proxies are alive can depend on when the garbage collector
    # ran (a reference cycle), and a path that goes on reading a frame value the
    # segment does not hand over is refused by its frame_in check
    sig = hash((sig, tuple(_node_sig(n) for n in body), read and read.text))
    return Segment(
        run,
        spec,
        tuple(v.name for v in frame_in),
        out_names,
        frame_names(keep),
        read,
        t,
        backward,
        sig,
        any(_changes_state(n) for n in body),
        frame_names(v for v in keep if not _scalar(v)),
        frame_names(v for v in keep if pos[id(v)] < hi),
        frame_names(v for v in keep if isinstance(v.meta, str)),  # "float", "bool"
    )


def _states(ctx, marks: list, segs: list, pos: dict, input_index: dict, used_after) -> tuple:
    """Each read's ``State``, where a loop may come back to it: a path with no
    in-place update, random draw or op run eagerly (those are not replayed by
    jumping back), whose every frame value the rest of the path uses is one the
    state holds, or a scalar of the sizes (``used_after``: per read, the names the
    segments after it use)."""
    if any(s.effects for s in segs) or any(m.eager for m in marks):
        return ()
    out = []
    for m, seg, after in zip(marks, segs, used_after):
        names = _state_names(ctx, m, pos, input_index)
        if names is None:
            out.append(None)
            continue
        names, kinds = names
        held = set(names)
        carried, unused = [], []
        for n in seg.before - held:
            if n not in after:
                unused.append(n)  # passed to later segments, never read: any value
            elif n in seg.tensors or n in seg.data:
                break  # used later, not held by Python where the state looks
            else:
                carried.append(n)  # a scalar of the sizes: the same value at every read
        else:
            key = (m.state[0], tuple(kinds))
            out.append(State(key, tuple(names), tuple(carried), tuple(unused)))
            continue
        out.append(None)
    return tuple(out)


def _state_names(ctx, m, pos: dict, input_index: dict) -> tuple | None:
    """The frame names of the values the state at read ``m`` holds (None for an
    input or constant, whose name the key keeps instead)."""
    if m.state is None:
        return None
    names, kinds = [], []
    for v in m.state[1]:
        if pos.get(id(v), m.index) < m.index:
            names.append(v.name)
            kinds.append(None)
        elif id(v) in input_index or v.name in ctx.constants:
            names.append(None)
            kinds.append(v.name)
        else:  # made after the read: not a value of this state
            return None
    return names, kinds


def _changes_state(n: Node) -> bool:
    """An in-place update or a random draw (not an assert, not a grad-mode switch:
    the segment restores grad mode when it ends)."""
    if n.op is ASSERT or n.op in grad_mode.SWITCHES:
        return False
    return has_effect(n) or draws(n)


def frame_names(vs) -> frozenset:
    return frozenset(v.name for v in vs)


def _source(ctx, x, input_index: dict):
    if type(x) is Var:
        if id(x) in input_index:
            return ("input", input_index[id(x)])
        if x.name in ctx.constants:
            return ("const", ctx.constants[x.name])
        return ("frame", x.name)
    return ("const", x)
