"""Running a trace that splits where Python reads tensor data.

A call runs the segments of the entry its prologue accepted (``segments.py``).
After each segment it computes the value Python read there (a bool, an int, a
float, a list) and goes on in the path traced for that value: the same entry
when it was traced for it, else another entry whose segments up to here are the
same (its prologue checked too: the rest of that path has guards of its own),
else a new *continuation*, traced for the value (the whole function traced again
with the values read so far known) and kept for later calls. One call is still
one call: a segment that ran is never run again, so in-place updates and random
draws happen once, and each segment is an ``autograd.Function``, so gradients
flow across the reads.

``split_limit`` bounds the values traced at one read (and the reads in one
path): past it a call that meets a new value runs the whole function eagerly
with a warning naming the line, when what already ran changed nothing (no
in-place update, no random draw); otherwise the new value is traced for that
call alone, not kept.
"""

from __future__ import annotations

import logging
import random
import warnings
from contextlib import contextmanager

import torch
from torch import nn

from symshape.jit.boundary.outputs import unflatten
from symshape.jit.frontend import failures
from symshape.jit.guards.globals_guard import modules_read
from symshape.jit.guards.state import is_plain_object
from symshape.trace.aliasing import updated_before
from symshape.trace.errors import RunsEagerly, TracingError, unsupported_form
from symshape.trace.reads import EagerResult, key, past_known_reads, show

log = logging.getLogger("symshape")
_RECOMPILES = {"symshape_log": "recompiles"}  # its SYMSHAPE_LOGS category (logs.py)


class SplitLimitWarning(UserWarning):
    """A read of tensor data met more values than ``split_limit``; those calls run eagerly."""


def _fetch(src, inputs, frame):
    kind, x = src
    if kind == "frame":
        return frame[x]
    if kind == "input":
        return inputs[x]
    return x


def run(jf, entry, inputs: tuple, m, args: tuple, kwargs: dict, fresh: bool = False):
    """One call of a split entry, from its first segment (``fresh``: traced by this call)."""
    grad0 = torch.is_grad_enabled()
    frame: dict = {}
    j = 0
    versions = _versions(args, kwargs)
    grads = None  # taken before the first op run eagerly (only such an op sets them)
    try:
        while True:
            path = entry.split
            seg = path.segments[j]
            again = None
            try:
                res = seg.run(*inputs, *[frame[n] for n in seg.frame_in])
            except failures.CHECKS as e:  # eager's writes and exits on the way out
                if not _again_on_failure(entry, path, j):
                    raise
                again = failures.running_again(jf, e)
            if again is not None:  # past the `except`: eager's exception is its own
                del frame
                return again(args, kwargs)
            if seg.read is None:
                return _finish(entry, seg, res, m, args, kwargs, fresh)
            if seg.spec is not None:
                res = unflatten(res, seg.spec)
            frame.update(zip(seg.frame_out, res))
            del res
            torch._C._set_grad_enabled(grad0)
            r = seg.read
            if r.eager is True and grads is None:
                grads = _grads((m, *args, *kwargs.values(), *modules_read(jf._fn)))
            value = r.convert(*[_fetch(s, inputs, frame) for s in r.sources])
            made: list = []  # the tensors an op run eagerly returned (trace/eager.py)
            if r.eager:  # its sizes that equal the inputs' dynamic sizes are theirs
                sizes = {inputs[k]: label for k, label in reversed(path.sizes)}
                value, made = EagerResult.of(value, sizes)
                _strided_if_differentiable(made, r)
            k = key(value)
            if j < len(path.values) and path.keys[j] == k:
                frame = {n: v for n, v in frame.items() if n in seg.keep}
                frame.update(zip(path.results[j], made))
                j += 1
                continue
            back = _loop_back(path, j, k, frame)
            if back is not None:  # a loop over data: the state of an earlier read
                j, frame = back
                continue
            frame = {n: v for n, v in frame.items() if n in seg.keep}
            try:
                start = (versions, grads or ())
                nxt = _continue(jf, entry, j, value, m, args, kwargs, frame, made, start)
            except _Instead as r:  # the program raises down this path, or does what no
                nxt = r  # trace can repeat: the call runs eagerly, as it did nothing yet
            if type(nxt) is _Instead:  # past the `except`: eager's exception is its own
                del frame
                return nxt.run(jf, args, kwargs)
            if nxt is None:  # past split_limit, nothing changed yet: the call runs eagerly
                del frame
                jf.stats.eager_calls += 1
                if jf.stats.cache_hits:
                    jf.stats.cache_hits -= 1  # counted as a hit when its prologue accepted it
                return jf._fn(*args, **kwargs)
            entry, inputs, fresh = nxt
            j += 1
    except BaseException:
        torch._C._set_grad_enabled(grad0)
        raise


