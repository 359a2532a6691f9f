"""``python -m symshape.conformance``: the OpInfo sweep, with a progress line
on stderr, the summary lines on stdout and a Markdown report (``--out``)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import torch


def _progress(i: int, n: int, name: str, t0: float, tty: bool) -> None:
    width = 30
    done = int(width * i / max(n, 1))
    line = f"[{'#' * done}{'.' * (width - done)}] {i}/{n} {time.monotonic() - t0:5.0f}s {name}"
    if tty:
        sys.stderr.write("\r" + line[:100].ljust(100))
        if i == n:
            sys.stderr.write("\n")
    elif i == n or i % 25 == 0:
        sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symshape.conformance", description=__doc__)
    p.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant)")
    p.add_argument("--limit", type=int, help="sweep only the first N selected OpInfos")
    p.add_argument("--sample", type=int, help="a seeded random sample of N OpInfos")
    p.add_argument("--seed", type=int, default=0, help="seed of --sample (default 0)")
    p.add_argument(
        "--budget",
        type=float,
        default=30.0,
        help="seconds per OpInfo, for each of the constant and dynamic-scalar runs (default 30)",
    )
    p.add_argument("--no-backward", action="store_true", help="forward columns only")
    p.add_argument(
        "--scalars",
        choices=("both", "constant", "dynamic"),
        default="both",
        help="int/float arguments traced as constants, as dynamic arguments of the traced "
        "function, or both columns (default both)",
    )
    p.add_argument("--out", default="reports/conformance.md", help="the Markdown report")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    a = p.parse_args(argv)

    from symshape.conformance import (
        check_op,
        columns_run,
        load_op_db,
        markdown,
        select,
        summary_line,
    )

    torch.set_num_threads(a.threads)
    logging.getLogger("symshape").setLevel(logging.WARNING)
    names = [n.strip() for n in a.ops.split(",") if n.strip()] if a.ops else None
    ops = select(load_op_db(), names, a.limit, a.sample, a.seed)
    t0 = time.monotonic()
    tty = sys.stderr.isatty()
    results = []
    for i, op in enumerate(ops):
        _progress(i, len(ops), op.name, t0, tty)
        results.append(check_op(op, budget=a.budget, backward=not a.no_backward, scalars=a.scalars))
    _progress(len(ops), len(ops), "done", t0, tty)
    seconds = time.monotonic() - t0
    cmd = "python -m symshape.conformance " + " ".join(argv if argv is not None else sys.argv[1:])
    header = f"`{cmd.strip()}` with torch {torch.__version__}, {torch.get_num_threads()} thread(s)."
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            f.write(markdown(results, header, seconds))
    for column, _ in columns_run(results):
        print(summary_line(results, column))
    print(f"{len(results)} OpInfos in {seconds:.0f} s" + (f"; report: {a.out}" if a.out else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
