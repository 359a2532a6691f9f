"""Python side effects made while a trace is recorded.

A trace replaces the whole Python call: ``print`` and ``logging`` run once, while
tracing, and never when a later call runs the trace (as with ``jax.jit``);
``warnings.warn`` is recorded and issued again by every call. That is the accepted behaviour, but
silent: ``print`` called while tracing warns once per trace, naming the user's
line::

    f = symshape.jit(fn, dynamic=True)
    f(x)   # TraceTimeSideEffectWarning: `print` at model.py:12 in fn runs only
           # while symshape traces fn ...

Python's ``random`` is drawn again on every call: the JIT gives each trace a
``draw`` callback that makes each draw an input of the trace
(``jit/frontend/draws.py``); without one, a draw warns as ``print`` does.

While any trace is recorded, ``builtins.print`` and the functions of the
``random`` module are wrappers; a wrapper acts only on the thread that traces
(a thread-local stack of traces), and calls the original everywhere else. The
originals are restored when the last trace ends, even on error. Code that
bound ``from random import randint`` before tracing is not seen here; its
draws move ``random``'s state, which the JIT compares when the traced code
returns (``Draws.check_all_seen``).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import random
import sys
import warnings

import torch

from symshape.sym.source import (
    PACKAGE_DIR,
    in_torch,
    is_stdlib_file,
    is_user_file,
    user_location,
)
from symshape.trace.context import current
from symshape.trace.errors import RunsEagerly
from symshape.trace.patching import Patches


class TraceTimeSideEffectWarning(UserWarning):
    """``print`` or Python's ``random`` ran while symshape traced: it runs at
    trace time only, not on the calls the trace serves."""


# random's module-level functions (bound methods of its hidden Random instance)
_RANDOM = (
    "random", "randint", "randrange", "choice", "choices", "shuffle", "sample", "uniform",
    "triangular", "gauss", "normalvariate", "lognormvariate", "expovariate", "vonmisesvariate",
    "gammavariate", "betavariate", "paretovariate", "weibullvariate", "binomialvariate",
    "getrandbits", "randbytes", "seed",
)  # fmt: skip

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def _symbolic(x) -> bool:
    """Does a printed value hold a symbolic size or a traced tensor?"""
    if isinstance(x, (*_SYMBOLIC, torch.Tensor)):
        return True
    if type(x) in (tuple, list, torch.Size):
        return any(_symbolic(y) for y in x)
    if type(x) is dict:
        return any(_symbolic(y) for y in x.values())
    return False


class _Trace:
    """One trace being recorded on this thread: what it warned about, and what
    takes its draws from ``random`` (``jit/frontend/draws.py``; None: they warn)."""

    def __init__(self, name: str, draw=None):
        self.name = name
        self.warned: set[str] = set()
        self.draw = draw
        self.drawing = False  # inside a draw: random's own calls (randint -> randrange)

    def saw(self, what: str, message) -> None:
        if what in self.warned:
            return
        self.warned.add(what)
        where = user_location()
        text = message(f"at {where}" if where else "in the traced code", self.name)
        if where is None:
            warnings.warn(text, TraceTimeSideEffectWarning, stacklevel=3)
        else:
            warnings.warn_explicit(text, TraceTimeSideEffectWarning, where.filename, where.lineno)


def _print_message(prints_sizes: bool):
    size = (
        "It prints a symbolic size or traced tensor: "
        if prints_sizes
        else "If it prints a size (print(x.shape), f'{n}'), "
    )

    def message(where: str, name: str) -> str:
        return (
            f"`print` {where} runs only while symshape traces {name}: calls served by the "
            "trace print nothing (as with jax.jit). "
            + size
            + "formatting a symbolic size makes it static, so the trace is specialized to "
            "that value and every new size traces again (a tensor prints as its traced "
            "placeholder, not its values). Fix: print outside the jit-compiled function "
            "(its inputs or outputs), skip it while tracing with `if not "
            "torch.compiler.is_compiling(): print(...)`, or log lazily "
            "(log.debug('%s', x.shape) formats only when that level is enabled)."
        )

    return message


def _random_message(fn: str):
    def message(where: str, name: str) -> str:
        return (
            f"`random.{fn}` {where} runs only while symshape traces {name}: the trace keeps "
            "the value drawn then, and every call it serves reuses it (as with jax.jit). "
            "Fix: draw with torch (torch.rand, torch.randint, torch.randperm), which the "
            "trace records and draws again on every call, or draw outside the "
            "jit-compiled function and pass the value as an argument."
        )

    return message


def _install(patches: Patches) -> None:
    """``print`` and ``random.*`` wrapped while any thread records a trace."""
    original = builtins.print

    def print(*args, **kwargs):
        t = patches.current()
        if t is not None:
            t.saw("print", _print_message(_symbolic(args)))
        return original(*args, **kwargs)

    patches.replace(builtins, "print", print)
    patches.replace(warnings, "warn", _recorded_warn(patches, warnings.warn))
    _watch_environ(patches)
    for name in _RANDOM:
        fn = getattr(random, name, None)
        if fn is not None:
            patches.replace(random, name, _wrap_random(patches, name, fn))
    # a random.Random of the program's own: every method draws through these
    for name in ("random", "getrandbits", "seed", "setstate"):
        if name not in vars(random.Random):
            patches.add(
                random.Random, name, _other_draws(patches, name, getattr(random.Random, name))
            )
    numpy_random = sys.modules.get("numpy.random")
    for name in getattr(numpy_random, "__all__", ()):
        fn = getattr(numpy_random, name, None)
        if _numpy_global(fn) and name not in ("get_state", "get_bit_generator"):
            patches.replace(numpy_random, name, _other_draws(patches, f"numpy.random.{name}", fn))


def _recorded_warn(patches: Patches, original):
    """``warnings.warn`` while tracing: not issued then, but recorded, with the line
    it names, and issued by every call the trace serves, as eager issues it on every
    call (Python's filters then decide, as for eager's: the default shows it once
    per line). symshape's own warnings are issued at once."""

    @functools.wraps(original)
    def warn(message, category=None, stacklevel=1, source=None, **kwargs):
        ctx = current() if patches.current() is not None else None
        caller = sys._getframe(1)
        if ctx is None or kwargs or caller.f_code.co_filename.startswith(PACKAGE_DIR):
            return original(message, category, stacklevel + 1, source, **kwargs)
        if isinstance(message, Warning):
            category = message.__class__
        frame = caller
        for _ in range(max(stacklevel, 1) - 1):
            frame = frame.f_back if frame is not None else None
        g = frame.f_globals if frame is not None else sys.__dict__
        where = (frame.f_code.co_filename, frame.f_lineno) if frame is not None else ("sys", 1)
        text = message if isinstance(message, Warning) else str(message)
        ctx.warned.append(
            functools.partial(_warn_again, text, category or UserWarning, *where, g, source)
        )
        return None

    return warn


