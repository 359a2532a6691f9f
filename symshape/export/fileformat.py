"""``ExportedProgram.save`` and ``symshape.load``: the program as JSON, its
tensors in a safetensors file beside it.

    model.json          {"format": "symshape.ExportedProgram", "version": 2,
                         "sha256": "<hex digest of the canonical JSON of program>",
                         "program": {"name", "symshape", "torch", "signature", "sources",
                                     "computation", "backward", "autograd", "outputs",
                                     "params", "constants", "tensors", "weights"}}
    model.safetensors   the parameters, buffers and constants (weights.py, tensorfile.py)

docs/export-format.md documents every field. Loading parses JSON, checks the
format, the version and the checksum, then rebuilds everything through fixed
tables and the op registry: nothing from the file is evaluated as code, no
pickle is read, and no package is imported that the process has not imported
(output classes are found by module and name among those: structure.py).
Tensors are memory-mapped from the safetensors file, each entry's SHA-256
checked; version 1 files (tensors inline in base64) still load.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from pathlib import Path

import torch

import symshape
from symshape.export import tensorfile
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
from symshape.export.weights import (
    WeightsError,
    dec_layout,
    enc_tensor,
    finish,
    from_file,
    given,
    match_entries,
    plan,
    take,
)

FORMAT = "symshape.ExportedProgram"
VERSION = 2
READS = (1, 2)  # version 1: tensors inline, base64


def _canonical(program: dict) -> bytes:
    return json.dumps(program, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def weights_path(path) -> Path:
    """Where the tensors of the program at ``path`` live: ``model.json`` ->
    ``model.safetensors`` (``program`` -> ``program.safetensors``)."""
    p = Path(path)
    if p.suffix == ".safetensors":
        raise SaveError(
            f"{p}: a program is saved as JSON with its tensors beside it in "
            f"{p.with_suffix('.safetensors').name}. Fix: name the program {p.stem}.json"
        )
    return _sidecar(p)


def _sidecar(path) -> Path:
    return Path(path).with_suffix(".safetensors")


def save(ep: ExportedProgram, path, *, weights: bool = True) -> None:
    wpath = weights_path(path)
    tensors: dict = {}  # key -> tensor, each object once
    keys: dict = {}  # id(tensor) -> key
    names: dict = {}  # key -> the name its entry is given

    def ref(t: torch.Tensor, name: str) -> str:
        key = keys.get(id(t))
        if key is None:
            key = keys[id(t)] = f"t{len(tensors)}"
            tensors[key], names[key] = t, name
        return key

    c = ep.computation
    params = {name: ref(t, name) for name, t in ep.params.items()}
    constants = {"computation": {}, "backward": {}}
    for trace in (c, ep.backward):
        if trace is not None:
            for k, v in trace.constants.items():
                constants[trace.name][k] = ref(_tensor(k, v), f"{trace.name}.{k}")
    entries, data = plan([(k, names[k], t) for k, t in tensors.items()])
    if not weights:  # keep the entries a constant needs; parameters come from load(weights=)
        param_keys = set(params.values())
        kept = {data[k]["entry"] for k in tensors if k not in param_keys}
        entries = [e for e in entries if e.name in kept]
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
        "params": params,
        "constants": constants,
        "tensors": {k: enc_tensor(t, data[k]) for k, t in tensors.items()},
        "weights": None,  # below, once the tensor file is written
    }
    if entries:
        bundle = uuid.uuid4().hex
        meta = {"format": "pt", "symshape.program": bundle}
        digests = tensorfile.write(wpath, entries, meta)
        program["weights"] = {
            "bundle": bundle,
            "entries": {
                e.name: {"dtype": e.code, "shape": list(e.shape), "sha256": digests[e.name]}
                for e in entries
            },
        }
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "sha256": hashlib.sha256(_canonical(program)).hexdigest(),
        "program": program,
    }
    path = os.fspath(path)
    tmp = os.path.join(
        os.path.dirname(path) or ".", f".{os.path.basename(path)}.{uuid.uuid4().hex}"
    )
    try:
        with open(tmp, "w", encoding="ascii") as f:
            json.dump(doc, f, indent=1, ensure_ascii=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _tensor(name: str, v) -> torch.Tensor:
    if not isinstance(v, torch.Tensor):
        raise SaveError(f"cannot save the constant {name}: a {type(v).__name__}, not a tensor")
    return v


def load(path, *, weights=None, verify: bool = True) -> ExportedProgram:
    """Read a program written by ``ExportedProgram.save``. Raises ``FormatError``
    for a file that is not one, was truncated or modified, or needs ops or
    output types this process lacks; ``WeightsError`` when ``weights`` does not
    fit the program."""
    try:
        with open(path, encoding="ascii") as f:
            text = f.read()
    except UnicodeDecodeError as e:
        hint = ""
        if Path(path).suffix == ".safetensors":
            hint = f"; load the program's JSON, {Path(path).with_suffix('.json').name}"
        raise FormatError(
            f"{path}: not a symshape export file (not ASCII JSON: {e}){hint}"
        ) from None
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
    if version not in READS:
        raise FormatError(
            f"{path}: format version {version!r}; this symshape ({symshape.__version__}) reads "
            f"versions {', '.join(map(str, READS))}. Fix: load it with the symshape that wrote it "
            f"({str(doc.get('program', {}).get('symshape', '?'))[:20]}) or a newer one"
        )
    program = doc.get("program")
    digest = hashlib.sha256(_canonical(program)).hexdigest() if isinstance(program, dict) else None
    if digest is None or digest != doc.get("sha256"):
        raise FormatError(
            f"{path}: checksum mismatch: the program was modified or damaged after it was saved "
            f"(stored {str(doc.get('sha256'))[:16]}..., computed {str(digest)[:16]}...)"
        )
    try:
        tensors = _dec_tensors(program, version, path, given(weights), verify)
        return _dec_program(program, tensors)
    except FormatError as e:
        if str(e).startswith((str(path), str(_sidecar(path)))):
            raise
        raise type(e)(f"{path}: {e}") from None
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        raise FormatError(
            f"{path}: malformed program ({type(e).__name__}: {e}); was it written by "
            "ExportedProgram.save?"
        ) from None


def _dec_tensors(p: dict, version: int, path, user, verify: bool) -> dict:
    """The program's tensors by key: parameters from ``user`` when given, the
    rest from the file (inline for version 1, the safetensors file for 2)."""
    descs = p["tensors"]
    if not isinstance(descs, dict):
        raise FormatError("tensors: expected an object")
    out: dict = {}
    if user is not None:
        for name, key in p["params"].items():
            t = take(check_text(name, "parameter"), user, descs[key], "weights")
            if key in out and out[key] is not t:
                raise WeightsError(f"weights: {name!r} and another name were one tensor when saved")
            out[key] = t
        if version == 2:
            _check_ties(descs, out, {k: n for n, k in p["params"].items()})
    rest = [k for k in descs if k not in out]
    if version == 1:
        return out | {k: _dec_tensor_v1(descs[k], f"tensor {k}") for k in rest}
    listed = p["weights"]
    entries = {} if listed is None else listed["entries"]
    params = set(p["params"].values())
    for k in rest:
        d = descs[k].get("data")
        if not isinstance(d, dict) or type(d.get("entry")) is not str:
            raise FormatError(f"tensor {k}: its data must name an entry of the tensor file")
    unsaved = [k for k in rest if descs[k]["data"]["entry"] not in entries]
    if unsaved:
        if any(k not in params for k in unsaved):
            raise FormatError(f"tensor {unsaved[0]}: its bytes are not in the tensor file")
        missing = [n for n, k in p["params"].items() if k in unsaved]
        raise WeightsError(
            f"the program was saved without its weights (save(path, weights=False)): "
            f"{len(missing)} tensors such as {missing[0]!r} are not in the file. Fix: "
            "symshape.load(path, weights=model), or a state dict or .safetensors file"
        )
    if not rest:
        return out
    wpath = _sidecar(path)
    try:
        f = tensorfile.read(wpath)
    except FileNotFoundError:
        raise FormatError(
            f"the tensor file {wpath} is missing: a program's tensors are saved beside it. "
            f"Fix: copy {wpath.name} along with {Path(path).name}, or pass weights="
        ) from None
    bundle = f.metadata.get("symshape.program")
    if bundle != listed["bundle"]:
        raise FormatError(
            f"{wpath} belongs to another save of a program (its id {bundle!r:.40} is not "
            f"{listed['bundle']!r}). Fix: copy the two files of one save together"
        )
    match_entries(f, entries)
    if verify:
        needed = {descs[k]["data"]["entry"] for k in rest}
        f.verify({e: entries[e]["sha256"] for e in sorted(needed)})
    return out | from_file(f, entries, descs, rest, str(path))


def _check_ties(descs: dict, given_tensors: dict, names: dict) -> None:
    """Given tensors that shared memory when saved (tied weights, views) must share it again."""
    seen: dict = {}
    for key, t in given_tensors.items():
        d = descs[key].get("data")
        if not isinstance(d, dict) or "offset" not in d or t.numel() == 0:
            continue
        where = (
            t.untyped_storage().data_ptr() + (t.storage_offset() - d["offset"]) * t.element_size()
        )
        first = seen.setdefault(d["entry"], (key, where))
        if first[1] != where:
            raise WeightsError(
                f"weights: {names[first[0]]!r} and {names[key]!r} shared memory when the program "
                "was saved "
                "(tied weights, or views of one tensor); the tensors given do not. Fix: pass the "
                "exported model's own tensors (weights=model)"
            )


def _dec_program(p: dict, tensors: dict) -> ExportedProgram:
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


def _dec_tensor_v1(j: dict, what: str) -> torch.Tensor:
    """A version 1 tensor: its bytes inline, in base64."""
    dtype, shape, strides = dec_layout(j, what)
    try:
        raw = base64.b64decode(j["data"], validate=True)
    except (ValueError, TypeError) as e:
        raise FormatError(f"{what}: the data is not base64 ({e})") from None
    numel = 1
    for s in shape:
        numel *= s
    if len(raw) != numel * dtype.itemsize:
        raise FormatError(
            f"{what}: {len(raw)} bytes of data, expected {numel * dtype.itemsize} for "
            f"{j['dtype']}{shape}"
        )
    flat = torch.frombuffer(bytearray(raw), dtype=dtype) if numel else torch.empty(0, dtype=dtype)
    t = torch.empty_strided(shape, strides, dtype=dtype)
    t.copy_(flat.reshape(shape))
    device = dec_device(j["device"], what)
    return finish(t if device.type == "cpu" else t.to(device), j)


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


__all__ = ["FORMAT", "VERSION", "load", "save", "weights_path"]
