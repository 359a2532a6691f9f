"""Where a saved program's tensors live: laid out in safetensors entries on
save, rebuilt (memory-mapped) or taken from the caller's weights on load.

Saving groups the tensors by the memory they share. Tensors whose bytes
overlap (a tied weight reached twice, a view of a buffer, an expanded tensor)
are stored once, as the region of memory that covers them, and each is a
view of it again on load, with its shape, strides and offset::

    "tensors": {"t0": {"dtype": "float32", "shape": [768, 2304], "strides": [2304, 1], ...,
                       "data": {"entry": "h.0.attn.c_attn.weight", "offset": 0}}}

A tensor alone in its memory is one entry with its own name and shape, so the
file reads as a state dict in any safetensors reader. A tensor with gaps
between its elements (a slice of a larger tensor) is stored packed, row-major
(``"packed": true``), and copied into its strides on load. ``"data": null`` is
a parameter saved without its bytes (``save(path, weights=False)``): ``load``
takes it from ``weights=``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import torch
from torch import nn

from symshape.export import tensorfile
from symshape.export.serialize import DTYPES, FormatError, SaveError, check_int, dec_device


class WeightsError(FormatError):
    """The weights ``symshape.load`` was given (or found) do not fit the program."""


# -- saving ----------------------------------------------------------------------------------


def _extent(t: torch.Tensor) -> int:
    """Elements from the first to one past the last that ``t`` reads."""
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0


def _real_code(dtype: torch.dtype) -> tuple[str, int]:
    """The safetensors code of ``dtype`` and how many of its elements one
    element of ``dtype`` is (complex128: two float64)."""
    if dtype == torch.complex128:
        return "F64", 2
    return tensorfile.CODE_OF[dtype], 1


def check_savable(name: str, t: torch.Tensor) -> None:
    if type(t) not in (torch.Tensor, nn.Parameter) or t.layout is not torch.strided:
        raise SaveError(
            f"cannot save {name}: a {type(t).__name__} with layout {t.layout}; the file holds "
            "dense tensors. Fix: convert it (.to_dense(), or a plain torch.Tensor) before export"
        )
    if t.device.type == "meta":
        raise SaveError(f"cannot save {name}: it is on the meta device and has no data")
    if t.dtype not in DTYPES.values():
        raise SaveError(f"cannot save {name}: dtype {t.dtype}; the file stores {', '.join(DTYPES)}")


def plan(named: list) -> tuple[list, dict]:
    """Lay out ``[(key, name, tensor)]`` in entries; return the entries and,
    per key, its ``data`` descriptor."""
    entries, data, used = [], {}, set()

    def unique(name: str) -> str:
        out, k = name, 1
        while out in used:
            k += 1
            out = f"{name}#{k}"
        used.add(out)
        return out

    groups: dict = {}
    for key, name, t in named:
        check_savable(name, t)
        if t.numel() == 0:  # reads no memory
            code, k = _real_code(t.dtype)
            shape = [*t.shape, 2] if k == 2 else list(t.shape)
            none = torch.empty(0, dtype=torch.uint8)
            entry = tensorfile.Entry(unique(name), code, shape, none, align=t.element_size())
            entries.append(entry)
            data[key] = {"entry": entry.name, "offset": 0}
            continue
        size = t.element_size()
        lo = t.storage_offset() * size
        span = (lo, lo + _extent(t) * size)
        groups.setdefault((t.device, t.untyped_storage().data_ptr()), []).append(
            (span, key, name, t)
        )
    for members in groups.values():
        members.sort(key=lambda m: m[0])
        component = [members[0]]
        hi = members[0][0][1]
        for m in members[1:]:
            if m[0][0] < hi:  # overlaps what came before: one region
                component.append(m)
                hi = max(hi, m[0][1])
            else:
                _lay_out(component, entries, data, unique)
                component, hi = [m], m[0][1]
        _lay_out(component, entries, data, unique)
    return entries, data


def _lay_out(component: list, entries: list, data: dict, unique) -> None:
    ts = [m[3] for m in component]
    (lo, _), key, name, t = component[0]
    hi = max(m[0][1] for m in component)
    if len(ts) == 1 and hi - lo > t.numel() * t.element_size():
        # gaps between its elements: store the elements, not the memory around them
        code, k = _real_code(t.dtype)
        packed = t.detach().contiguous()
        shape = [*t.shape, 2] if k == 2 else list(t.shape)
        raw = packed.view(-1).view(torch.uint8)
        entry = tensorfile.Entry(unique(name), code, shape, raw, align=t.element_size())
        entries.append(entry)
        data[key] = {"entry": entry.name, "packed": True}
        return
    align = max(x.element_size() for x in ts)
    lo -= lo % align
    raw = torch.empty(0, dtype=torch.uint8, device=t.device)
    raw = raw.set_(t.untyped_storage(), lo, (hi - lo,), (1,))
    pad = -(hi - lo) % align
    dtypes = {x.dtype for x in ts}
    if len(dtypes) == 1:
        code, k = _real_code(t.dtype)
        count = (hi - lo + pad) // (t.element_size() // k)
        whole = len(ts) == 1 and t.is_contiguous() and lo == t.storage_offset() * t.element_size()
        shape = ([*t.shape, 2] if k == 2 else list(t.shape)) if whole else [count]
    else:  # one memory seen as several dtypes: raw bytes, each tensor a view of them
        code, shape = "U8", [hi - lo + pad]
    entry = tensorfile.Entry(unique(name), code, shape, raw, pad, align)
    entries.append(entry)
    for (start, _), k_, _, x in component:
        data[k_] = {"entry": entry.name, "offset": (start - lo) // x.element_size()}


def enc_tensor(t: torch.Tensor, data) -> dict:
    return {
        "dtype": next(k for k, d in DTYPES.items() if d == t.dtype),
        "shape": list(t.shape),
        "strides": list(t.stride()),
        "device": str(t.device),
        "requires_grad": t.requires_grad,
        "parameter": isinstance(t, nn.Parameter),
        "data": data,
    }


# -- loading ---------------------------------------------------------------------------------


def dec_layout(j: dict, what: str) -> tuple:
    """``(dtype, shape, strides)`` of a tensor descriptor, checked."""
    if not isinstance(j, dict) or j.get("dtype") not in DTYPES:
        raise FormatError(f"{what}: unknown dtype {j.get('dtype') if isinstance(j, dict) else j!r}")
    shape = [check_int(s, what) for s in j["shape"]]
    strides = [check_int(s, what) for s in j["strides"]]
    if len(strides) != len(shape) or any(s < 0 for s in shape + strides):
        raise FormatError(f"{what}: shape {shape} and strides {strides} do not match")
    return DTYPES[j["dtype"]], shape, strides


def finish(t: torch.Tensor, j: dict) -> torch.Tensor:
    """A loaded tensor as it was saved: a Parameter or not, requiring grad or not."""
    if j.get("parameter"):
        return nn.Parameter(t, requires_grad=bool(j["requires_grad"]))
    grad = bool(j["requires_grad"]) and (t.is_floating_point() or t.is_complex())
    return t.requires_grad_(grad)


def given(weights) -> Mapping | None:
    """The tensors ``load(path, weights=...)`` takes parameters from, by name."""
    if weights is None:
        return None
    if isinstance(weights, nn.Module):
        out = dict(weights.named_parameters(remove_duplicate=False))
        out.update(weights.named_buffers(remove_duplicate=False))  # non-persistent ones too
        return out
    if isinstance(weights, (str, os.PathLike)):
        return _FileWeights(tensorfile.read(weights))
    if isinstance(weights, Mapping):
        return weights
    raise WeightsError(
        f"weights: expected an nn.Module, a mapping from names to tensors (a state dict) or "
        f"the path of a .safetensors file, found a {type(weights).__name__}"
    )


class _FileWeights(Mapping):
    """A foreign safetensors file (a transformers checkpoint) as a mapping of
    memory-mapped tensors."""

    def __init__(self, f: tensorfile.TensorFile):
        self.file = f

    def __getitem__(self, name: str) -> torch.Tensor:
        code, shape, _, _ = self.file.entries[name]
        return self.file.tensor(name, tensorfile.CODES[code]).view(shape)

    def __iter__(self):
        return iter(self.file.entries)

    def __len__(self) -> int:
        return len(self.file.entries)


def take(name: str, weights: Mapping, j: dict, source: str) -> torch.Tensor:
    """``weights[name]`` checked against the descriptor ``j`` it replaces."""
    dtype, shape, strides = dec_layout(j, f"tensor {name}")
    device = dec_device(j["device"], f"tensor {name}")
    want = f"{str(dtype).removeprefix('torch.')}{shape} on {device}"
    if name not in weights:
        near = [k for k in weights if k.endswith(name) or name.endswith(k)][:3]
        raise WeightsError(
            f"{source}: missing {name!r} ({want}), which the program reads"
            + (f"; similar names: {near}" if near else "")
            + ". Fix: pass weights=model (its parameters and all its buffers, non-persistent "
            "ones included) or a mapping that holds it"
        )
    t = weights[name]
    if not isinstance(t, torch.Tensor) or type(t) not in (torch.Tensor, nn.Parameter):
        raise WeightsError(
            f"{source}: {name!r} is a {type(t).__name__}, expected a tensor ({want})"
        )
    found = f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)} on {t.device}"
    if t.dtype != dtype or list(t.shape) != shape or t.device != _same_index(device, t.device):
        raise WeightsError(
            f"{source}: {name!r} is {found}; the program was exported with {want}. Fix: pass "
            "the weights of the model that was exported (or convert this tensor with .to())"
        )
    if t.layout is not torch.strided or any(
        a != b for n, a, b in zip(shape, strides, t.stride()) if n > 1
    ):
        if weights.__class__ is _FileWeights:  # stored row-major: copy into the strides
            return torch.empty_strided(shape, strides, dtype=dtype).copy_(t)
        raise WeightsError(
            f"{source}: {name!r} has strides {list(t.stride())}; the program was exported "
            f"with strides {strides}. Fix: pass a tensor with those strides"
        )
    return t


def _same_index(want: torch.device, have: torch.device) -> torch.device:
    """``cuda`` matches ``cuda:0`` when the descriptor names no index."""
    return have if want.index is None and want.type == have.type else want


def match_entries(f: tensorfile.TensorFile, expected: dict) -> None:
    """The entries of ``f`` are the program's list ``expected``, with the same
    dtypes and shapes."""
    listed, present = set(expected), set(f.entries)
    if listed != present:
        extra, missing = sorted(present - listed), sorted(listed - present)
        raise FormatError(
            f"{f.path}: the tensor file's entries are not the program's"
            + (f"; not in the program: {extra[:5]}" if extra else "")
            + (f"; missing: {missing[:5]}" if missing else "")
            + " (modified, or the weights of another program)"
        )
    for name, e in expected.items():
        code, shape, _, _ = f.entries[name]
        if code != e["dtype"] or shape != e["shape"]:
            raise FormatError(
                f"{f.path}: entry {name!r}: the header says {code}{shape}, the program "
                f"{e['dtype']}{e['shape']} (the header was modified)"
            )


def from_file(f: tensorfile.TensorFile, expected: dict, descs: dict, keys: list, path: str) -> dict:
    """The tensors ``keys`` of the descriptors ``descs``, views of the entries
    of ``f`` (the program's list of entries ``expected``, checked by
    ``match_entries``)."""
    bases: dict = {}
    out = {}
    for key in keys:
        j = descs[key]
        what = f"{path}: tensor {key}"
        dtype, shape, strides = dec_layout(j, what)
        d = j.get("data")
        if not isinstance(d, dict) or d.get("entry") not in expected:
            raise FormatError(f"{what}: its data names no entry of the tensor file")
        device = dec_device(j["device"], what)
        numel = 1
        for s in shape:
            numel *= s
        base = bases.get((d["entry"], dtype, device))
        if base is None:
            base = f.tensor(d["entry"], dtype)
            base = bases[(d["entry"], dtype, device)] = (
                base if device.type == "cpu" else base.to(device)
            )
        if d.get("packed"):
            if base.numel() != numel:
                raise FormatError(f"{what}: entry {d['entry']!r} does not hold {numel} elements")
            t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
            t.copy_(base.view(shape))
        elif numel == 0:
            t = torch.empty_strided(shape, strides, dtype=dtype, device=device)
        else:
            offset = check_int(d.get("offset"), what)
            end = offset + 1 + sum((s - 1) * st for s, st in zip(shape, strides))
            if offset < 0 or end > base.numel():
                raise FormatError(
                    f"{what}: elements [{offset}, {end}) are out of range of entry "
                    f"{d['entry']!r}, which holds {base.numel()} {dtype} elements"
                )
            t = base.as_strided(shape, strides, offset)
        out[key] = finish(t, j)
    return out


__all__ = ["WeightsError", "enc_tensor", "from_file", "given", "match_entries", "plan", "take"]
