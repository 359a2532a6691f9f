"""DistributedDataParallel with symshape, two processes on 127.0.0.1 (gloo):
``DDP(symshape.jit(model))`` and ``symshape.jit(DDP(model))`` each train 3
SGD steps with changing sequence lengths, and every parameter on both ranks
equals eager DDP's. Each rank draws its own batches, so the parameters agree
only if the gradients were all-reduced on every step, not just the traced one.

Slow (process start-up): ``pytest -m slow tests/jit/test_ddp.py``. The test
stops by itself: the process group times out after 60 s, the parent waits at
most ``TIMEOUT`` seconds for the ranks and then kills them.
"""

import datetime
import queue
import socket
import traceback

import pytest
import torch
import torch.multiprocessing as mp

import symshape

WORLD = 2
LENGTHS = (5, 7, 3)  # sequence length of each step
TIMEOUT = 240.0
MODES = ("eager", "ddp_of_jit", "jit_of_ddp")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.lin = torch.nn.Linear(16, 16)
        self.out = torch.nn.Linear(16, 50)

    def forward(self, ids):
        h = torch.tanh(self.lin(self.norm(self.emb(ids))))
        return self.out(h).log_softmax(-1).mean(1)


def _train(mode: str, rank: int) -> list:
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)  # the same initial weights on both ranks and in every mode
    model = Net()
    if mode == "eager":
        run = DDP(model)
    elif mode == "ddp_of_jit":
        run = DDP(symshape.jit(model, dynamic=True))
    else:
        run = symshape.jit(DDP(model), dynamic=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for step, length in enumerate(LENGTHS):
        gen = torch.Generator().manual_seed(1000 * rank + step)  # each rank its own data
        ids = torch.randint(0, 50, (3, length), generator=gen)
        target = torch.randint(0, 50, (3,), generator=gen)
        opt.zero_grad()
        loss = torch.nn.functional.nll_loss(run(ids), target)
        loss.backward()
        opt.step()
    if mode != "eager":
        jitted = run if mode == "jit_of_ddp" else run.module
        assert len(jitted.traces()) == 1, jitted.stats.recompile_reasons
    return [p.detach().flatten().tolist() for p in model.parameters()]


def _refuses_ddp_inside_a_trace() -> str:
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(Net())
    try:
        symshape.jit(lambda ids: ddp(ids) * 2, dynamic=True)(torch.randint(0, 50, (2, 4)))
    except symshape.TracingError as e:
        return str(e)
    return ""


def _worker(rank: int, port: int, results) -> None:
    import torch.distributed as dist

    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=WORLD,
            timeout=datetime.timedelta(seconds=60),
        )
        out = {mode: _train(mode, rank) for mode in MODES}
        out["refusal"] = _refuses_ddp_inside_a_trace()
        results.put((rank, out, None))
    except Exception:
        results.put((rank, None, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_ddp_trains_like_eager_ddp():
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_worker, args=(r, port, results), daemon=True) for r in range(WORLD)
    ]
    for p in procs:
        p.start()
    got = {}
    try:
        for _ in procs:
            rank, out, error = results.get(timeout=TIMEOUT)
            assert error is None, f"rank {rank} failed:\n{error}"
            got[rank] = out
    except queue.Empty:
        pytest.fail(f"the ranks did not finish within {TIMEOUT:.0f} s")
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
    for rank in range(WORLD):
        want = got[rank]["eager"]
        assert want == got[0]["eager"], "eager DDP's ranks disagree: the test is broken"
        for mode in MODES[1:]:
            for i, (a, b) in enumerate(zip(got[rank][mode], want)):
                torch.testing.assert_close(
                    torch.tensor(a),
                    torch.tensor(b),
                    rtol=1e-6,
                    atol=1e-6,
                    msg=lambda m, r=rank, mode=mode, i=i: f"rank {r} {mode}: parameter {i}: {m}",
                )
        assert (
            "DistributedDataParallel's forward is called from traced code" in (got[rank]["refusal"])
        )
