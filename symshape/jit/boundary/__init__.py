"""Python state in and out of a trace.

Objects the traced code writes into, replayed after every call (``writes``); the
user's output structure, flattened and rebuilt (``outputs``); autograd attributes
of tensor inputs the traced code read (``input_autograd``); and ``torch.Generator``
arguments, inputs of the trace (``generators``).
"""
