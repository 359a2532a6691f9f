"""A safetensors file, written and read without copying tensor bytes.

    8 bytes    N, the header's length (little-endian unsigned)
    N bytes    JSON: {"__metadata__": {str: str},
                      name: {"dtype": "F32", "shape": [768, 768], "data_offsets": [b, e]}, ...}
    the rest   the entries' bytes, ``data_offsets`` relative to the end of the header

(https://github.com/huggingface/safetensors, "Format"). ``write`` sorts the
entries by alignment, largest first, and pads the header to 8 bytes, so every
entry starts at a multiple of its element size and maps straight to a tensor;
it streams each entry from the tensor's own memory, hashing (SHA-256) each
chunk as it writes it: one pass over the bytes. ``read`` checks the header
the way the safetensors library does (known dtypes, sizes that match the
offsets, entries that tile the data with no hole, overlap or missing byte)
and memory-maps the file copy-on-write: loading reads no tensor byte until it
is used (or verified: ``TensorFile.verify`` hashes entries on worker threads),
and writes to a loaded tensor stay in the process.

Nothing in the file is executed: the header is JSON, the rest is bytes.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import hashlib
import json
import mmap
import os
import struct
import uuid
from dataclasses import dataclass

import torch

from symshape.export.serialize import FormatError

# safetensors' dtype codes (complex128 has none: it is stored as float64 pairs)
CODES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "C64": torch.complex64,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
}
CODE_OF = {d: c for c, d in CODES.items()}
MAX_HEADER = 100 * 1024 * 1024  # as the safetensors library
CHUNK = 4 << 20


@dataclass
class Entry:
    """One tensor of the file: ``data`` is a tensor whose bytes are written
    (a uint8 view of a storage region, or a contiguous tensor), then ``pad``
    zero bytes."""

    name: str
    code: str
    shape: list
    data: torch.Tensor
    pad: int = 0
    align: int = 1

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size() + self.pad


def _bytes_of(t: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy."""
    n = t.numel() * t.element_size()
    if n == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_char * n).from_address(t.data_ptr())).cast("B")


def _digest(views) -> str:
    h = hashlib.sha256()
    for v in views:
        h.update(v)
    return h.hexdigest()


def _pool(n: int) -> concurrent.futures.ThreadPoolExecutor:
    # hashlib releases the GIL on large buffers: one thread per core
    return concurrent.futures.ThreadPoolExecutor(max(1, min(n, os.cpu_count() or 1, 8)))


def write(path: os.PathLike, entries: list, metadata: dict) -> dict:
    """Write ``entries`` to ``path`` (replaced atomically, so programs that
    memory-map the old file keep their bytes); return ``{name: sha256 hex}``."""
    order = sorted(entries, key=lambda e: -e.align)  # stable: saving order within an alignment
    header: dict = {"__metadata__": dict(metadata)}
    at = 0
    for e in order:
        header[e.name] = {
            "dtype": e.code,
            "shape": list(e.shape),
            "data_offsets": [at, at + e.nbytes],
        }
        at += e.nbytes
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    text += b" " * (-len(text) % 8)
    path = os.fspath(path)
    tmp = os.path.join(
        os.path.dirname(path) or ".", f".{os.path.basename(path)}.{uuid.uuid4().hex}"
    )
    digests = {}
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for e in order:
                data = e.data if e.data.device.type == "cpu" else e.data.cpu()  # one at a time
                v = _bytes_of(data)
                h = hashlib.sha256()
                for i in range(0, len(v), CHUNK):  # hash each chunk while it is in cache
                    chunk = v[i : i + CHUNK]
                    h.update(chunk)
                    f.write(chunk)
                h.update(bytes(e.pad))
                f.write(bytes(e.pad))
                digests[e.name] = h.hexdigest()
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return digests


