"""Gradient bucketing, as PyTorch's DistributedDataParallel does it.

    PYTHONPATH=python build/bin/baton-run -n 4 /usr/bin/python3 examples/bucketing.py [--bucket-kib K] [--iters I]

A model's gradients are many small tensors: weights, biases and norm
parameters, layer after layer. Averaging them with one allreduce each pays
the fixed cost of a collective (a rendezvous with every rank, plus the
Python call) once per tensor. Bucketing packs consecutive tensors into one
flat buffer of up to K KiB, averages the buffer with one allreduce and
copies the results back: the fixed cost is paid once per bucket, at the
price of two copies. Like DDP, buckets fill in reverse order of the
parameters, the order in which backpropagation produces their gradients.

The example times both ways on the same gradients and checks that they give
the same numbers (the gradients hold small integers, so each average is one
rounding of an exact sum, whatever the order of the summation).
"""
import argparse
import time

import numpy as np

import baton


def make_gradients(rank, layers=48, width=64):
    """A made-up stack of layers: per layer a width x width weight, a bias
    and a norm's scale and shift; most tensors are a few hundred bytes."""
    rng = np.random.default_rng(rank)
    shapes = [(width, width), (width,), (width,), (width,)] * layers
    return [rng.integers(-8, 8, shape).astype(np.float32) for shape in shapes]


def make_buckets(grads, cap_bytes):
    """[(tensors, flat buffer)], filled from the last parameter backwards."""
    buckets, current, nbytes = [], [], 0
    for g in reversed(grads):
        if current and nbytes + g.nbytes > cap_bytes:
            buckets.append(current)
            current, nbytes = [], 0
        current.append(g)
        nbytes += g.nbytes
    buckets.append(current)
    return [(ts, np.empty(sum(t.size for t in ts), np.float32)) for ts in buckets]


def average_each(comm, grads):
    for g in grads:
        comm.allreduce(g, op="avg", out=g)


def average_bucketed(comm, buckets):
    for tensors, flat in buckets:
        np.concatenate([t.reshape(-1) for t in tensors], out=flat)
        comm.allreduce(flat, op="avg", out=flat)
        offset = 0
        for t in tensors:
            t.reshape(-1)[:] = flat[offset:offset + t.size]
            offset += t.size


def time_steps(comm, iters, grads, work, step):
    """Mean seconds of step() over iters, the slowest rank's. Each iteration
    starts from the same gradients, copied into `work` (the tensors that the
    buckets refer to) before the clock starts."""
    total = 0.0
    for _ in range(iters):
        for w, g in zip(work, grads):
            w[...] = g
        comm.barrier()
        t0 = time.perf_counter()
        step()
        total += time.perf_counter() - t0
    return comm.allreduce(np.array([total / iters]), op="max")[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bucket-kib", type=int, default=256)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    comm = baton.init()
    grads = make_gradients(comm.rank)
    nbytes = sum(g.nbytes for g in grads)
    # As in DDP, the buckets are laid out once and reused every step.
    each = [g.copy() for g in grads]
    bucketed = [g.copy() for g in grads]
    buckets = make_buckets(bucketed, args.bucket_kib * 1024)

    t_each = time_steps(comm, args.iters, grads, each, lambda: average_each(comm, each))
    t_bucket = time_steps(comm, args.iters, grads, bucketed,
                          lambda: average_bucketed(comm, buckets))
    same = all(np.array_equal(a, b) for a, b in zip(each, bucketed))
    if comm.rank == 0:
        print("%d ranks, %d gradient tensors, %.2f MiB of float32" %
              (comm.size, len(grads), nbytes / 2**20))
        print("one allreduce per tensor: %4d calls  %8.2f ms per step" %
              (len(grads), t_each * 1e3))
        print("buckets of <= %d KiB:     %4d calls  %8.2f ms per step (copies included)" %
              (args.bucket_kib, len(buckets), t_bucket * 1e3))
        print("bucketing saves %.2f ms per step (%.0f%%); results %s" %
              ((t_each - t_bucket) * 1e3, 100 * (1 - t_bucket / t_each),
               "identical" if same else "DIFFER"))
    comm.close()
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
