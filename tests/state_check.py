"""Compare caller-visible Python state (objects a jit function was given and
may have changed: KV caches, dataclasses, lists, dicts, modules) with eager's.

    assert_like(got_cache, eager_cache, where="cache after step 3")

Walks both object graphs side by side (attributes of plain objects, list,
tuple and dict items, module buffers and attributes): every node must have
exactly eager's type (a ``torch.Tensor`` is a ``torch.Tensor``, not a
subclass; an int is an ``int``), tensors eager's dtype, shape and values, and
nothing anywhere may be a symshape object.
"""

from __future__ import annotations

import enum
import types

import torch

_ATOMS = (
    str,
    bytes,
    bool,
    int,
    float,
    complex,
    type(None),
    torch.device,
    torch.dtype,
    slice,
    range,
)
_SKIP = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType)


def _is_symshape(x) -> bool:
    return type(x).__module__.split(".")[0] == "symshape"


def assert_like(got, want, where: str = "state", *, atol: float = 0.0, rtol: float = 0.0):
    """``got`` is eager's ``want``: same types everywhere, same values (tensors
    within ``atol``/``rtol``; 0 means bitwise equal), no symshape objects."""
    _walk(got, want, where, atol, rtol, set())


def _walk(g, w, where, atol, rtol, seen):
    assert not _is_symshape(g), (
        f"{where}: a symshape object was left behind: {type(g).__qualname__}"
    )
    assert type(g) is type(w), (
        f"{where}: type {type(g).__module__}.{type(g).__qualname__} != eager's "
        f"{type(w).__module__}.{type(w).__qualname__}"
    )
    if isinstance(w, torch.Tensor):
        assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != eager {w.dtype}"
        assert g.shape == w.shape, f"{where}: shape {tuple(g.shape)} != eager {tuple(w.shape)}"
        if (atol == 0 and rtol == 0) or not (w.dtype.is_floating_point or w.dtype.is_complex):
            assert torch.equal(g, w), (
                f"{where}: values differ from eager (max abs diff "
                f"{(g.double() - w.double()).abs().max().item() if g.numel() else 0:.3e})"
            )
        else:
            torch.testing.assert_close(g, w, atol=atol, rtol=rtol, msg=lambda m: f"{where}: {m}")
        return
    if isinstance(w, (_ATOMS, enum.Enum)):
        if isinstance(w, range | slice):
            for a in ("start", "stop", "step"):
                _walk(getattr(g, a), getattr(w, a), f"{where}.{a}", atol, rtol, seen)
        elif isinstance(w, float) and w != w:
            assert g != g, f"{where}: {g!r} != eager {w!r}"
        else:
            assert g == w, f"{where}: {g!r} != eager {w!r}"
        return
    if isinstance(w, _SKIP):
        return
    if id(g) in seen:
        return
    seen.add(id(g))
    if isinstance(w, (list, tuple)):
        assert len(g) == len(w), f"{where}: length {len(g)} != eager {len(w)}"
        for i, (a, b) in enumerate(zip(g, w)):
            _walk(a, b, f"{where}[{i}]", atol, rtol, seen)
        return
    if isinstance(w, dict):
        assert list(g) == list(w), f"{where}: keys {list(g)} != eager {list(w)}"
        for k in w:
            _walk(g[k], w[k], f"{where}[{k!r}]", atol, rtol, seen)
        return
    if hasattr(w, "__dict__"):
        gv, wv = vars(g), vars(w)
        names = [k for k in wv if not isinstance(wv[k], _SKIP)]
        extra = sorted(set(gv) - set(wv))
        assert not extra, f"{where}: attributes eager does not have: {extra}"
        for k in names:
            assert k in gv, f"{where}: attribute {k!r} missing (eager has it)"
            _walk(gv[k], wv[k], f"{where}.{k}", atol, rtol, seen)


def find_symshape(x, where: str = "value", seen=None) -> list[str]:
    """Paths of every symshape object (or tensor subclass) reachable from ``x``."""
    seen = set() if seen is None else seen
    if _is_symshape(x):
        return [f"{where}: {type(x).__qualname__}"]
    if isinstance(x, torch.Tensor):
        return [] if type(x) in (torch.Tensor, torch.nn.Parameter) else [f"{where}: {type(x)}"]
    if isinstance(x, (*_ATOMS, *_SKIP)) or id(x) in seen:
        return []
    seen.add(id(x))
    out = []
    if isinstance(x, (list, tuple)):
        for i, y in enumerate(x):
            out += find_symshape(y, f"{where}[{i}]", seen)
    elif isinstance(x, dict):
        for k, y in x.items():
            out += find_symshape(y, f"{where}[{k!r}]", seen)
    elif hasattr(x, "__dict__"):
        for k, y in vars(x).items():
            out += find_symshape(y, f"{where}.{k}", seen)
    return out
