"""``ExportedProgram.save`` and ``symshape.load``: one JSON document.

    {"format": "symshape.ExportedProgram", "version": 1,
     "sha256": "<hex digest of the canonical JSON of program>",
     "program": {"name", "symshape", "torch", "signature", "sources",
                 "computation", "backward", "autograd", "outputs",
                 "params", "constants", "tensors"}}

docs/export-format.md documents every field. Loading parses JSON, checks the
format, the version and the checksum, then rebuilds everything through fixed
tables and the op registry: nothing from the file is evaluated as code, no
pickle is read, and no package is imported that the process has not imported
(output classes are found by module and name among those: structure.py).
Tensors are raw little-endian bytes in base64 with dtype, shape and strides.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import json
import sys

import torch

import symshape
from symshape.export.program import ExportedProgram
from symshape.export.serialize import (
    DTYPES,
    FormatError,
    SaveError,
    check_int,
    check_name,
    check_text,
    dec_device,
    dec_expr,
    dec_trace,
    dec_value,
    enc_expr,
    enc_trace,
    enc_value,
)
from symshape.export.signature import DimSig, Signature, SizeSpec, TensorSig
from symshape.export.structure import dec_spec, enc_spec

FORMAT = "symshape.ExportedProgram"
VERSION = 1


def _canonical(program: dict) -> bytes:
    return json.dumps(program, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def save(ep: ExportedProgram, path) -> None:
    tensors: dict = {}

    def ref(t: torch.Tensor) -> str:
        key = next((k for k, (x, _) in tensors.items() if x is t), None)
        if key is None:
            key = f"t{len(tensors)}"
            tensors[key] = (t, _enc_tensor(t))
        return key

    c = ep.computation
    program = {
        "name": ep.name,
        "symshape": symshape.__version__,
        "torch": torch.__version__,
        "signature": _enc_signature(ep.signature),
        "sources": [[k, w] for k, w in ep.sources],
        "computation": enc_trace(c),
        "backward": None if ep.backward is None else enc_trace(ep.backward),
        "autograd": ep.autograd,
        "outputs": enc_spec(ep.out_spec),
        "params": {name: ref(t) for name, t in ep.params.items()},
        "constants": {
            "computation": {k: ref(_tensor(k, v)) for k, v in c.constants.items()},
            "backward": {}
            if ep.backward is None
            else {k: ref(_tensor(k, v)) for k, v in ep.backward.constants.items()},
        },
    }
    program["tensors"] = {k: enc for k, (_, enc) in tensors.items()}
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "sha256": hashlib.sha256(_canonical(program)).hexdigest(),
        "program": program,
    }
    with open(path, "w", encoding="ascii") as f:
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")


def _tensor(name: str, v) -> torch.Tensor:
    if not isinstance(v, torch.Tensor):
        raise SaveError(f"cannot save the constant {name}: a {type(v).__name__}, not a tensor")
    return v


def _enc_tensor(t: torch.Tensor) -> dict:
    if t.layout is not torch.strided or type(t) not in (torch.Tensor, torch.nn.Parameter):
        raise SaveError(f"cannot save a {type(t).__name__} with layout {t.layout}")
    if sys.byteorder != "little":
        raise SaveError("saving needs a little-endian machine")
    data = t.detach().to("cpu").clone(memory_format=torch.contiguous_format)
    raw = ctypes.string_at(data.data_ptr(), data.numel() * data.element_size())
    return {
        "dtype": next(k for k, d in DTYPES.items() if d == t.dtype),
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "device": str(t.device),
        "requires_grad": t.requires_grad,
        "parameter": isinstance(t, torch.nn.Parameter),
        "data": base64.b64encode(raw).decode("ascii"),
    }


def load(path) -> ExportedProgram:
    """Read a program written by ``ExportedProgram.save``. Raises ``FormatError``
    for a file that is not one, was truncated or modified, or needs ops or
    output types this process lacks."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not a symshape export file (not ASCII JSON: {e})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise FormatError(
            f"{path}: not a complete JSON document ({e}); the file is truncated or is not a "
            "symshape export"
        ) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise FormatError(f'{path}: not a symshape export file (no "format": "{FORMAT}")')
    version = doc.get("version")
    if version != VERSION:
        raise FormatError(
            f"{path}: format version {version!r}; this symshape ({symshape.__version__}) reads "
            f"version {VERSION}"
        )
    program = doc.get("program")
    digest = hashlib.sha256(_canonical(program)).hexdigest() if isinstance(program, dict) else None
    if digest is None or digest != doc.get("sha256"):
        raise FormatError(
            f"{path}: checksum mismatch: the program was modified or damaged after it was saved "
            f"(stored {str(doc.get('sha256'))[:16]}..., computed {str(digest)[:16]}...)"
        )
    try:
        return _dec_program(program)
    except FormatError as e:
        raise FormatError(f"{path}: {e}") from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise FormatError(
            f"{path}: malformed program ({type(e).__name__}: {e}); was it written by "
            "ExportedProgram.save?"
        ) from None