def _pure(path, j: int) -> bool:
    """Did segments ``0..j`` change nothing a second run would see (no in-place
    update, no random draw, no op run eagerly but a query of a layout)?"""
    return not any(s.effects or (s.read and s.read.eager is True) for s in path.segments[: j + 1])


def _again_on_failure(entry, path, j: int) -> bool:
    """Does a runtime assert failing in segment ``j`` run the call again eagerly, to
    make the writes and exits eager makes on the way out (failures.py)?"""
    unwinds = any(a.unwinds for a in path.segments[j].computation.asserts)
    return (entry.replay is not None or unwinds) and _pure(path, j)


class _Instead(Exception):
    """Tracing the continuation met what the call does instead of going on: the
    program raised (``error``, raised by ``who``, failures.raised_by_user_code), or
    it does what no trace can repeat (``error``, a RunsEagerly). What ran before
    changed nothing, so the call runs eagerly."""

    def __init__(self, error: BaseException, who: str | None = None):
        self.error, self.who = error, who

    def run(self, jf, args: tuple, kwargs: dict):
        error, self.error = self.error, None  # its traceback holds the attempt's values
        if self.who is not None:
            return failures.raising_eagerly(jf, error, self.who)(args, kwargs)
        jf._draws_eagerly = error.what  # as a first trace that meets it: every call
        return jf._untraceable(error.what, args, kwargs)


def _grads(roots: tuple) -> list:
    """``(tensor, its .grad)`` of the leaves that need gradients among the call's
    arguments (and the modules the function reads through globals and closures),
    their modules' parameters and what plain objects hold (an optimizer's
    ``param_groups``), a few levels down: a backward run eagerly at a split sets them."""
    out: list = []
    seen: set = set()

    def walk(v, depth: int) -> None:
        if id(v) in seen or depth > 4 or len(seen) > 10000:
            return
        seen.add(id(v))
        if isinstance(v, torch.Tensor):
            if v.is_leaf and v.requires_grad:
                out.append((v, v.grad))
        elif isinstance(v, nn.Module):
            for p in v.parameters():
                walk(p, depth)
        elif type(v) in (list, tuple) or isinstance(v, dict):
            for x in list(v.values() if isinstance(v, dict) else v)[:10000]:
                walk(x, depth + 1)
        elif is_plain_object(v):
            for x in list(getattr(v, "__dict__", {}).values()):
                walk(x, depth + 1)

    for v in roots:
        walk(v, 0)
    walk = None  # a recursive closure is a cycle that would hold ``out``
    return out


@contextmanager
def _grads_at_start(grads: list):
    """The inputs' gradients as the call began, inside the block; as they are now
    after it, or once the function it gives is called. A backward run eagerly at a
    split has set them since, and the Python before it read them as they were
    (``opt.zero_grad()``): a continuation is traced, and its prologue asked, in
    that state up to the read it goes on from."""
    now = [(t, t.grad) for t, g in grads if t.grad is not g]
    _put_grads([(t, g) for t, g in grads if t.grad is not g])
    try:
        yield lambda: _put_grads(now)
    finally:
        _put_grads(now)


def _put_grads(pairs: list) -> None:
    for t, g in pairs:
        t.grad = g


def _versions(args, kwargs) -> list:
    """``(tensor, its version)`` of the call's tensor arguments, as the call began."""
    leaves = torch.utils._pytree.tree_leaves((args, kwargs))
    return [(t, t._version) for t in leaves if isinstance(t, torch.Tensor)]


def _loop_back(path, j: int, k, frame: dict) -> tuple | None:
    """Where the path goes on after read ``j`` for a value of key ``k`` when Python
    is in the same state there as at another read ``i`` of the path that read the
    same value (a loop over data): ``(i + 1, the frame renamed to read i's names)``."""
    if not path.loops.get(j):
        return None
    jump = path.jumps.get((j, k), _UNSET)
    if jump is _UNSET:
        jump = path.jumps[(j, k)] = _jump(path, j, k)
    if jump is None:
        return None
    to, pairs, carried, unused = jump
    if any(a not in frame for a, _ in pairs) or any(n not in frame for n in carried):
        return None
    new = dict.fromkeys(unused)
    new.update((b, frame[a]) for a, b in pairs)
    new.update((n, frame[n]) for n in carried)
    return to, new


_UNSET = object()


def _jump(path, j: int, k) -> tuple | None:
    """``(segment to go on with, [(name at j, name at i)], names carried as they
    are, names no later segment reads)`` for the first read ``i`` in read ``j``'s
    state that read ``k``."""
    src = path.states[j].names
    for i in path.loops[j]:
        if i < len(path.values) and path.keys[i] == k:
            to = path.states[i]
            pairs = [(a, b) for a, b in zip(src, to.names) if b is not None]
            return i + 1, pairs, to.carried, to.unused
    return None


