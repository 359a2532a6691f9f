"""``ExportedProgram.to_torch_export()``: symshape's program as a
``torch.export.ExportedProgram``, built from the trace without tracing again.

    ep = symshape.export(model, (ids,), dynamic_shapes={"input_ids": {0: batch, 1: seq}})
    tep = ep.to_torch_export()
    torch.export.save(tep, "model.pt2")                  # or:
    torch._inductor.aoti_compile_and_package(tep)        # AOTInductor
    torch.onnx.export(tep, (ids,), dynamo=True)          # ONNX

The graph is what ``torch.export.export`` returns (its training-IR dialect):
parameters, buffers and tensor constants lifted to placeholders before the
user inputs, one ATen overload per trace op (``aten_calls.py``), each Dim
read once with ``aten.sym_size.int``, shape arithmetic as ``operator`` calls,
runtime asserts as ``aten._assert_scalar``. Every node carries ``meta["val"]``
(a FakeTensor or SymInt over a ShapeEnv made from the Dims,
``torch_symbols.py``), so nothing runs PyTorch's symbolic tracing: GPT-2
small converts in a fraction of a second. ``range_constraints`` are the
Dims' ranges, with the derived input sizes (``2*T``) as torch.export lists
them; ``tep.run_decompositions()`` gives the core ATen opset.
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
import torch.utils._pytree as pytree
from torch._export.verifier import TrainingIRVerifier
from torch.export import ExportedProgram as TorchExportedProgram
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)

from symshape.export.aten_calls import TorchExportError, aten_call, getitem_steps, packet_of
from symshape.export.fx import _attr_name, _expr
from symshape.export.signature import root_value
from symshape.export.torch_symbols import TorchSymbols
from symshape.ir import ASSERT, CONST, SYM, TensorMeta, Var, iter_vars, map_vars
from symshape.jit.boundary.outputs import unflatten
from symshape.sym import expr as E

_SYM_SIZE = torch.ops.aten.sym_size.int
_ASSERT = torch.ops.aten._assert_scalar.default
_GETITEM_OPS = {
    "slice": torch.ops.aten.slice.Tensor,
    "select": torch.ops.aten.select.int,
    "unsqueeze": torch.ops.aten.unsqueeze.default,
}


def to_torch_export(
    ep, args: tuple | None = None, kwargs: dict | None = None
) -> TorchExportedProgram:
    """The ``torch.export.ExportedProgram`` of symshape's ``ep`` (see the module
    doc). ``args``/``kwargs``: example inputs, kept as ``example_inputs`` (which
    AOTInductor compiles with); by default zero tensors at a size in each Dim's
    range. Raises ``TorchExportError`` naming the op and line of anything a
    torch.export program cannot express."""
    sig = ep.signature
    if args is None:
        args, kwargs = _example_inputs(sig)
    kwargs = dict(kwargs or {})
    syms = TorchSymbols(sig, _hints(sig, args, kwargs))
    try:
        return _program(_Builder(ep, syms), tuple(args), kwargs)
    finally:
        syms.done()


def _program(b: _Builder, args: tuple, kwargs: dict) -> TorchExportedProgram:
    sig = b.ep.signature
    b.placeholders()
    b.body()
    outputs, out_spec = b.outputs()
    b.g.eliminate_dead_code()  # the Dims' sizes nothing reads (asserts are kept)
    in_spec = pytree.tree_flatten((b.in_tree, dict(b.kw_tree)))[1]
    names = [*sig.arg_labels, *(k for k, _ in sig.kwargs)]
    call = ModuleCallSignature([], [], in_spec, out_spec, forward_arg_names=names)
    return TorchExportedProgram(
        root=torch.nn.Module(),  # the program's GraphModule is made from it and the graph
        graph=b.g,
        graph_signature=ExportGraphSignature(b.input_specs, outputs),
        state_dict=b.state_dict,
        range_constraints=_range_constraints(b.syms, b.user_vals),
        module_call_graph=[ModuleCallEntry(fqn="", signature=call)],
        example_inputs=(args, kwargs),
        constants=b.constants,
        verifiers=[TrainingIRVerifier],
    )


def _hints(sig, args, kwargs) -> dict[str, int]:
    return {d.name: root_value(d, sig.tensors[d.tensor], args, kwargs) for d in sig.dims}


def _example_inputs(sig) -> tuple[tuple, dict]:
    """Zero tensors of the signature's dtypes, at sizes inside the Dims' ranges."""
    hints = TorchSymbols.default_hints(sig)
    tensors = []
    for t in sig.tensors:
        shape = [s if isinstance(s, int) else s.scale * hints[s.root] + s.offset for s in t.shape]
        tensors.append(torch.zeros(shape, dtype=t.dtype, device=t.device))

    def build(node):
        kind, what = node
        if kind == "tensor":
            return tensors[what]
        if kind == "value":
            return what
        if kind == "dict":
            return {k: build(c) for k, c in what}
        items = [build(c) for c in what]
        return items if kind == "list" else tuple(items)

    return tuple(build(n) for n in sig.args), {k: build(n) for k, n in sig.kwargs}


def _range_constraints(syms: TorchSymbols, user_vals: list) -> dict:
    """Each Dim's range, and the range of each derived input size (``2*s0 + 1``)."""
    out = dict(syms.ranges)
    for val in user_vals:
        for s in val.shape:
            if isinstance(s, torch.SymInt):
                e = s.node.expr
                if e not in out and not e.is_number:
                    out[e] = syms.shape_env.bound_sympy(e)
    return out