@dataclass
class TensorFile:
    """A safetensors file read by ``read``: its metadata, its entries as
    ``{name: (code, shape, start, end)}`` (absolute file offsets), and the map."""

    path: str
    metadata: dict
    entries: dict
    map: mmap.mmap | None

    def tensor(self, name: str, dtype: torch.dtype) -> torch.Tensor:
        """Entry ``name``'s bytes as a flat tensor of ``dtype``, sharing the map."""
        _, _, start, end = self.entries[name]
        size = dtype.itemsize
        if (end - start) % size:
            raise FormatError(
                f"{self.path}: entry {name!r} holds {end - start} bytes, not a whole number of "
                f"{dtype} elements"
            )
        if end == start:
            return torch.empty(0, dtype=dtype)
        t = torch.frombuffer(self.map, dtype=dtype, count=(end - start) // size, offset=start)
        return t if start % size == 0 else t.clone()  # a misaligned entry of a foreign file

    def verify(self, expected: dict) -> None:
        """Check each ``{name: sha256 hex}`` against the bytes (on worker threads)."""
        view = memoryview(self.map) if self.map is not None else memoryview(b"")
        try:
            names = list(expected)
            with _pool(len(names)) as pool:
                spans = [self.entries[n][2:] for n in names]
                got = list(pool.map(lambda s: _digest((view[s[0] : s[1]],)), spans))
        finally:
            view.release()
        for name, digest in zip(names, got):
            if digest != expected[name]:
                raise FormatError(
                    f"{self.path}: checksum mismatch in {name!r}: its bytes were modified or "
                    f"damaged after saving (stored sha256 {expected[name][:16]}..., computed "
                    f"{digest[:16]}...). Fix: save the program again, or restore the file"
                )


def read(path: os.PathLike) -> TensorFile:
    """Parse and check the header of the safetensors file ``path``; map its data."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise FormatError(f"{path}: {size} bytes: too short for a safetensors file (truncated)")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER, size - 8):
            raise FormatError(
                f"{path}: the header claims {n} bytes but the file holds {size - 8} after the length "
                "(truncated, or not a safetensors file)"
            )
        raw = f.read(n)
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) if size > 0 else None
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: the safetensors header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: the safetensors header is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        type(k) is str and type(v) is str for k, v in metadata.items()
    ):
        raise FormatError(f"{path}: __metadata__ must map strings to strings")
    base = 8 + n
    entries = {name: _entry(path, name, j, base) for name, j in header.items()}
    at = base
    for name, (_, _, start, end) in sorted(entries.items(), key=lambda kv: kv[1][2:]):
        if start != at:
            what = (
                "overlaps the previous entry"
                if start < at
                else f"leaves a hole of {start - at} bytes"
            )
            raise FormatError(f"{path}: entry {name!r} {what} (offsets must tile the data)")
        at = end
    if at != size:
        raise FormatError(
            f"{path}: the header describes {at - base} bytes of tensor data, the file holds "
            f"{size - base}" + (" (truncated)" if at > size else " (extra bytes at the end)")
        )
    return TensorFile(path, metadata, entries, m)


def _entry(path: str, name: str, j, base: int) -> tuple:
    what = f"{path}: entry {name!r}"
    if not isinstance(j, dict) or set(j) != {"dtype", "shape", "data_offsets"}:
        raise FormatError(f"{what}: expected dtype, shape and data_offsets, found {j!r:.80}")
    code, shape, offsets = j["dtype"], j["shape"], j["data_offsets"]
    if code not in CODES:
        raise FormatError(f"{what}: unknown dtype {code!r}; expected one of {', '.join(CODES)}")
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise FormatError(
            f"{what}: the shape must be a list of non-negative ints, found {shape!r:.80}"
        )
    ok = isinstance(offsets, list) and len(offsets) == 2
    if not ok or not all(type(o) is int for o in offsets) or not 0 <= offsets[0] <= offsets[1]:
        raise FormatError(f"{what}: data_offsets must be [begin, end] with 0 <= begin <= end")
    numel = 1
    for s in shape:
        numel *= s
    expected = numel * CODES[code].itemsize
    if offsets[1] - offsets[0] != expected:
        raise FormatError(
            f"{what}: data_offsets {offsets} span {offsets[1] - offsets[0]} bytes; {code}{shape} "
            f"needs {expected}"
        )
    return code, shape, base + offsets[0], base + offsets[1]


__all__ = ["CODES", "CODE_OF", "Entry", "TensorFile", "read", "write"]