def _strided_if_differentiable(made: list, read) -> None:
    """A sparse (or other non-strided) tensor that needs gradients cannot flow into a
    traced segment's autograd: refused, naming the op."""
    for t in made:
        if t.layout is not torch.strided and t.requires_grad:
            raise unsupported_form(
                f"{read.describe()} returned a {t.layout} tensor that needs gradients; "
                "symshape's segments take strided tensors only. Fix: convert it "
                "(.to_dense()) before it meets traced code, or call it outside symshape.jit."
            )


def _finish(entry, seg, res, m, args, kwargs, fresh: bool):
    if entry.replay is not None:
        out = entry.replay(res, m, args, kwargs)
        if entry.rebase is not None and not fresh:  # as api.py: a traced call does not re-base
            entry.rebase()
        return out
    return res if seg.spec is None else unflatten(res, seg.spec)


def _same_point(p, path, j: int) -> bool:
    """Does path ``p`` reach the read at the end of ``path``'s segment ``j``?"""
    return (
        len(p.segments) > j
        and p.keys[:j] == path.keys[:j]
        and p.segments[j].sig == path.segments[j].sig
    )


def _continue(jf, entry, j: int, value, m, args, kwargs, frame, made=(), start=((), ())):
    """The entry (and its prologue's inputs) that goes on after segment ``j``
    for ``value``: found among the entries, or traced; None: run eagerly. ``made``:
    the tensors an op run eagerly returned, added to ``frame`` under the names of
    the path taken; ``start``: the arguments' versions and the inputs' gradients as
    the call began (``_versions``, ``_grads``)."""
    path = entry.split
    found = _entry_going_on(jf, path, j, key(value), m, args, kwargs, frame, made)
    if found is not None:
        return found
    read = path.segments[j].read
    seen = {
        p.keys[j]
        for p in (e.split for e in jf._entries)
        if p is not None and len(p.values) > j and _same_point(p, path, j)
    }
    limit = jf._split_limit
    keep = True
    if len(seen) >= limit or j >= limit * 4:
        # an op that ran eagerly may have changed something too
        pure = _pure(path, j)
        if id(read.where) not in jf._split_warned:
            jf._split_warned.add(id(read.where))
            _warn_split_limit(jf, read, j, len(seen), pure)
        if pure:
            return None
        keep = False
    return _trace_continuation(jf, entry, j, value, m, args, kwargs, frame, made, keep, start)


def _entry_going_on(jf, path, j: int, k, m, args, kwargs, frame: dict, made) -> tuple | None:
    """An entry already traced whose path reaches the same read and goes on for the
    value of key ``k``, and whose prologue accepts the call: ``(entry, its inputs,
    False)``, the frame given the names that path takes ``made`` by."""
    for e in jf._entries:
        p = e.split
        if p is None or len(p.values) <= j or p.keys[j] != k or not _same_point(p, path, j):
            continue
        named = dict(zip(p.results[j], made))
        if any(n not in frame and n not in named for n in p.segments[j + 1].frame_in):
            continue
        r = e.check(m, args, kwargs) if m is not None else e.check(args, kwargs)
        if type(r) is tuple:
            frame.update(named)
            return e, r, False
    return None


def _warn_split_limit(jf, read, j: int, seen: int, pure: bool) -> None:
    """The ``SplitLimitWarning`` for ``read`` (once per read), at the user's line:
    ``seen`` values taken there, or read ``j + 1`` times in one call."""
    limit = jf._split_limit
    where = read.describe()
    what = "runs eagerly" if pure else "is traced for that call alone"
    if seen >= limit:
        count = f"has taken {seen} values (split_limit={limit})"
        again = "reads another value there"
    else:  # a loop over data: one more read in the same call
        count = (
            f"was read {j + 1} times in one call (a path traces at most "
            f"4 * split_limit = {4 * limit} reads)"
        )
        again = "reads it more often"
    msg = (
        f"symshape.jit({jf.__name__}): {where} {count}; a call that {again} {what}. "
        "Fix: keep the value in a tensor (torch.where) instead of deciding on it in "
        "Python, or raise split_limit."
    )
    if read.where is not None:  # at the user's line, whatever called the function
        w = read.where
        warnings.warn_explicit(msg, SplitLimitWarning, w.filename, w.lineno)
    else:  # the caller of run: this function, _continue and run are below it
        warnings.warn(msg, SplitLimitWarning, stacklevel=5)
    log.info(msg, extra=_RECOMPILES)  # the warning is the printed copy


