"""Bucket policies: the size a padded dimension runs at for each true size.

``"pow2"``: the next power of two (1, 2, 4, ... up to the dimension's bound);
a list of sizes: the smallest that holds the true size; an int ``k``: the next
multiple of ``k``. A size above the largest bucket runs unpadded, at its own
size (exact; a static back end compiles it on its own).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from symshape.sym import expr as E


@dataclass(frozen=True)
class Buckets:
    """How one padded dimension is bucketed: ``kind`` is ``"pow2"``,
    ``"multiple"`` (of ``step``) or ``"list"`` (``sizes``); ``max`` bounds it."""

    kind: str
    sizes: tuple = ()
    step: int = 1
    max: int | None = None

    @staticmethod
    def parse(spec, where: str = "pad") -> Buckets:
        if isinstance(spec, Buckets):
            return spec
        if spec == "pow2":
            return Buckets("pow2")
        if isinstance(spec, int) and not isinstance(spec, bool) and spec >= 1:
            return Buckets("multiple", step=spec)
        if (
            isinstance(spec, (list, tuple))
            and spec
            and all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in spec)
        ):
            sizes = tuple(sorted(set(spec)))
            return Buckets("list", sizes=sizes, max=sizes[-1])
        raise TypeError(
            f"{where}: a padded dimension takes 'pow2', a bucket size multiple k (int >= 1) "
            f"or a list of bucket sizes (ints >= 1), found {spec!r}"
        )

    def bounded(self, max_: int | None) -> Buckets:
        """These buckets under a dimension's declared bound (``Dim(max=...)``)."""
        if max_ is None:
            return self
        if self.kind == "list":
            return self
        m = max_ if self.max is None else min(self.max, max_)
        return Buckets(self.kind, self.sizes, self.step, m)

    def bucket(self, n: int) -> int | None:
        """The padded size for true size ``n``; None: above every bucket."""
        if self.kind == "list":
            i = bisect.bisect_left(self.sizes, n)
            return self.sizes[i] if i < len(self.sizes) else None
        if self.kind == "pow2":
            b = 1 << max(n - 1, 0).bit_length()
        else:
            b = -(-max(n, 1) // self.step) * self.step
        if self.max is not None and b > self.max:
            return self.max if n <= self.max else None
        return b

    def all(self, lo: int = 1) -> list[int]:
        """Every bucket a size in ``[lo, max]`` can land in (for a bound)."""
        if self.kind == "list":
            return list(self.sizes)
        if self.max is None:
            raise ValueError("unbounded buckets: give the dimension a max")
        return sorted({self.bucket(n) for n in range(max(lo, 1), self.max + 1)})


@dataclass(frozen=True)
class PadPlan:
    """Which symbols of a trace are padded, and how: ``{Symbol: Buckets}``."""

    buckets: dict

    @property
    def symbols(self) -> frozenset:
        return frozenset(self.buckets)

    def physical(self, logical: dict) -> dict | None:
        """Sizes to run at for the true sizes ``logical`` (``{Symbol: int}``);
        None when a size is above its largest bucket (run unpadded)."""
        out = dict(logical)
        for s, b in self.buckets.items():
            n = logical.get(s)
            if n is None:
                continue
            p = b.bucket(n)
            if p is None:
                return None
            out[s] = p
        return out

    @staticmethod
    def of(env, buckets: dict) -> PadPlan:
        """The plan padding ``buckets``' symbols, and every symbol ``env`` knows
        equal to one (``s3`` replaced by ``s1``: the same length, padded alike)."""
        out = dict(buckets)
        for info in env.symbols:
            s = info.symbol
            r = env.simplify(s)
            for k, b in buckets.items():
                if r is k and s is not k:
                    out[s] = b
        return PadPlan(out)

    def padded(self, e) -> bool:
        """Does the size expression ``e`` depend on a padded symbol?"""
        return bool(E.free_symbols(e) & self.symbols) if type(e) is not int else False