def _dec_program(p: dict) -> ExportedProgram:
    tensors = {k: _dec_tensor(v, f"tensor {k}") for k, v in p["tensors"].items()}

    def get(k):
        if k not in tensors:
            raise FormatError(f"unknown tensor reference {k!r}")
        return tensors[k]

    consts = p["constants"]
    computation = dec_trace(
        p["computation"],
        {check_name(k, "constant"): get(v) for k, v in consts["computation"].items()},
        "computation",
    )
    backward = None
    if p["backward"] is not None:
        bconsts = {check_name(k, "constant"): get(v) for k, v in consts["backward"].items()}
        backward = dec_trace(p["backward"], bconsts, "backward")
    sig = _dec_signature(p["signature"])
    params = {check_text(k, "parameter"): get(v) for k, v in p["params"].items()}
    sources = []
    for kind, what in p["sources"]:
        ok = (
            (kind == "tensor" and type(what) is int and 0 <= what < len(sig.tensors))
            or (kind == "param" and what in params)
            or (kind == "symbol" and any(d.symbol == what for d in sig.dims))
        )
        if ok:
            sources.append((kind, what))
        else:
            raise FormatError(f"sources: unknown input {kind!r} {what!r}")
    if len(sources) != len(computation.inputs):
        raise FormatError("sources: not one per computation input")
    autograd = _dec_autograd(p["autograd"], backward, computation)
    name = check_text(p["name"], "name")
    return ExportedProgram(
        name, sig, sources, computation, params, dec_spec(p["outputs"]), backward, autograd
    )


def _dec_autograd(a, backward, computation):
    if backward is None:
        if a is not None:
            raise FormatError("autograd: given without a backward trace")
        return None
    keys = ("n_out", "n_saved", "diff_out", "grad_in", "n_in")
    if not isinstance(a, dict) or set(a) != set(keys):
        raise FormatError(f"autograd: expected the keys {keys}")
    out = {k: a[k] for k in keys}
    for k in ("n_out", "n_saved", "n_in"):
        check_int(out[k], f"autograd {k}")
    for k in ("diff_out", "grad_in"):
        if not all(type(i) is int and i >= 0 for i in out[k]):
            raise FormatError(f"autograd {k}: expected non-negative ints")
    if out["n_in"] != len(computation.inputs):
        raise FormatError("autograd n_in: not the number of computation inputs")
    return out


def _dec_tensor(j: dict, what: str) -> torch.Tensor:
    if j.get("dtype") not in DTYPES:
        raise FormatError(f"{what}: unknown dtype {j.get('dtype')!r}")
    dtype = DTYPES[j["dtype"]]
    shape = [check_int(s, what) for s in j["shape"]]
    strides = [check_int(s, what) for s in j["strides"]]
    if len(strides) != len(shape) or any(s < 0 for s in shape + strides):
        raise FormatError(f"{what}: shape {shape} and strides {strides} do not match")
    try:
        raw = base64.b64decode(j["data"], validate=True)
    except (ValueError, TypeError) as e:
        raise FormatError(f"{what}: the data is not base64 ({e})") from None
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(raw) != numel * itemsize:
        raise FormatError(
            f"{what}: {len(raw)} bytes of data, expected {numel * itemsize} for {j['dtype']}{shape}"
        )
    flat = torch.frombuffer(bytearray(raw), dtype=dtype) if numel else torch.empty(0, dtype=dtype)
    t = torch.empty_strided(shape, strides, dtype=dtype)
    t.copy_(flat.reshape(shape))
    device = dec_device(j["device"], what)
    if device.type != "cpu":
        t = t.to(device)
    if j.get("parameter"):
        return torch.nn.Parameter(t, requires_grad=bool(j["requires_grad"]))
    return t.requires_grad_(bool(j["requires_grad"])) if t.is_floating_point() else t


# -- the signature ------------------------------------------------------------------------------


def _enc_signature(s: Signature) -> dict:
    return {
        "args": [_enc_node(n) for n in s.args],
        "arg_labels": list(s.arg_labels),
        "kwargs": [[k, _enc_node(n)] for k, n in s.kwargs],
        "tensors": [
            {
                "label": t.label,
                "path": list(t.path),
                "dtype": next(k for k, d in DTYPES.items() if d == t.dtype),
                "device": str(t.device),
                "shape": [
                    d
                    if isinstance(d, int)
                    else {"dim": d.root, "scale": d.scale, "offset": d.offset}
                    for d in t.shape
                ],
                "requires_grad": t.requires_grad,
                "strides": None if t.strides is None else list(t.strides),
            }
            for t in s.tensors
        ],
        "dims": [
            {
                "name": d.name,
                "symbol": d.symbol,
                "min": d.min,
                "max": d.max,
                "tensor": d.tensor,
                "dim": d.dim,
                "scale": d.scale,
                "offset": d.offset,
            }
            for d in s.dims
        ],
        "default_dtype": next(k for k, d in DTYPES.items() if d == s.default_dtype),
        "guards": [enc_expr(g) for g in s.guards],
    }


