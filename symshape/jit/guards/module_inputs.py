"""Modules walked by the prologue Builder (mixed into prologue.Builder): their
parameters and buffers become inputs (deferred until the computation uses
them), tensors in plain attributes are read each call, one module reached by
two paths is fetched once and the other path checked; then the fetches, the
Python state of every module (attributes read, submodules, no shadowing of
the class), the objects and classes read off them, and the hooks.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from symshape.jit.guards.hidden_state import iterator_within
from symshape.jit.guards.module_state import (
    HookGuard,
    ModuleGuard,
    TreeGuard,
    join_label,
)
from symshape.jit.guards.object_inputs import iterator_refused
from symshape.jit.guards.state import (
    ClassGuard,
    Ident,
    ObjectGuard,
    is_plain_object,
    snapshot,
)
from symshape.trace.modules import watched_class


class ModuleInputs:
    """Builder methods for modules (mixed into prologue.Builder)."""

    def module(self, mod: nn.Module, src: str, label: str, out=None, path=None):
        """Walk a module: parameters and buffers become (deferred) inputs."""
        path = src if path is None else path
        if isinstance(mod, torch.jit.ScriptModule):
            # TorchScript's C++ interpreter runs it, at a split, on its own state: no
            # parameter of it is an input, and its Python attributes are not its state
            return mod
        self.module_paths.setdefault(id(mod), path)
        if id(mod) in self.module_locals:  # walked already: the same object by this path
            self.module_aliases.append((src, self.module_locals[id(mod)][0], label))
            return mod
        loc = self.ctx.reserve(f"_m{len(self.module_locals)}")
        mlines = [f"{loc} = {src}"]
        # while another thread traces it, a module's class is the watching subclass
        T, W = self.const(type(mod), "_T"), self.const(watched_class(type(mod)), "_W")
        self.fail(
            f"type({loc}) is not {T} and type({loc}) is not {W}",
            f"{label or 'the module'} is a {type(mod).__name__}",
            f"type({loc}).__name__",
            into=mlines,
        )
        self.module_locals[id(mod)] = (loc, mlines, label, out)
        self.module_of[id(mod)] = mod
        for slot in ("_parameters", "_buffers"):
            for name, t in getattr(mod, slot).items():
                if t is None:
                    continue
                src_t = f"{loc}.{slot}[{name!r}]"
                if id(t) in self.tensor_local:  # tied: the same tensor reached twice
                    proxy = self.proxy_of[id(t)]
                    self.aliases.append(
                        (mod, src_t, self.tensor_local[id(t)], proxy, join_label(label, name))
                    )
                else:
                    proxy = self.walk(t, src_t, join_label(label, name), into=[], is_param=True)
                    self.deferred[-1].module = mod
                self.slots.append((mod, slot, name, proxy))
        for name, t in list(mod.__dict__.items()):
            # a tensor in a plain attribute (`self.last = h.detach()` by an earlier call)
            # is an input like a buffer, read on every call; its sizes follow the policy
            if type(t) is torch.Tensor and isinstance(name, str) and name.isidentifier():
                proxy = self.walk(t, f"{loc}.__dict__[{name!r}]", join_label(label, name), mlines)
                self.attr_proxies[(id(mod), name)] = proxy
            elif (found := iterator_within(t, join_label(label or "self", name))) is not None:
                raise iterator_refused(*found)
        for name, sub in mod._modules.items():
            if sub is not None:
                self.module(
                    sub,
                    f"{loc}._modules[{name!r}]",
                    join_label(label, name),
                    out,
                    f"{path}._modules[{name!r}]",
                )
        return mod

    def emit_modules(
        self,
        used: set,
        attr_reads: list,
        class_reads: list = (),
        read_objects: dict | None = None,
        modules_read: set = frozenset(),
    ) -> None:
        """Emit, for every module the trace walked, its fetch and a check of its
        Python state (attributes read, submodule names, no instance attribute
        shadowing what was found on the class), then the used tensors' fetches,
        then checks of the objects, classes and hooks the trace read."""
        guards, objects, classes = self._module_guards(attr_reads, class_reads)
        mods = list(self.module_of.values())
        read = []  # (ObjectGuard, value, where) of objects read off modules
        for value, where in objects.values():
            guard = (read_objects or {}).get(id(value)) or ObjectGuard(value, where)
            guard.label = where
            read.append((guard, value, where))
        if mods:
            tree, roots = self._emit_tree(mods, classes, read, modules_read)
            self.tree.read_names = frozenset(k for g in guards.values() for k in g.reads)
        self._emit_module_states(guards)
        self._emit_used_fetches(used)
        self._emit_read_checks(read, classes)
        if mods:  # every module checked on the slow path: remember what was found
            locs = ", ".join(self.module_locals[mid][0] for mid in self.module_of)
            rooted = f"; {tree}.rooted(({roots}))" if roots else ""
            self.lines.append(f"if not _fast: {tree}.refresh({locs}){rooted}")
        if self.module_of:
            self._emit_hooks()

    def _module_guards(self, attr_reads: list, class_reads: list) -> tuple:
        """A ModuleGuard for every module walked, with the attributes the trace read
        off it (an object read there guarded apart: ``objects``, ``id -> (value,
        where)``) and the class attributes an instance one must not shadow; a
        ClassGuard for every class those were found on."""
        guards: dict[int, ModuleGuard] = {}
        for mid, (_, _, label, _) in self.module_locals.items():
            guards[mid] = ModuleGuard(label)
        objects: dict[int, tuple] = {}  # id(value) -> (value, label): values read off modules
        for m, attr, value in attr_reads:
            g = guards.get(id(m))
            if g is None or attr in g.reads:
                continue
            where = join_label(g.label, attr) if g.label else f"self.{attr}"
            if is_plain_object(value) or type(value) in (list, dict, set):
                g.reads[attr] = Ident(value)
                objects.setdefault(id(value), (value, where))
            else:
                g.reads[attr] = snapshot(value)
        classes: dict[type, ClassGuard] = {}
        for m, owner, attr in class_reads:
            g = guards.get(id(m))
            if g is None:
                continue
            g.shadow.add(attr)
            if owner not in classes:
                classes[owner] = ClassGuard(owner)
        return guards, objects, classes

    def _emit_tree(self, mods: list, classes: dict, read: list, modules_read) -> tuple:
        """The TreeGuard over the modules walked, and the line that asks its fast path
        (``_fast``); returns its constant's name and the sources of the roots."""
        tree_guard = TreeGuard(
            mods,
            list(classes.values()),
            [g for g, _, _ in read],
            modules_read,
        )
        tree = self.const(tree_guard, "_tree")
        self.tree = tree_guard
        # the modules passed in must be the ones whose dicts the tree last checked
        roots = "".join(f"{src}, " for src, _ in self.root_srcs)
        tree_guard.rooted(tuple(r for _, r in self.root_srcs))
        self.lines.append(f"_fast = {tree}.fast(({roots}))" if roots else f"_fast = {tree}.fast()")
        return tree, roots

    def _emit_module_states(self, guards: dict) -> None:
        """Each module's fetch, then the check of its Python state (slow path only)."""
        for mid, mod in self.module_of.items():
            loc, mlines, label, _ = self.module_locals[mid]
            g = guards[mid]
            g.watch(mod)
            mg = self.const(g, "_mstate")
            self.fail(
                f"not _fast and not {mg}.ok({loc})",
                f"{label or 'the module'} has the Python state it had when traced",
                f"{mg}.why({loc})",
                kind="state",
                into=mlines,
            )
            self.lines.extend(mlines)
        for src, first, label in self.module_aliases:  # every module fetched by now
            self.fail(
                f"not _fast and {src} is not {first}",
                f"{label} is the same module as {first} (one module reached by two paths)",
                None,
                kind="state",
            )

    def _emit_used_fetches(self, used: set) -> None:
        """The fetches of the module tensors the computation uses, and the checks
        that tied ones are still the same tensor."""
        for d in self.deferred:
            if id(d.proxy._ss_var) in used:
                self.lines.extend(d.fetch)
        for _mod, src_t, other, proxy, label in self.aliases:
            if id(proxy._ss_var) in used:
                self.fail(
                    f"{src_t} is not {other}", f"{label} is the same tensor as {other} (tied)", None
                )

    def _emit_read_checks(self, read: list, classes: dict) -> None:
        """The checks of the objects read off modules and of the classes read."""
        for guard, _value, where in read:
            og = self.const(guard, "_state")
            skip = "" if guard.lists else "not _fast and "  # a list has no version tag
            # the object last matched (held weakly where it can be): the module checks
            # above rejected a call whose module holds another
            self.fail(
                f"{skip}not {og}({og}.value)",
                f"{where} is as when traced",
                f"{og}.why({og}.value)",
                kind="state",
            )
        for cls, cg in classes.items():
            c = self.const(cg, "_cstate")
            self.fail(
                f"not _fast and {c}.why() is not None",
                f"class {cls.__qualname__} is as when traced",
                f"{c}.why()",
                kind="state",
            )

    def _emit_hooks(self) -> None:
        """The check that the module hooks (global and per module) are those traced."""
        mids = list(self.module_locals)
        modules = [(self.module_locals[mid][2], self.module_of[mid]) for mid in mids]
        h = self.const(HookGuard(modules), "_hooks")
        rh = self.const(RemovableHandle, "_Handle")
        mods = ", ".join(self.module_locals[mid][0] for mid in mids)
        # a hook registered anywhere takes a new handle id: only then, when a hook traced
        # may have been removed, or a module may have been replaced (the tree's check
        # failed), are the hook dicts compared
        self.fail(
            f"({rh}.next_id != {h}.next_id or {h}.full or not _fast) and not {h}(_fast, {mods})",
            "the module hooks are those traced",
            f"{h}.why({mods})",
            kind="state",
        )
