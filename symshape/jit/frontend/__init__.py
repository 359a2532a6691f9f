"""The jit's front end: the entry point and the tracer's main path.

``symshape.jit`` itself (``api``), the dynamism policy (``policy``), the trace cache
and its limit (``cache_limit``), tracing one call (``tracer``), how a jit function
meets the rest of Python (``wrapping``, ``ddp``), what it tells the user
(``stats``, ``explain``), Python's ``random`` drawn per call (``draws``), and
``symshape.vjp`` (``vjp``).
"""
