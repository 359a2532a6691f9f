"""The per-call checks of the modules a trace ran: each module's attributes
read and names shadowed (``ModuleGuard``), the fast path over every module
and class dict of a trace (``TreeGuard``), and their hooks (``HookGuard``)."""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field

import torch
from torch import nn
from torch._C._dynamo.guards import dict_version
from torch.utils.hooks import RemovableHandle

from symshape.jit.guards.state import _MISSING, diff, releasing

log = logging.getLogger("symshape")

HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_forward_pre_hooks_with_kwargs",
)
# module slots guarded by their own machinery (parameters are inputs; structure below)
SKIPPED = frozenset(("_parameters", "_buffers", "_modules", *HOOK_DICTS))


@dataclass
class ModuleGuard:
    """The per-call check of one module of the trace, beyond its tensors: the
    attributes the trace read, the names it found on the class (a ``forward``
    set on the instance would shadow them) and its submodule names. Fast path:
    see ``TreeGuard``."""

    label: str
    reads: dict = field(default_factory=dict)  # attribute -> snapshot
    shadow: set = field(default_factory=set)  # names read through the class
    keys: tuple = ()  # the submodule names
    tensors: tuple = ()  # the parameter and buffer names, in order (parameters() iterates it)
    nones: tuple = ()  # the names among those set to None (`self.act = None`, `bias=None`)

    def watch(self, mod: nn.Module) -> None:
        self.keys = tuple(mod._modules)
        self.tensors = (tuple(mod._parameters), tuple(mod._buffers))
        self.nones = _nones(mod)

    def ok(self, mod: nn.Module) -> bool:
        return self.why(mod) is None

    def why(self, mod: nn.Module) -> str | None:
        where = self.label or "the module"
        if tuple(mod._modules) != self.keys:
            return (
                f"the submodules of {where} changed from {list(self.keys)} to {list(mod._modules)}"
            )
        tensors = (tuple(mod._parameters), tuple(mod._buffers))
        if tensors != self.tensors:
            return (
                f"the parameters and buffers of {where} changed from {list(self.tensors)} "
                f"to {list(tensors)} (names, in order)"
            )
        nones = _nones(mod)
        if nones != self.nones:
            return f"the entries of {where} set to None changed from {list(self.nones)} to {list(nones)}"
        d = mod.__dict__
        for k in self.shadow:
            if k in d:
                return f"{join_label(self.label, k)} was set on the instance (traced: the class's)"
        for k, s in self.reads.items():
            r = diff(
                s, d.get(k, _MISSING), join_label(self.label, k) if self.label else f"self.{k}"
            )
            if r is not None:
                return r
        return None


def _nones(mod: nn.Module) -> tuple:
    return tuple(
        k for d in (mod._modules, mod._parameters, mod._buffers) for k, v in d.items() if v is None
    )


class TreeGuard:
    """The fast path for every module of a trace and the classes whose
    attributes it read: while no module's ``__dict__`` or ``_modules`` and no
    class dict has moved (one C-level pass over their version tags), the
    modules are the ones traced, with the state traced, and each
    ``ModuleGuard`` is skipped. Else each is checked, then ``refresh`` records
    the modules found. A module with no submodules whose code never read its
    ``_modules`` (``children()``, iteration) has them unwatched: a submodule
    added later changes nothing it computes."""

    __slots__ = (
        "__weakref__", "alive", "checked", "classes", "compiled", "dicts", "leaf", "objects",
        "read_names", "roots", "static", "versions",
    )  # fmt: skip

    def __init__(
        self,
        modules: list,
        classes: list,
        objects: list = (),
        looked=frozenset(),
    ):
        self.leaf = [not m._modules and id(m) not in looked for m in modules]
        self.classes = classes
        self.objects = list(objects)  # ObjectGuards of objects read off the modules
        for g in self.objects:  # their dicts are among ours: freed with them
            g.watchers.append(releasing(self))
        self.static = True  # False once the jit writes the trace's own values each call
        self.checked = False  # True after the first check found every tag as expected
        self.roots: tuple = ()  # weak references to the modules passed in, as last checked
        self.read_names: frozenset = frozenset()  # the module attributes the trace read
        self.refresh(*modules)

    def rooted(self, roots: tuple) -> None:
        """The modules the call passed in, whose dicts ``refresh`` just recorded."""
        self.roots = tuple(weakref.ref(m) for m in roots)

    def fast(self, roots: tuple = ()) -> bool:
        """Is every module of the call, and every class read, as last checked?
        ``roots``: the modules this call passes in (arguments), which must be the
        ones checked (another object with the same state is checked, then kept)."""
        for ref, m in zip(self.roots, roots):
            if ref() is not m:
                return False
        c = self.compiled
        if c is not None:
            return c.check(_NO_LOCALS)
        ok = list(map(dict_version, self.dicts)) == self.versions
        if ok and self.static and not self.checked:
            # the first call (the one traced, whose first trace of a large model should
            # be quick) checks in Python; the next builds the C++ check
            self.checked = True
        elif ok and self.static:
            # every tag is as expected now: the C++ check of torch's guard trees,
            # which holds the tags it sees, costs half the Python pass
            c = compiled_version_check(self.dicts)
            if list(map(dict_version, self.dicts)) == self.versions:  # nothing moved meanwhile
                self.compiled = c
        return ok

    def rebases(self, written: frozenset) -> bool:
        """Does a call that writes the module attributes ``written`` leave the
        modules in a state the trace accepts? Not where it read one of them
        (``self.counter += 1``): the value written is not the one it read."""
        return bool(written) and not (written & self.read_names)

    def rebase(self) -> None:
        """After the jit stored the trace's own writes on the modules (a call it
        served): the module dicts' new versions are the accepted state."""
        self.static, self.compiled = False, None
        n = len(self.dicts) - sum(len(g.dicts) for g in self.objects)
        self.versions[:n] = map(dict_version, self.dicts[:n])

    def release(self) -> None:
        """A module last checked was freed: keep nothing of the modules (their
        dicts hold their parameters) nor of what was read off them; the next call
        checks each module (the slow path) and ``refresh`` starts again."""
        if not self.dicts:
            return
        self.compiled, self.roots, self.alive = None, (), []
        self.dicts, self.versions = [], [-1]
        for g in self.objects:
            g.release()

    def refresh(self, *mods: nn.Module) -> None:
        self.compiled = None
        freed = releasing(self)
        self.alive = [weakref.ref(m, freed) for m in mods]
        dicts = []
        for mod, leaf in zip(mods, self.leaf):
            dicts += (mod.__dict__, mod._parameters, mod._buffers)
            if not leaf:
                dicts.append(mod._modules)
        for c in self.classes:
            c.refresh()
            dicts.append(c.dict)
        versions = list(map(dict_version, dicts))
        for g in self.objects:  # the versions each matched at, not the ones now
            dicts.extend(g.dicts)
            versions.extend(g.versions)
        self.dicts = dicts
        self.versions = versions


