"""What runs a trace's computation besides its own Python.

A compiler back end, once per shape family, with its assumptions checked on every
call (``compiled``); size-oblivious view strides while it compiles (``oblivious``);
and CUDA graphs, ``mode="reduce-overhead"`` (``cudagraphs``).
"""