def _enc_node(n):
    kind = n[0]
    if kind == "tensor":
        return ["tensor", n[1]]
    if kind == "value":
        return ["value", enc_value(n[1])]
    if kind == "dict":
        return ["dict", [[k, _enc_node(c)] for k, c in n[1]]]
    return [kind, [_enc_node(c) for c in n[1]]]


def _dec_node(j, n_tensors: int, what: str):
    kind = j[0]
    if kind == "tensor" and type(j[1]) is int and 0 <= j[1] < n_tensors:
        return ("tensor", j[1])
    if kind == "value":
        v = dec_value(j[1], _no_vars, what)
        if not (v is None or type(v) in (bool, int, float, str)):
            raise FormatError(f"{what}: a constant argument must be a Python scalar")
        return ("value", v)
    if kind == "dict":
        items = []
        for k, c in j[1]:
            if type(k) not in (str, int):
                raise FormatError(f"{what}: a dict key must be str or int, found {k!r}")
            items.append((k, _dec_node(c, n_tensors, what)))
        return ("dict", items)
    if kind in ("tuple", "list"):
        return (kind, [_dec_node(c, n_tensors, what) for c in j[1]])
    raise FormatError(f"{what}: unknown input node {kind!r}")


def _dec_strides(j, n: int, what: str):
    if j is None:
        return None
    if not isinstance(j, list) or len(j) != n:
        raise FormatError(f"{what}: strides must be a list of {n} ints")
    return tuple(check_int(s, what) for s in j)


def _no_vars(name):
    raise FormatError(f"the signature names a variable {name!r}")


def _dec_signature(j: dict) -> Signature:
    tensors = []
    for i, t in enumerate(j["tensors"]):
        what = f"signature tensor {i}"
        shape = []
        for d in t["shape"]:
            if type(d) is int and d >= 0:
                shape.append(d)
            elif isinstance(d, dict):
                scale = check_int(d["scale"], what)
                if scale <= 0:
                    raise FormatError(f"{what}: a derived dim needs a positive scale")
                shape.append(
                    SizeSpec(check_name(d["dim"], what), scale, check_int(d["offset"], what))
                )
            else:
                raise FormatError(f"{what}: a size is an int or a dim, found {d!r}")
        path = tuple(t["path"])
        if (
            not path
            or path[0] not in ("args", "kwargs")
            or not all(type(p) in (str, int) for p in path)
        ):
            raise FormatError(f"{what}: malformed path {t['path']!r}")
        if t["dtype"] not in DTYPES:
            raise FormatError(f"{what}: unknown dtype {t['dtype']!r}")
        tensors.append(
            TensorSig(
                check_text(t["label"], what),
                path,
                DTYPES[t["dtype"]],
                dec_device(t["device"], what),
                tuple(shape),
                bool(t["requires_grad"]),
                _dec_strides(t.get("strides"), len(shape), what),
            )
        )
    dims = []
    for i, d in enumerate(j["dims"]):
        what = f"signature dim {i}"
        hi = d["max"]
        dims.append(
            DimSig(
                check_name(d["name"], what),
                check_name(d["symbol"], what),
                check_int(d["min"], what),
                None if hi is None else check_int(hi, what),
                check_int(d["tensor"], what),
                check_int(d["dim"], what),
                check_int(d["scale"], what),
                check_int(d["offset"], what),
            )
        )
        t = tensors[dims[-1].tensor] if 0 <= dims[-1].tensor < len(tensors) else None
        if t is None or not 0 <= dims[-1].dim < len(t.shape) or dims[-1].scale <= 0:
            raise FormatError(f"{what}: its first occurrence is not a dimension of an input")
    names = {d.name for d in dims}
    for t in tensors:
        for s in t.shape:
            if isinstance(s, SizeSpec) and s.root not in names:
                raise FormatError(f"signature: {t.label} uses an undeclared dim {s.root!r}")
    guards = [dec_expr(g, "guard") for g in j["guards"]]
    symbols = {d.symbol for d in dims}
    for g in guards:
        if not all(s.name in symbols for s in g.free_symbols):
            raise FormatError(f"guard {g}: reads symbols that are not dims")
    n = len(tensors)
    args = [_dec_node(a, n, "signature args") for a in j["args"]]
    labels = [check_text(x, "argument label") for x in j["arg_labels"]]
    kwargs = []
    for k, node in j["kwargs"]:
        kwargs.append((check_text(k, "keyword"), _dec_node(node, n, "signature kwargs")))
    if j["default_dtype"] not in DTYPES or len(labels) != len(args):
        raise FormatError("signature: malformed default dtype or argument labels")
    return Signature(args, labels, kwargs, tensors, dims, DTYPES[j["default_dtype"]], guards)


__all__ = ["FORMAT", "VERSION", "load", "save"]
