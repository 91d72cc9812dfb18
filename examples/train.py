"""Data-parallel logistic regression with baton and NumPy.

    PYTHONPATH=python build/bin/baton-run -n 4 /usr/bin/python3 examples/train.py

Every rank makes the same synthetic data set (a seeded generator), keeps its
shard of the rows, computes the gradient on it and averages the gradients of
all ranks with one allreduce per step, so all ranks hold the same weights.
"""
import numpy as np

import baton


def make_data(n=20000, d=16, seed=0):
    rng = np.random.default_rng(seed)
    x = np.hstack([rng.uniform(-1, 1, (n, d)), np.ones((n, 1))])  # last column: bias
    y = (x @ rng.uniform(-2, 2, d + 1) + 0.5 * rng.uniform(-1, 1, n) > 0).astype(np.float64)
    return x, y


def train(comm, x, y, steps=100, lr=1.0, log=print):
    n = len(x)
    lo, hi = n * comm.rank // comm.size, n * (comm.rank + 1) // comm.size
    xs, ys = x[lo:hi], y[lo:hi]  # this rank's shard
    w = np.zeros(x.shape[1])
    buf = np.empty(len(w) + 1)  # the gradient, then the loss: one allreduce a step
    for step in range(steps):
        z = xs @ w
        buf[:-1] = xs.T @ (1 / (1 + np.exp(-z)) - ys)
        buf[-1] = np.sum(np.logaddexp(0, z) - ys * z)
        # Scaled by size/n, the average over the ranks is the mean over all n
        # samples, even when the shards differ in size.
        buf *= comm.size / n
        comm.allreduce(buf, op="avg", out=buf)
        w -= lr * buf[:-1]
        if comm.rank == 0 and (step % 10 == 0 or step == steps - 1):
            log("step %4d  loss %.6f" % (step, buf[-1]))
    return w


if __name__ == "__main__":
    comm = baton.init()
    x, y = make_data()
    w = train(comm, x, y)
    if comm.rank == 0:
        print("%d ranks; weights:" % comm.size, np.array2string(w, precision=4))
        print("training accuracy %.4f" % np.mean((x @ w > 0) == (y > 0)))
    comm.close()