_NO_LOCALS: dict = {}


def compiled_version_check(dicts: list):
    """A ``torch._C._dynamo.guards.RootGuardManager`` whose ``check({})`` is
    True while each dict keeps its current version tag; None where this torch
    lacks that (internal) API, and the Python pass is used instead."""
    try:
        from torch._dynamo.guards import GuardManagerType

        holder = {f"d{i}": d for i, d in enumerate(dicts)}
        root = torch._C._dynamo.guards.RootGuardManager()
        kind = GuardManagerType.GUARD_MANAGER
        table = root.globals_dict_manager(holder, "dicts", holder, kind)
        for k, d in holder.items():
            m = table.dict_getitem_manager(k, f"dicts[{k!r}]", d, kind)
            m.add_dict_version_guard(d, [f"version of {k}"], None)
        return root if root.check(_NO_LOCALS) else None
    except (AttributeError, ImportError, RuntimeError, TypeError) as e:
        log.debug("symshape: no C++ dict-version check (%s); using the Python one", e)
        return None


class HookGuard:
    """Hooks of the modules a trace ran, and the global module hooks. A hook
    registered anywhere takes a new ``RemovableHandle.next_id``; a hook removed
    changes the version of a dict that held one; a module replaced by another
    of the same kind (``m.lin = nn.Linear(...)``, which the trace serves) brings
    its own hook dicts. Each sends the check to compare every hook dict with
    what was traced."""

    __slots__ = ("dicts", "full", "labels", "mods", "next_id", "snaps")

    def __init__(self, modules: list):
        """``modules``: ``(label, module)`` in the order the prologue passes them."""
        self.labels = [label for label, _ in modules]
        self._watch([m for _, m in modules])
        self.snaps = {label: tuple(d.items()) for label, d in self.dicts}

    def _watch(self, mods) -> None:
        self.mods = [weakref.ref(m) for m in mods]
        self.dicts = hook_dicts("", None)
        for label, m in zip(self.labels, mods):
            self.dicts += hook_dicts(label, m)
        self.full = [(d, dict_version(d)) for _, d in self.dicts if d]
        self.next_id = RemovableHandle.next_id

    def __call__(self, fast: bool, *mods) -> bool:
        """``fast``: the tree's check passed, so ``mods`` are the modules last seen."""
        moved = not fast and any(r() is not m for r, m in zip(self.mods, mods))
        if (
            not moved
            and RemovableHandle.next_id == self.next_id
            and all(dict_version(d) == v for d, v in self.full)
        ):
            return True
        if self.why(*mods) is None:
            self._watch(mods if moved else [r() for r in self.mods])
            return True
        return False

    def why(self, *mods) -> str | None:
        dicts = hook_dicts("", None)
        for label, m in zip(self.labels, mods or [r() for r in self.mods]):
            dicts += hook_dicts(label, m) if m is not None else []
        now = {label: tuple(d.items()) for label, d in dicts}
        for label in self.snaps.keys() | now.keys():
            items, found = self.snaps.get(label, ()), now.get(label, ())
            if len(found) != len(items) or any(
                a[0] != b[0] or a[1] is not b[1] for a, b in zip(found, items)
            ):
                return f"{label} changed: {len(items)} hooks when traced, {len(found)} now"
        return None


def hook_dicts(label: str, obj) -> list:
    """``(label, dict)`` of each hook dict of a module (or, for ``None``, the
    global module hooks of ``register_module_forward_hook`` and friends)."""
    if obj is None:
        import torch.nn.modules.module as M

        names = [("_global" + n, getattr(M, "_global" + n, None)) for n in HOOK_DICTS]
        return [(f"torch.nn.modules.module.{n}", d) for n, d in names if isinstance(d, dict)]
    out = []
    for n in HOOK_DICTS:
        d = obj.__dict__.get(n)
        if isinstance(d, dict):
            out.append((join_label(label or "self", n), d))
    return out


def join_label(a: str, b: str) -> str:
    return f"{a}.{b}" if a else b
