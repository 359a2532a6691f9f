"""``generate()`` through ``model.forward = symshape.jit(model.forward,
dynamic=True)``: the KV cache (a ``DynamicCache`` or ``EncoderDecoderCache``
that the forward updates in place) is passed in, mutated and returned by every
call, and the trace must replay those writes on the caller's objects.

For each tiny model of tests/models/generative.py: greedy decoding (and beam
search for GPT-2 and T5) gives eager's tokens exactly, and the final cache it
returns is eager's (as below); from at most 3 traces over the first generate()
(prefill, decoding, one spare; Mistral's sliding window of 8 makes its own code
branch twice more on the cache length: 4), none more over a second generate()
with another batch and prompt length, and no call falling back to eager. Then a
hand-written greedy loop that passes ONE cache object to every call: tokens,
and afterwards every tensor and int in the caller's cache, are eager's (exact
types, no symshape objects left; float values within 1e-5: while tracing,
``torch.compiler.is_compiling()`` is True and transformers builds explicit
attention masks where eager skips them, which rounds differently).

GPT-2 and T5 run in CI; the other seven are ``slow`` (``pytest -m slow``).
"""

from __future__ import annotations

import copy

import pytest
import torch
from state_check import assert_like, find_symshape

import symshape
from tests.models.generative import BOS, GEN

NEW = 16  # tokens each generate() makes
# (batch, prompt length) of the two generate() calls; both prompts shorter than
# mistral_window8's sliding window (8), so its second generate() takes the first one's branches
FIRST, SECOND = (2, 5), (3, 7)
FAST = ("gpt2", "t5")


def _params(names):
    return [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in names]


def _generate(model, name, shape, **extra):
    kwargs = GEN[name].inputs(*shape)
    with torch.no_grad():
        return model.generate(
            **kwargs, max_new_tokens=NEW, do_sample=False, return_dict_in_generate=True, **extra
        )


def _reasons(jf) -> str:
    return f"stats {jf.stats}"


def _same_output(got, want, where):
    """The tokens exactly, and the final cache generate() returns within 1e-5 (see above),
    with eager's types throughout and no symshape object in it."""
    assert type(got.sequences) is torch.Tensor
    assert torch.equal(got.sequences, want.sequences), (
        f"{where}: tokens\n{got.sequences}\neager:\n{want.sequences}"
    )
    left = find_symshape(got, "output")
    assert not left, f"{where}: symshape objects in generate()'s output: {left}"
    assert_like(got.cache, want.cache, f"{where}: returned cache", atol=1e-5, rtol=1e-5)


def _check_generate(name, **extra):
    model = GEN[name].build()
    want = [_generate(model, name, s, **extra) for s in (FIRST, SECOND)]
    model.forward = symshape.jit(model.forward, dynamic=True)
    jf = model.forward
    _same_output(_generate(model, name, FIRST, **extra), want[0], f"{name}: first generate()")
    first, limit = jf.stats.compiles, GEN[name].traces
    assert 1 <= first <= limit, (
        f"{name}: {first} traces over the first generate() (at most {limit}"
        f"{': ' + GEN[name].why if GEN[name].why else ''}): {_reasons(jf)}"
    )
    _same_output(_generate(model, name, SECOND, **extra), want[1], f"{name}: second generate()")
    assert jf.stats.compiles == first, (
        f"{name}: the second generate() (batch {SECOND[0]}, prompt {SECOND[1]}) traced "
        f"{jf.stats.compiles - first} more: {_reasons(jf)}"
    )
    assert jf.stats.eager_calls == 0, f"{name}: calls ran eagerly: {_reasons(jf)}"
    return jf


@pytest.mark.parametrize("name", _params(GEN))
def test_greedy_generate_matches_eager(name):
    _check_generate(name)


@pytest.mark.parametrize("name", FAST)
def test_beam_search_matches_eager(name):
    _check_generate(name, num_beams=2)


# -- one cache object, reused by a hand-written loop ------------------------------------------


def _cache(name, model):
    from transformers import DynamicCache, EncoderDecoderCache

    if GEN[name].seq2seq:
        return EncoderDecoderCache(DynamicCache(), DynamicCache())
    return DynamicCache(config=model.config)


def _greedy_loop(fn, name, cache, prompt, steps: int = 8):
    """``steps`` greedy tokens, feeding only the newest token after the prompt;
    returns the tokens [batch, steps]."""
    seq2seq = GEN[name].seq2seq
    ids = prompt["input_ids"]
    if seq2seq:
        step = {"input_ids": ids, "decoder_input_ids": torch.full((ids.shape[0], 1), BOS)}
    else:
        step = {"input_ids": ids}
    tokens = []
    for i in range(steps):
        with torch.no_grad():
            out = fn(**step, cache=cache, use_cache=True)
        assert out.cache is cache, f"step {i}: the output's cache is not the caller's object"
        assert type(out.logits) is torch.Tensor
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(nxt)
        if seq2seq:
            step = {"input_ids": ids, "decoder_input_ids": nxt}
        else:
            step = {"input_ids": nxt}
    return torch.cat(tokens, 1)


@pytest.mark.parametrize(
    "name", ["llama", "t5", pytest.param("mistral_window8", marks=pytest.mark.slow)]
)
def test_one_cache_object_reused_by_a_loop(name):
    model = GEN[name].build()
    eager = copy.deepcopy(model)
    jm = symshape.jit(model, dynamic=True)
    for shape in (FIRST, SECOND):  # a fresh cache per prompt, one object for all its steps
        prompt = GEN[name].inputs(*shape)
        ce, cj = _cache(name, eager), _cache(name, model)
        want = _greedy_loop(eager, name, ce, prompt)
        got = _greedy_loop(jm, name, cj, prompt)
        assert torch.equal(got, want), f"{name} {shape}: tokens\n{got}\neager:\n{want}"
        left = find_symshape(cj, "cache")
        assert not left, f"{name} {shape}: symshape objects in the caller's cache: {left}"
        # not bitwise: while tracing, torch.compiler.is_compiling() is True and transformers
        # builds explicit masks where eager skips them (mistral: ~2e-6 from step 4 on,
        # growing through its sliding window's steps to 1.4e-5 on values near 5)
        assert_like(cj, ce, f"{name} {shape}: cache", atol=3e-5, rtol=1e-4)
    assert jm.stats.eager_calls == 0, _reasons(jm)
    # prefill, decoding, one spare (mistral: its window's branches); none more for the second
    # prompt (another batch and length)
    assert jm.stats.compiles <= GEN[name].traces, _reasons(jm)
