"""Layer 4: the op registry and the op families (one module each).

Each forward family registers shape rules; each ``*_vjp`` module attaches
gradient rules to ops that already exist, so every forward family loads
first. The order within each list does not matter: a callable claimed by two
ops, or a gradient for an unknown op, is an error at import.
"""

import importlib

from symshape.ops.registry import BY_NAME, OpDef, available, lookup, register, supported_ops

FAMILIES = (
    "elementwise", "metadata", "casts", "factories", "reductions", "linalg", "views",
    "indexing", "joins", "sorting", "datadep", "nn", "attention", "dropout", "conv", "pooling", "resize", "losses",
    "random", "special", "view_variants", "fft", "decompositions", "products",
    "scans", "index_scatter", "nn_functional", "shape_factories", "rnn",
    "grad_mode", "autograd_attrs", "custom_function",
    "views_inplace", "membership", "asserts", "fill_copy", "tensor_state", "fold", "lp_pool",
    "profiler", "weight_norm", "grouped_mm", "foreach",
)  # fmt: skip
GRADIENTS = (
    "elementwise_vjp", "casts_vjp", "factories_vjp", "reductions_vjp", "linalg_vjp",
    "views_vjp", "indexing_vjp", "joins_vjp", "datadep_vjp", "nn_vjp", "attention_vjp", "conv_vjp",
    "pooling_vjp", "resize_vjp", "losses_vjp", "random_vjp",
    "special_vjp", "view_variants_vjp", "fft_vjp", "decompositions_vjp",
    "scans_vjp", "index_scatter_vjp", "nn_functional_vjp", "shape_factories_vjp", "rnn_vjp",
    "fill_copy_vjp", "fold_vjp",
)  # fmt: skip
# Families of ops that some supported torch releases lack: each is loaded only where
# torch has the callable named beside it (its rules and gradients in one module).
OPTIONAL_FAMILIES = {
    "linear_cross_entropy": "torch.nn.functional.linear_cross_entropy",  # torch 2.13
}
for _module in FAMILIES + GRADIENTS:
    importlib.import_module(f"symshape.ops.{_module}")
for _module, _needs in OPTIONAL_FAMILIES.items():
    if available(_needs):
        importlib.import_module(f"symshape.ops.{_module}")
importlib.import_module("symshape.ops.inplace").mark_allocating()

# Ops whose rules give eager's output layout even for non-contiguous inputs: the
# views family (ported from ATen's stride logic) and ops that always allocate a
# fresh contiguous result. Other ops on non-contiguous inputs get an unknown
# layout (symshape/trace/context.py: _layout).
for _op in BY_NAME.values():
    if getattr(_op.rule, "__module__", "") == "symshape.ops.views":
        _op.layout_exact = True
for _name in ("matmul", "mm", "bmm", "linear", "addmm", "baddbmm", "layer_norm", "embedding"):
    if _name in BY_NAME:
        BY_NAME[_name].layout_exact = True
importlib.import_module("symshape.ops.out_args").install()
importlib.import_module("symshape.ops.fallback").install()  # ops with no rule

__all__ = [
    "BY_NAME",
    "FAMILIES",
    "GRADIENTS",
    "OPTIONAL_FAMILIES",
    "OpDef",
    "available",
    "lookup",
    "register",
    "supported_ops",
]
