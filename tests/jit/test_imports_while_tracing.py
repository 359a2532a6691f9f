"""A module imported for the first time by traced code runs its top level outside
the trace (``trace/imports.py``): what it binds at import is the real ``type``,
``id``, ``print`` and ``torch.compile``, a tensor it makes is a tensor, and what
it registers elsewhere stays registered. TorchDynamo imported inside a trace had
kept the tracer's ``type`` in its tables, and eager ``flex_attention`` failed on
every later call."""

import builtins
import subprocess
import sys
import textwrap

import torch

import symshape

_REGISTRY: dict = {}


def test_a_module_first_imported_inside_a_trace_sees_no_trace(tmp_path, monkeypatch):
    (tmp_path / "fresh_module_for_symshape.py").write_text(
        textwrap.dedent(
            f"""
            import builtins, torch
            import {__name__} as registry_home
            SEEN = (builtins.type, builtins.id, builtins.print, torch.compile)
            TABLE = torch.arange(3) * 2
            registry_home._REGISTRY["fresh"] = TABLE
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("fresh_module_for_symshape", None)

    def fn(x):
        import fresh_module_for_symshape as m

        return x + m.TABLE

    jf = symshape.jit(fn, fullgraph=True)
    for n in (3, 3):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), fn(x))
    m = sys.modules["fresh_module_for_symshape"]
    assert (builtins.type, builtins.id, builtins.print, torch.compile) == m.SEEN
    assert type(m.TABLE) is torch.Tensor and torch.equal(m.TABLE, torch.tensor([0, 2, 4]))
    assert _REGISTRY["fresh"] is m.TABLE  # the import's write stays, not replayed


_FLEX_AFTER_A_TRACE = """
import torch, symshape
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

def causal(b, h, q, kv):
    return kv <= q

def fn(x):  # the first import of TorchDynamo happens inside this trace
    bm = create_block_mask(causal, B=None, H=None, Q_LEN=x.shape[2], KV_LEN=x.shape[2],
                           device="cpu", _compile=False)
    return x + 1, bm

x = torch.randn(1, 1, 16, 8)
symshape.jit(fn)(x)
bm = create_block_mask(causal, B=None, H=None, Q_LEN=16, KV_LEN=16, device="cpu", _compile=False)
flex_attention(x, x, x, block_mask=bm)  # eager: TorchDynamo inside
print("ok")
"""


def test_eager_flex_attention_after_a_trace_imported_dynamo():
    r = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _FLEX_AFTER_A_TRACE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]