class _Builder:
    """The graph under construction: placeholders, then one or more ATen calls
    per trace node, then the output."""

    def __init__(self, ep, syms: TorchSymbols):
        self.ep = ep
        self.syms = syms
        self.g = fx.Graph()
        self.env: dict[int, object] = {}  # id(Var) -> fx node (or a Python value)
        self.input_specs: list = []
        self.state_dict: dict = {}
        self.constants: dict = {}
        self.user_vals: list = []
        self.tensors: dict[int, fx.Node] = {}  # signature tensor index -> placeholder
        self.symbol_nodes: dict[str, fx.Node] = {}
        self.param_nodes: dict[str, fx.Node] = {}
        self.in_tree: tuple = ()
        self.kw_tree: list = []

    # -- nodes ---------------------------------------------------------------------------
    def node(self, target, args=(), kwargs=None, val=None, where=None) -> fx.Node:
        name = getattr(target, "_opname", None)  # aten.view.default -> "view"
        n = self.g.create_node("call_function", target, tuple(args), kwargs or {}, name=name)
        n.meta["val"] = val
        if where is not None:
            n.meta["stack_trace"] = (
                f'  File "{where.filename}", line {where.lineno}, in {where.function}\n'
                f"    {where.line}\n"
            )
        return n

    def fake_call(self, target, args, kwargs, where=None) -> fx.Node:
        """A call whose value PyTorch's fake kernels compute (the few ops the
        trace has no metadata for: the steps of an indexing). Guards are off: a
        kernel that asks whether a size is 1 (to pick strides) must not narrow
        the program, whose trace holds for every size in range."""
        fa, fk = pytree.tree_map_only(fx.Node, lambda n: n.meta["val"], (args, kwargs))
        with self.syms.fake_mode, self.syms.shape_env.suppress_guards():
            val = target(*fa, **fk)
        return self.node(target, args, kwargs, val, where)

    def read(self, v: Var):
        r = self.env.get(id(v))
        if r is None and id(v) not in self.env:
            r = self.env[id(v)] = self.constant(v.name, self.ep.computation.constants[v.name])
        return r

    def constant(self, name: str, value):
        """A lifted tensor constant (placeholder ``c_<name>``), or a Python value as is."""
        if not isinstance(value, torch.Tensor):
            return value
        target = f"c_{_attr_name(name)}"
        users = [i for i, s in enumerate(self.input_specs) if s.kind == InputKind.USER_INPUT]
        at = users[0] if users else len(self.input_specs)
        stop = self.input_specs[at].arg.name if users else None  # before the user inputs
        before = next((n for n in self.g.nodes if n.op != "placeholder" or n.name == stop), None)
        with self.g.inserting_before(before):
            p = self.g.placeholder(target)
        p.meta["val"] = self.syms.real(value)
        self.constants[target] = value
        spec = InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(p.name), target=target)
        self.input_specs.insert(at, spec)
        return p

    # -- inputs --------------------------------------------------------------------------
    def placeholders(self) -> None:
        """Parameters, buffers, then the user inputs, as torch.export orders them
        (tensor constants go between, as they are met); then each Dim's size."""
        ep, sig = self.ep, self.ep.signature
        used = [what for kind, what in ep.sources if kind == "param"]
        params = {k: ep.params[k] for k in dict.fromkeys(used)}
        is_param = {k: isinstance(t, torch.nn.Parameter) for k, t in params.items()}
        for label in sorted(params, key=lambda k: not is_param[k]):
            t = params[label]
            p = self.g.placeholder(("p_" if is_param[label] else "b_") + _attr_name(label))
            p.meta["val"] = self.syms.real(t)
            self.state_dict[label] = t
            self.param_nodes[label] = p
            kind = InputKind.PARAMETER if is_param[label] else InputKind.BUFFER
            persistent = None if is_param[label] else True
            self.input_specs.append(InputSpec(kind, TensorArgument(p.name), label, persistent))
        self.in_tree = tuple(self._user(n) for n in sig.args)
        self.kw_tree = [(k, self._user(n)) for k, n in sig.kwargs]
        for d in sig.dims:
            self.symbol(d)
        for v, (kind, what) in zip(ep.computation.inputs, ep.sources):
            if kind == "tensor":
                self.env[id(v)] = self.tensors[what]
            elif kind == "symbol":
                self.env[id(v)] = self.symbol_nodes[what]
            else:
                self.env[id(v)] = self.param_nodes[what]

    def symbol(self, d) -> None:
        """The node of a Dim's symbol: its size read once (``(size - B) // A`` if derived)."""
        size = self.tensors[d.tensor]
        r = self.node(_SYM_SIZE, (size, d.dim), val=size.meta["val"].shape[d.dim])
        if d.offset:
            r = self.node(operator.sub, (r, d.offset), val=r.meta["val"] - d.offset)
        if d.scale != 1:
            r = self.node(operator.floordiv, (r, d.scale), val=r.meta["val"] // d.scale)
        self.symbol_nodes[d.symbol] = r

    def _user(self, node):
        """A user-input subtree: tensors and constants become placeholders (pytree leaves)."""
        kind, what = node
        if kind == "tensor":
            t = self.ep.signature.tensors[what]
            p = self.g.placeholder(_attr_name(t.label))
            shape = tuple(s if isinstance(s, int) else self._size_expr(s) for s in t.shape)
            meta = TensorMeta(shape, t.dtype, t.device, t.requires_grad, t.strides)
            p.meta["val"] = self.syms.tensor(meta, input=True)
            self.user_vals.append(p.meta["val"])
            self.tensors[what] = p
            self.input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(p.name), None))
            return p
        if kind == "value":
            if what is None:
                return None
            p = self.g.placeholder("const")
            p.meta["val"] = what
            arg = ConstantArgument(p.name, what)
            self.input_specs.append(InputSpec(InputKind.USER_INPUT, arg, None))
            return p
        if kind == "dict":
            return {k: self._user(c) for k, c in what}
        items = [self._user(c) for c in what]
        return items if kind == "list" else tuple(items)

    def _size_expr(self, s):
        d = self.ep.signature.dim(s.root)
        return E.add(E.mul(s.scale, E.Symbol(d.symbol)), s.offset)

    # -- the computation -----------------------------------------------------------------
    def body(self) -> None:
        c = self.ep.computation
        for n in c.nodes:
            if n.op is SYM:
                expr, pairs = n.args
                names = {s.name: self.read(v) for s, v in pairs}
                self._emit_expr(n, expr, names)
            elif n.op is ASSERT:
                cond, index, pairs = n.args
                ok = self._emit_expr(None, cond, {s.name: self.read(v) for s, v in pairs})
                a = c.asserts[index]
                msg = f"runtime assert failed: {a.cond}  # {a.where}"
                self.node(_ASSERT, (ok, msg), val=None, where=n.where)
            elif n.op is CONST:
                self.env[id(n.outputs[0])] = n.args[0]
            else:
                self._op(n)

    def _emit_expr(self, n, expr, names: dict):
        first = len(self.g.nodes)
        r = _expr(self.g, expr, names)
        for node in list(self.g.nodes)[first:]:  # the arithmetic _expr added
            vals = pytree.tree_map_only(fx.Node, lambda x: x.meta["val"], node.args)
            node.meta["val"] = node.target(*vals)
        if n is not None:
            self.env[id(n.outputs[0])] = r
        return r

    def _op(self, n) -> None:
        want_tensor = any(isinstance(v.meta, TensorMeta) for v in n.outputs)
        if n.op.source == "torch.Tensor.__getitem__":
            self.env[id(n.outputs[0])] = self._getitem(n)
            return
        constant = not any(True for _ in iter_vars((n.args, n.kwargs)))
        if constant and not n.op.random and _folds(n):
            self.env[id(n.outputs[0])] = self._fold(n)
            return
        kwargs = dict(n.kwargs)
        overload, args, kwargs = aten_call(n, n.args, kwargs, want_tensor)
        args = _lists(map_vars(args, self.read))
        kwargs = {k: _lists(map_vars(v, self.read)) for k, v in kwargs.items()}
        vals = [self.syms.value(v.meta) for v in n.outputs]
        val = vals[0] if len(vals) == 1 and not n.unpack else vals
        node = self.node(overload, args, kwargs, val, n.where)
        if n.unpack:
            for i, v in enumerate(n.outputs):
                self.env[id(v)] = self.node(operator.getitem, (node, i), val=vals[i])
        elif n.outputs:
            self.env[id(n.outputs[0])] = node

    def _getitem(self, n) -> fx.Node:
        x, index = n.args
        steps, advanced = getitem_steps(x, index)
        r = self.read(x)
        for name, step_args in steps:
            r = self.fake_call(
                _GETITEM_OPS[name], (r, *map_vars(step_args, self.read)), {}, n.where
            )
        if advanced is not None:
            idx = [None if a is None else self.read(a) for a in advanced]
            r = self.fake_call(torch.ops.aten.index.Tensor, (r, idx), {}, n.where)
        if len(steps) == 0 and advanced is None:  # x[:] or x[...]: a view of all of x
            r = self.fake_call(torch.ops.aten.alias.default, (r,), {}, n.where)
        return r

    def _fold(self, n) -> fx.Node:
        """An op of constants only (``torch.tensor([1, 2])``): its value, lifted."""
        value = n.op.fn(*n.args, **dict(n.kwargs))
        return self.constant(f"{n.op.name}_{n.outputs[0].name}", value)

    # -- outputs -------------------------------------------------------------------------
    def outputs(self) -> tuple[list, pytree.TreeSpec]:
        ep = self.ep
        out = ep.computation.output
        if ep.autograd is not None:
            out = tuple(out[: ep.autograd["n_out"]])
        if ep.out_spec is None:
            tree = map_vars(out, _Leaf)
        else:
            tree = unflatten([_Leaf(x) for x in out], ep.out_spec)
        flat, spec = pytree.tree_flatten(tree)
        results, specs = [], []
        for path, leaf in zip(_paths(tree), flat):
            if not isinstance(leaf, (_Leaf, *_CONSTANTS)):
                raise TorchExportError(
                    f"to_torch_export: {self.ep.name} returns a {type(leaf).__name__} at "
                    f"output{path}, which torch.utils._pytree cannot flatten; expected "
                    "tensors, ints and constants in tuples, lists, dicts and registered "
                    "pytree nodes (a ModelOutput). Fix: return the tensors themselves (for "
                    "a transformers model, pass use_cache=False or return .logits), or "
                    "register the class with torch.utils._pytree.register_pytree_node"
                )
            x = leaf.value if isinstance(leaf, _Leaf) else leaf
            if isinstance(x, (tuple, list, dict)) and any(True for _ in iter_vars(x)):
                x = map_vars(x, self.read)  # a structure of the trace, not a pytree's
            r = self.read(x) if type(x) is Var else x
            results.append(r)
            specs.append(OutputSpec(OutputKind.USER_OUTPUT, _argument(r), None))
        self.g.output(tuple(results))
        return specs, spec


_CONSTANTS = (type(None), bool, int, float, str, torch.dtype, torch.device)


def _paths(tree) -> list[str]:
    """``[0]``, ``.logits``, ``['a']``: where each pytree leaf of ``tree`` is."""
    flat = pytree.tree_flatten_with_path(tree)[0]
    return [pytree.keystr(path) for path, _ in flat]


class _Leaf:
    """A placeholder for one flat output while its structure is rebuilt."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def _argument(r):
    if isinstance(r, fx.Node):
        val = r.meta.get("val")
        if isinstance(val, torch.SymInt):
            return SymIntArgument(r.name)
        return TensorArgument(r.name)
    return ConstantArgument("", r)


def _folds(n) -> bool:
    """Fold a constants-only op only where it is a factory from data (no ATen op)."""
    return packet_of(n.op) is None or n.op.name in ("tensor", "as_tensor")


def _lists(x):
    """Tuples as lists (ATen schemas take ``int[]``, and torch.export writes lists)."""
    if type(x) is tuple or type(x) is list:
        return [_lists(y) for y in x]
    return x


__all__ = ["TorchExportError", "to_torch_export"]
