"""What padded execution knows about a tensor along its padded dimensions.

A tensor's *tags* hold one entry per dimension: ``None`` (not padded: its
physical size is its true size) or a ``PadDim``. A ``PadDim`` lists the true
sizes of the dimension's factors, outermost first: one factor for a plain
padded dimension (valid where the index is below the true size: padding sits
at the end), several for a dimension a reshape made by merging dimensions
(``[B, T] -> [B*T]``: valid where the ``T`` part of the index is below T's
true size). A merge whose only padded factor is the outermost is a plain
padded dimension again (``[T, 4] -> [4*T]``: a prefix of ``4*T``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from symshape.sym import expr as E


def same(a, b) -> bool:
    """Are two sizes the same expression? (Expressions are hash-consed: ``is``.)"""
    return a is b or (type(a) is int and type(b) is int and a == b)


@dataclass(frozen=True, eq=False)
class PadDim:
    factors: tuple  # true sizes (int | Expr), outermost first

    def __eq__(self, other) -> bool:
        return (
            type(other) is PadDim
            and len(self.factors) == len(other.factors)
            and all(same(a, b) for a, b in zip(self.factors, other.factors))
        )

    def __hash__(self) -> int:
        return hash(tuple(f if type(f) is int else id(f) for f in self.factors))

    @property
    def size(self):
        """The dimension's true size, as an expression."""
        r = 1
        for f in self.factors:
            r = E.mul(r, f)
        return r


@dataclass(frozen=True, slots=True)
class PadInt:
    """A size that depends on a padded symbol: its physical and true values."""

    phys: int
    true: int


def sizes(x, phys: bool):
    """``x`` with each ``PadInt`` as its physical (``phys``) or true value."""
    t = type(x)
    if t is PadInt:
        return x.phys if phys else x.true
    if t is tuple:
        return tuple(sizes(y, phys) for y in x)
    if t is list:
        return [sizes(y, phys) for y in x]
    if t is slice:
        return slice(*(sizes(y, phys) for y in (x.start, x.stop, x.step)))
    if t is dict:
        return {k: sizes(y, phys) for k, y in x.items()}
    return x


def merged(factors: list, padded) -> PadDim | None:
    """The tag of a dimension made of ``factors`` (None: nothing padded)."""
    marks = [padded(f) for f in factors]
    if not any(marks):
        return None
    if marks[0] and not any(marks[1:]):  # padding only in the outermost factor: a prefix
        r = 1
        for f in factors:
            r = E.mul(r, f)
        return PadDim((r,))
    return PadDim(tuple(factors))


class Masks:
    """Boolean masks of the valid region, per padded dimension, made once per call."""

    def __init__(self, phys: dict, logical: dict, padded, device_of):
        self.phys, self.logical, self.padded = phys, logical, padded
        self.device_of = device_of
        self._made: dict = {}

    def size(self, e, physical: bool = True) -> int:
        return E.evaluate(e, self.phys if physical else self.logical)

    def dim(self, pd: PadDim, device) -> torch.Tensor:
        """1-d: True where the dimension's index is in the valid region."""
        key = (pd, device)
        m = self._made.get(key)
        if m is None:
            m = None
            for f in pd.factors:
                p = self.size(f)
                if self.padded(f):
                    fm = torch.arange(p, device=device) < self.size(f, physical=False)
                else:
                    fm = torch.ones(p, dtype=torch.bool, device=device)
                m = fm if m is None else (m[:, None] & fm[None, :]).reshape(-1)
            self._made[key] = m
        return m

    def of(self, x: torch.Tensor, tags: tuple, dims) -> torch.Tensor | None:
        """Valid region of ``x`` along ``dims`` (broadcastable to ``x``), or None."""
        out = None
        for d in dims:
            pd = tags[d]
            if pd is None:
                continue
            m = self.dim(pd, x.device)
            shape = [1] * x.dim()
            shape[d] = m.numel()
            m = m.view(shape)
            out = m if out is None else out & m
        return out

    def fill(self, x: torch.Tensor, tags: tuple, dims, value) -> torch.Tensor:
        """``x`` with its padding along ``dims`` set to ``value``."""
        m = self.of(x, tags, dims)
        if m is None:
            return x
        return torch.where(m, x, _scalar(value, x.dtype))


def _scalar(value, dtype: torch.dtype):
    if value in (float("inf"), float("-inf")) and not dtype.is_floating_point:
        if dtype == torch.bool:
            return value > 0
        info = torch.iinfo(dtype)
        return info.max if value > 0 else info.min
    return value


def padded_dims(tags: tuple | None) -> list[int]:
    return [] if tags is None else [d for d, t in enumerate(tags) if t is not None]


def cut(x: torch.Tensor, tags: tuple, masks: Masks) -> torch.Tensor:
    """``x`` at its true sizes: each padded dimension cut to its valid region."""
    for d, pd in enumerate(tags):
        if pd is None:
            continue
        if len(pd.factors) == 1:
            x = x.narrow(d, 0, masks.size(pd.factors[0], physical=False))
            continue
        phys = [masks.size(f) for f in pd.factors]
        x = x.unflatten(d, phys)
        for k, f in enumerate(pd.factors):
            x = x.narrow(d + k, 0, masks.size(f, physical=False))
        x = x.flatten(d, d + len(phys) - 1)
    return x


def pad(x: torch.Tensor, tags: tuple, masks: Masks) -> torch.Tensor:
    """``x`` (at its true sizes) grown to the physical sizes with zeros."""
    target = list(x.shape)
    for d, pd in enumerate(tags):
        if pd is not None:
            if len(pd.factors) != 1:
                raise NotImplementedError("an input dimension merged from several sizes")
            target[d] = masks.size(pd.factors[0])
    if target == list(x.shape):
        return x
    widths: list[int] = []
    for n, t in zip(reversed(x.shape), reversed(target)):
        widths += [0, t - n]
    return torch.nn.functional.pad(x, widths)