def _warn_again(message, category, filename, lineno, module_globals, source, _value=None):
    """A warning the traced code issued, issued again after a call the trace served."""
    registry = module_globals.setdefault("__warningregistry__", {})
    module = module_globals.get("__name__", "<string>")
    warnings.warn_explicit(
        message, category, filename, lineno, module, registry, module_globals, source
    )


def _watch_environ(patches: Patches) -> None:
    """``os.environ[...]``, ``.get``, ``in`` and ``os.getenv`` (all read through
    ``_Environ.__getitem__``) read while tracing are guarded: the prologue reads the
    variable again on every call and a change traces again, as torch.compile guards
    them."""
    original = os._Environ.__getitem__

    def __getitem__(self, key):
        ctx = current() if patches.current() is not None and self is os.environ else None
        if ctx is None or not _read_by_user():
            return original(self, key)
        ctx.read_flag(functools.partial(_environ_get, original, key), f"os.environ.get({key!r})")
        return original(self, key)

    patches.replace(os._Environ, "__getitem__", __getitem__)


def _read_by_user() -> bool:
    """Is the variable read for the user's code: by it (``os.environ.get`` in a
    model) or by a torch function it called (``torch.hub.get_dir``)? Not when
    symshape's own machinery called into torch (a cache directory looked up while
    an op is traced): the first frame outside the standard library and torch
    decides."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if not (is_stdlib_file(name) or name.startswith("<frozen ") or in_torch(name)):
            return is_user_file(name)
        f = f.f_back
    return False


def _environ_get(getitem, key):
    """``os.environ.get(key)`` through the unpatched ``__getitem__`` (the prologue's read)."""
    try:
        return getitem(os.environ, key)
    except KeyError:
        return None


_elsewhere = [0]  # draws through the wrappers by threads that do not trace


def draws_elsewhere() -> int:
    """How many draws from ``random`` other threads made while a trace was recorded
    (they move its state too: ``Draws.check_all_seen`` cannot tell them apart)."""
    return _elsewhere[0]


def _wrap_random(patches: Patches, name: str, fn):
    def draw(*args, **kwargs):
        t = patches.current()
        if t is None:
            _elsewhere[0] += 1
            return fn(*args, **kwargs)
        if t.drawing:
            return fn(*args, **kwargs)
        if t.draw is None:
            t.saw("random", _random_message(name))
            return fn(*args, **kwargs)
        t.drawing = True
        try:
            return t.draw(name, fn, args, kwargs)
        finally:
            t.drawing = False

    return _standing_for(draw, name, fn)


def _programs() -> bool:
    """Is the draw the program's own: out from it, past the standard library's and
    installed packages' frames, is the program's code met before symshape's (not
    sympy's shuffle inside torch's shape reasoning, which symshape called)?"""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith(PACKAGE_DIR):
            return False
        if is_user_file(name) and "-packages" + os.sep not in name:
            return True
        f = f.f_back
    return False


def _numpy_global(fn) -> bool:
    """Is ``fn`` a method of NumPy's global RandomState (``np.random.uniform``)?"""
    state = getattr(sys.modules.get("numpy.random.mtrand"), "_rand", None)
    return state is not None and getattr(fn, "__self__", None) is state


def _other_draws(patches: Patches, name: str, fn):
    """``fn`` (a ``random.Random`` method, a NumPy ``np.random`` function) wrapped:
    a draw no trace makes again (a trace keeps the value drawn while tracing) runs
    the call eagerly (``RunsEagerly``; refused under fullgraph); the module-level
    ``random`` functions, drawn on every call (``draws.py``), pass."""

    def draw(*args, **kwargs):
        t = patches.current()
        self = args[0] if args else None
        if t is None or t.drawing or self is getattr(random, "_inst", None) or not _programs():
            return fn(*args, **kwargs)
        what = name if "." in name else f"{type(self).__name__}.{name}"
        if t.draw is None:  # where nothing draws per call: warned, as `random` is
            t.saw("random", _random_message(what))
            return fn(*args, **kwargs)
        where = user_location()
        raise RunsEagerly(
            f"`{what}` at {where} draws from a generator a trace does not draw from again",
            "draw with torch (torch.rand, torch.randint), or draw outside and pass the value in",
        )

    return _standing_for(draw, name.rpartition(".")[2], fn)


def _standing_for(wrapper, name: str, fn):
    """``wrapper``, named and documented as the ``fn`` it wraps."""
    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    return wrapper


_patches = Patches(_install)


@contextlib.contextmanager
def side_effects(name: str, draw=None):
    """While tracing ``name`` on this thread, warn once per kind (``print``,
    ``random``) for side effects that run at trace time only; ``draw(name, fn,
    args, kwargs)``, if given, takes each call of a ``random`` function instead."""
    _patches.push(_Trace(name, draw))
    try:
        yield
    finally:
        _patches.pop()


__all__ = ["TraceTimeSideEffectWarning", "draws_elsewhere", "side_effects"]
