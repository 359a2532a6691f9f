"""How a jit function meets the rest of Python: what ``jit()`` refuses up front
(generator and async functions), recursion that runs past Python's limit, and
the methods of a jit-compiled module (``symshape.jit(model).generate(...)``).

A call of a jit function from code being traced is inlined into that trace
(``api.JitFunction.__call__``), so recursion through a decorated name unrolls
into one trace; when it never ends, ``JitRecursionError`` names the line.

Methods: while a method of the original module runs through a ``JitModule``,
the module's ``forward`` is its compiled forward (an instance attribute that
shadows the class's for the duration), so each ``self(...)`` the method makes
runs a trace, and the method's own Python runs as written."""

from __future__ import annotations

import collections
import functools
import inspect
import sys
import threading
import traceback
import types

import torch
from torch import nn

from symshape.sym.source import Location, is_user_file
from symshape.trace.context import current
from symshape.trace.errors import TracingError

FORWARD_LINE = "model.forward = symshape.jit(model.forward, dynamic=True)"


def tracing() -> bool:
    """Is this thread tracing (running user code to record a trace)?"""
    return current() is not None


# -- what jit() refuses up front -------------------------------------------------------
def _kind(fn) -> tuple[str, str] | None:
    """(what ``fn`` is, what calling it returns) for functions that cannot be traced."""
    if inspect.isasyncgenfunction(fn):
        return "an async generator function (`async def` with `yield`)", "an async generator"
    if inspect.iscoroutinefunction(fn):
        return "an async function (`async def`)", "a coroutine"
    if inspect.isgeneratorfunction(fn):
        return "a generator function (its body contains `yield`)", "a generator"
    return None


def check_traceable(fn, name: str, fullgraph: bool = False) -> str | None:
    """Generator and async functions (and modules whose forward is one) have no
    call to trace: calling one returns a generator or coroutine before its body
    runs. With ``fullgraph=True`` they are refused; otherwise they run eagerly, as
    torch.compile runs the frames it skips, and this returns why (None: traceable)."""
    if isinstance(fn, torch.jit.ScriptModule):
        why = (
            "a TorchScript module, which TorchScript's C++ interpreter runs: there is no "
            "Python call to trace. Fix: jit the Python module it was scripted from"
        )
        if fullgraph:
            raise TypeError(
                f"symshape.jit({name}, fullgraph=True): expected a module with a Python forward, found {why}"
            )
        return why
    target = getattr(type(fn), "forward", None) if isinstance(fn, nn.Module) else fn
    kind = _kind(target)
    if kind is None:
        return None
    what, returns = kind
    where = "its forward is " if isinstance(fn, nn.Module) else ""
    if "async" in what:
        fix = (
            "jit the synchronous tensor code and call it from the async function: "
            "`step = symshape.jit(step_fn)`, then `y = step(x)` between the awaits."
        )
    else:
        fix = (
            "return the values instead of yielding them (collect them in a list and "
            "`return` it), or jit the function each step calls and keep the generator "
            "around it: `step = symshape.jit(step_fn)`, then `yield step(x)`."
        )
    why = (
        f"{where}{what}. Calling it returns {returns} before any of its body runs, so "
        f"there is no call to trace. Fix: {fix}"
    )
    if fullgraph:
        raise TypeError(
            f"symshape.jit({name}, fullgraph=True): expected a function that computes and "
            f"returns its result, found {why}"
        )
    return f"{name} is {why}"


# -- recursion ---------------------------------------------------------------------------
class JitRecursionError(TracingError, RecursionError):
    """A jit function's call recursed past Python's recursion limit."""