def _trace_continuation(
    jf, entry, j: int, value, m, args, kwargs, frame, made, keep: bool, start=((), ())
):
    """Trace the call again with the values read so far and ``value`` at read ``j``:
    the new entry (kept unless ``keep`` is False), its prologue's inputs, True."""
    path = entry.split
    read = path.segments[j].read
    reason = read.reason(value)
    jf.stats.recompile_reasons.append(reason)
    log.info("symshape: %s: %s", jf.__name__, reason, extra=_RECOMPILES)
    versions, grads = start
    updated = [t for t, v in versions if t._version != v]  # by the part that ran
    drawn = random.getstate()
    with jf._lock, updated_before(updated), _grads_at_start(grads) as now:
        try:
            with past_known_reads(now):  # past read j: the gradients it set
                traced = jf._trace(m, args, kwargs, path.values[:j] + (value,))
        except RunsEagerly as e:
            if not _pure(path, j):
                raise TracingError(
                    f"{jf.__name__}: after a read of tensor data, {e.why}; the part before "
                    "the read already ran (an op run eagerly, an in-place update or a random "
                    f"draw), so the call cannot run eagerly instead. Fix: {e.fix}"
                ) from None
            random.setstate(drawn)
            raise _Instead(e) from None
        except Exception as e:
            who = failures.raised_by_user_code(e)
            if who is None or not _pure(path, j):
                raise
            random.setstate(drawn)  # the eager call draws what the attempt drew
            raise _Instead(e, who) from None
        new = type(entry)(traced)
        if len(new.split.segments) <= j + 1 or new.split.segments[j].sig != path.segments[j].sig:
            raise _traced_differently(jf.__name__, read, updated)
        frame.update(zip(new.split.results[j], made))
        if any(n not in frame for n in new.split.segments[j + 1].frame_in):
            missing = [n for n in new.split.segments[j + 1].frame_in if n not in frame]
            raise TracingError(
                f"symshape bug: the continuation after {read.describe()} reads {missing}, "
                "which the segment before it does not hand on"
            )
        if keep:
            jf._entries = (new, *jf._entries)
        jf.stats.continuations += 1
    with _grads_at_start(grads):
        r = new.first_inputs(m, args, kwargs)
    if type(r) is not tuple:
        _, why = new.explain(m, args, kwargs)
        raise TracingError(
            f"symshape bug: a fresh continuation rejects the inputs it was traced from: {why}"
        )
    return new, r, True


def _traced_differently(name: str, read, updated: list) -> TracingError:
    """The error for a continuation whose computation before ``read`` is not the
    one that ran: the call updated an argument in place before the read (the
    trace of the rest, made after it, sees it changed), or its Python differs."""
    if updated:
        t = updated[0]
        return TracingError(
            f"{name}: the call updated one of its tensor arguments in place (a "
            f"{str(t.dtype).removeprefix('torch.')} tensor of shape {list(t.shape)}, now "
            f"{'needing' if t.requires_grad else 'not needing'} a gradient) before "
            f"{read.describe()}, where the trace splits; the rest of the call is traced "
            "after that update, which changes what symshape traces before the read. Fix: "
            "update a copy (x = x.clone() first)."
        )
    return TracingError(
        f"{name} traced differently when called again with the same inputs: the "
        f"computation before {read.describe()} changed. symshape splits a trace there by "
        "tracing the call again, which needs the Python before the read to do the same "
        "each time. Fix: make it deterministic, or use fullgraph=True and keep the value "
        "in a tensor."
    )


def tree(entries) -> str:
    """The traced paths of a split function as a tree: each read (the user's line)
    with the values a continuation was traced for, nested in the order read."""
    points: dict = {}  # prefix of keys -> (read description, {key: (value, complete)})
    roots = 0
    for e in entries:
        p = e.split
        if p is None:
            roots += 1
            continue
        for i, s in enumerate(p.segments):
            if s.read is None:
                break
            text = s.read.describe()
            if any(o < i for o in p.loops.get(i, ())):
                text += " (a loop: the Python state of an earlier read, its paths reused)"
            at = points.setdefault(p.keys[:i], (text, {}))
            if i < len(p.values):
                done = not p.pending and i == len(p.values) - 1
                prev = at[1].get(p.keys[i], (p.values[i], False))
                at[1][p.keys[i]] = (p.values[i], prev[1] or done)
    lines = [f"{roots} trace(s) without reads"] if roots else []

    def walk(prefix: tuple, indent: str) -> None:
        if prefix not in points:
            return
        text, children = points[prefix]
        lines.append(f"{indent}{text}")
        for k, (value, done) in children.items():
            lines.append(f"{indent}  = {show(value)}" + (": returns" if done else ""))
            walk((*prefix, k), indent + "    ")

    walk((), "")
    return "\n".join(lines)
