"""The main demo (placeholder until the tracer lands): the symbolic engine."""

from symshape.sym import ShapeEnv

env = ShapeEnv()
batch = env.symbol("batch", hint=8, min=1, source="x.size(0)")
seq = env.symbol("seq", hint=128, min=1, source="x.size(1)")
heads = 12
print("flattened tokens:", batch * seq)
print("head split:", (768 * seq) // heads, " ceil(seq/64):", (seq + 63) // 64)
print("known(batch*seq >= seq):", env.known(batch * seq >= seq))
print("guard(seq % 64 == 0):", env.guard(seq % 64 == 0))
print("after it, known((seq // 64) * 64 == seq):", env.known((seq // 64) * 64 == seq))
print("guards:", [g.text(env._label) for g in env.guards])
print(env.guard_function().source)
