"""tests/test_train.py - examples/train.py on N ranks reaches the weights of
one process on the whole data set, within a bound on rounding.

    PYTHONPATH=python build/bin/baton-run -n 4 /usr/bin/python3 tests/test_train.py

The ranks train with baton; every rank must then hold bitwise the same
weights. Rank 0 trains again with a stand-in communicator of one rank (no
baton at all: its allreduce returns its input) and compares. The two runs
differ only in the order of summation, so the tolerance is the rounding
bound derived in examples/train.c (tolerance_step): the exact gradient step
does not stretch distances when lr <= 2/L, so the distance after S steps is
at most the sum of both runs' per-step rounding errors. NumPy's exp is
allowed 16 ulp here rather than train.c's 8, since its SIMD versions are
less exact than glibc's.
"""
import os
import sys

import numpy as np

import baton

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import train  # noqa: E402 - examples/ is not a package

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print("%s: %s %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


class Alone:
    """One process holding all the data; records what each step averaged."""
    rank, size = 0, 1

    def __init__(self):
        self.steps = []

    def allreduce(self, a, op, out):
        self.steps.append(a.copy())
        return out


def tolerance(x, y, bufs, lr, nranks):
    """Sum over the steps of both runs' rounding bounds (see train.c)."""
    u = np.finfo(np.float64).eps / 2
    gamma = lambda k: k * u / (1 - k * u)  # noqa: E731
    n, width = x.shape
    w, total = np.zeros(width), 0.0
    for buf in bufs:
        g = buf[:-1]
        z = x @ w
        m = np.abs(x * w).sum(axis=1)
        a = np.abs(x).T @ np.abs(1 / (1 + np.exp(-z)) - y)
        e = np.abs(x).T @ (gamma(width + 1) * m / 4 + 16 * u)
        w_new = w - lr * g
        rho = lr * (gamma(n + nranks + 4) * a + e) / n + u * np.abs(lr * g) + u * np.abs(w_new)
        total += 2 * 2 * np.linalg.norm(rho)
        w = w_new
    return total


comm = baton.init()
x, y = train.make_data()
lr = 1.0
w = train.train(comm, x, y, lr=lr, log=lambda s: None)
every = comm.allgather(w.reshape(1, -1))
check("every rank holds the same weights", all(np.array_equal(r, w) for r in every))
if comm.rank == 0:
    alone = Alone()
    w1 = train.train(alone, x, y, lr=lr, log=lambda s: None)
    tol = tolerance(x, y, alone.steps, lr, comm.size)
    dist = np.linalg.norm(w - w1)
    limit = 2 / (np.mean(np.sum(x * x, axis=1)) / 4)
    check("lr %g within 2/L = %.4g, where the bound holds" % (lr, limit), lr <= limit)
    check("|w(%d ranks) - w(1 process)| <= tolerance" % comm.size, dist <= tol,
          "(%.3g vs %.3g)" % (dist, tol))
    first, last = alone.steps[0][-1], alone.steps[-1][-1]
    check("training lowered the loss", last < first, "(%.6f -> %.6f)" % (first, last))
comm.close()
print("rank %d: %d passed, %d failed" % (comm.rank, passed, failed), flush=True)
sys.exit(1 if failed else 0)
