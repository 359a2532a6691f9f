"""Our type promotion equals PyTorch's reference implementation, pair by pair."""

import itertools

import pytest
import torch
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND as K
from torch._prims_common import elementwise_dtypes

from symshape.ops._helpers import result_type

DTYPES = (torch.bool, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
          torch.float32, torch.float64, torch.complex64)  # fmt: skip
VALUES = [torch.empty(2, dtype=d) for d in DTYPES]
VALUES += [
    torch.empty((), dtype=d)
    for d in (torch.bool, torch.int64, torch.float16, torch.float64, torch.complex64)
]
VALUES += [True, 2, 2.5, 1j]
KINDS = ("DEFAULT", "INT_TO_FLOAT", "ALWAYS_BOOL", "BOOL_TO_LONG", "COMPLEX_TO_FLOAT")


@pytest.mark.parametrize("kind", KINDS)
def test_pairs_match_torch(kind):
    for a, b in itertools.product(VALUES, VALUES):
        if not (isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)):
            continue
        want = elementwise_dtypes(a, b, type_promotion_kind=getattr(K, kind))[1]
        assert result_type(a, b, kind=kind) == want, (a, b, kind)


def test_three_operands_and_default_dtype():
    a, b = torch.empty(3, dtype=torch.int32), torch.empty((), dtype=torch.float64)
    assert result_type(a, b, 1.5) == elementwise_dtypes(a, b, 1.5, type_promotion_kind=K.DEFAULT)[1]
    torch.set_default_dtype(torch.float64)
    try:
        assert result_type(torch.empty(2, dtype=torch.int64), 0.5) == torch.float64
    finally:
        torch.set_default_dtype(torch.float32)