def recursion_error(name: str, e: RecursionError) -> JitRecursionError:
    """The error for a RecursionError out of a jit call: the user's line that recursed."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if is_user_file(f.filename)]
    counts = collections.Counter((f.filename, f.lineno, f.name) for f in frames)
    at = ""
    if counts:
        (filename, lineno, func), n = counts.most_common(1)[0]
        at = f"\n  at {Location(filename, lineno, func).describe()}\n  ({n} times on the stack)"
    return JitRecursionError(
        f"symshape.jit({name}): the call recursed past Python's recursion limit "
        f"({sys.getrecursionlimit()} frames){at}\n"
        "Expected a recursion that ends: inside a trace each call of a jit function (this "
        "one included) runs inline, so the trace unrolls the recursion, whose depth Python "
        f"values or sizes must decide. Found: RecursionError: {e}. Fix: check that the base "
        "case is reached for these inputs, write the recursion as a loop, or raise the limit "
        "with sys.setrecursionlimit(...)."
    )


# -- methods of a jit-compiled module ---------------------------------------------------
_ABSENT = object()
_lock = threading.Lock()
# id(module) -> [module, its own `forward` instance attribute (or _ABSENT), depth, installed]
_installed: dict[int, list] = {}


class _Installed:
    """``mod.forward`` is ``fwd`` inside the block, on every thread; nested and
    concurrent blocks share one installation, the last to leave restores."""

    __slots__ = ("entry", "fwd", "mod")

    def __init__(self, mod: nn.Module, fwd):
        self.mod, self.fwd, self.entry = mod, fwd, None

    def __enter__(self):
        d = self.mod.__dict__
        with _lock:
            entry = _installed.get(id(self.mod))
            if entry is None:
                entry = [self.mod, d.get("forward", _ABSENT), 0, self.fwd]
                _installed[id(self.mod)] = entry
                d["forward"] = self.fwd
            entry[2] += 1
        self.entry = entry
        return self

    def __exit__(self, *exc):
        entry, d = self.entry, self.mod.__dict__
        with _lock:
            entry[2] -= 1
            if entry[2] == 0:
                del _installed[id(self.mod)]
                if d.get("forward") is entry[3]:  # unless the method set a forward itself
                    if entry[1] is _ABSENT:
                        del d["forward"]
                    else:
                        d["forward"] = entry[1]


def cannot(jm_name: str, method: str, expected: str, found: str) -> TypeError:
    return TypeError(
        f"symshape.jit({jm_name}).{method}: cannot run the module's compiled forward inside "
        f"{method}: expected {expected}, found {found}. Fix: compile the forward itself and "
        f"call {method} on the module:\n    {FORWARD_LINE}\n    model.{method}(...)"
    )


def underlying_forward(mod: nn.Module, jm_name: str, method: str):
    """The forward that ``mod(...)`` runs when no compiled forward is installed."""
    with _lock:
        entry = _installed.get(id(mod))
        own = entry[1] if entry is not None else mod.__dict__.get("forward", _ABSENT)
    if own is not _ABSENT:
        return own
    attr = inspect.getattr_static(type(mod), "forward")
    if isinstance(attr, property) or hasattr(type(attr), "__set__"):
        raise cannot(
            jm_name,
            method,
            "a forward that an instance attribute can shadow",
            f"{type(mod).__name__}.forward is a {type(attr).__name__}, which takes "
            "precedence over the instance's attributes",
        )
    return type(mod).forward.__get__(mod, type(mod))


def _stepping(gen, mod: nn.Module, fwd):
    """Run the generator ``gen`` with the compiled forward installed around each step."""
    value, error = None, None
    while True:
        with _Installed(mod, fwd):
            try:
                y = gen.throw(error) if error is not None else gen.send(value)
            except StopIteration as stop:
                return stop.value
        try:
            value, error = (yield y), None
        except GeneratorExit:
            with _Installed(mod, fwd):  # its `finally` blocks may call the module too
                gen.close()
            raise
        except BaseException as e:  # thrown into this generator: pass it on
            value, error = None, e


def delegate(jm, name: str, method, forward_jit):
    """``jm.<name>``: the original module's method, run with its compiled forward
    (``forward_jit()``, a JitFunction over the module's forward). From code being
    traced, the method runs as is: the trace inlines its calls of the module."""
    mod = jm._orig_mod
    func = getattr(method, "__func__", method)
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):

        @functools.wraps(method)
        def refuse(*args, **kwargs):  # raised when called: getattr/hasattr still work
            raise cannot(
                jm._jit.__name__,
                name,
                "a method whose body runs when it is called",
                "an async method, whose body runs later, when awaited, after the compiled "
                "forward is removed again",
            )

        return refuse
    gen = inspect.isgeneratorfunction(func)

    @functools.wraps(method)
    def run(*args, **kwargs):
        if tracing() or _user_compiled(mod):
            return method(*args, **kwargs)
        fwd = forward_jit(name)
        if gen:
            return _stepping(method(*args, **kwargs), mod, fwd)
        with _Installed(mod, fwd):
            return method(*args, **kwargs)

    return run


def _user_compiled(mod: nn.Module) -> bool:
    """Did the user set a compiled forward on the module (``model.forward = jit(...)``)?"""
    from symshape.jit.frontend.api import JitFunction

    with _lock:
        if id(mod) in _installed:
            return False
        return isinstance(mod.__dict__.get("forward"), JitFunction)


# -- copies and pickles ------------------------------------------------------------------
def _lookup(module: str, qualname: str):
    obj = sys.modules.get(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj


def _unwrap(obj):
    """A jit function's underlying function, looked up by name when loaded."""
    from symshape.jit.frontend.api import JitFunction

    return obj._fn if isinstance(obj, JitFunction) else obj


def load_global(module: str, qualname: str):
    """The function stored as ``module.qualname`` (the jit function there: its function)."""
    __import__(module)
    return _unwrap(_lookup(module, qualname))


def reduce_fn(jf) -> tuple:
    """How a JitFunction's function and module are pickled: ``(fn, module)``, where
    ``fn`` may be a ``(load_global, (module, qualname))`` reference."""
    import pickle

    fn, mod = jf._fn, jf._module
    if mod is not None and inspect.ismethod(fn) and fn.__self__ is mod:
        return ("method", fn.__func__), mod  # rebound to the loaded module
    if not isinstance(fn, types.FunctionType):
        return ("value", fn), mod
    qual, modname = fn.__qualname__, fn.__module__
    if "<lambda>" in qual or "<locals>" in qual:
        what = "a lambda" if fn.__name__ == "<lambda>" else f"a function defined inside {qual}"
        raise pickle.PicklingError(
            f"cannot pickle symshape.jit({jf.__name__}): expected a function defined at module "
            f"level (pickle stores a function by its module and name, never its code), found "
            f"{what}. Fix: define it with `def` at the top level of a module and jit that, or "
            "pickle what you need to rebuild it and call symshape.jit again after loading; "
            "copy.deepcopy works on any jit function."
        )
    found = _lookup(modname, qual)
    if found is fn:
        return ("value", fn), mod
    if _unwrap(found) is fn:  # @symshape.jit at module level: the name holds the jit function
        return ("global", (modname, qual)), mod
    raise pickle.PicklingError(
        f"cannot pickle symshape.jit({jf.__name__}): expected {modname}.{qual} to be its "
        f"function (pickle stores a function by its module and name), found "
        f"{type(found).__name__}. Fix: keep the function reachable under its own name."
    )


def rebuild_fn(ref, mod):
    kind, value = ref
    if kind == "method":
        return types.MethodType(value, mod)
    if kind == "global":
        return load_global(*value)
    return value
