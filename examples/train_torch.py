#!/usr/bin/env python3
"""examples/train_torch.py - DistributedDataParallel training over baton.

    build/bin/baton-run -n 4 /usr/bin/python3 examples/train_torch.py
    torchrun --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/train-logs \\
        examples/train_torch.py
    /usr/bin/python3 examples/train_torch.py --alone        # one process, no torch.distributed

An MLP of 25.2 million parameters (1024-4096-4096-1024, ReLU) learns a fixed
random regression under DDP, with one intra-op thread per rank and a batch
of 16 per rank. The group is init_process_group(BACKEND) through env://
(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE: baton-run and torchrun both set
them), BACKEND being --backend, else $BACKEND, else "baton". Rank 0 prints
each step's time and at the end the median and mean over the steps after
the warm-up; --json adds one line of JSON with every step's time
(bench/torch-compare.sh reads it). --check makes every rank compare its
parameters with rank 0's at the end (bitwise, as DDP promises). --noop-hook
replaces DDP's allreduce by a comm hook that returns the bucket as it is:
the step time of N ranks that share the machine and bucket their gradients
but do not communicate (bench/torch-compare.sh subtracts it).
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default=os.environ.get("BACKEND", "baton"),
                    help="torch.distributed backend (default $BACKEND, else baton)")
    ap.add_argument("--steps", type=int, default=10, help="training steps (default 10)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="first steps left out of the median (default 1)")
    ap.add_argument("--batch", type=int, default=16, help="samples per rank and step (default 16)")
    ap.add_argument("--sizes", default="1024,4096,4096,1024",
                    help="layer widths, input first (default 1024,4096,4096,1024)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1)")
    ap.add_argument("--alone", action="store_true",
                    help="one process without torch.distributed: the baseline of DDP's overhead")
    ap.add_argument("--noop-hook", action="store_true",
                    help="DDP with a comm hook that does not communicate: what DDP and the "
                    "ranks sharing the machine cost without the allreduce")
    ap.add_argument("--bucket-view", action="store_true",
                    help="DDP(gradient_as_bucket_view=True): the gradients are views of the "
                    "buckets, which saves DDP's copy of them into the buckets and back")
    ap.add_argument("--check", action="store_true",
                    help="at the end, every rank's parameters must be rank 0's")
    ap.add_argument("--json", action="store_true", help="print the step times as JSON too")
    return ap.parse_args()


def load_backend(name):
    """`import baton.torch` registers "baton"; from a checkout, python/ and
    build/python/ are found beside this file without PYTHONPATH. With
    BATON_MEM_LOCAL=1 it also makes torch's large tensors baton's local
    memory, so it is imported then whatever the backend (and alone), and
    every run of a comparison has the same allocator."""
    if name != "baton" and os.environ.get("BATON_MEM_LOCAL", "").strip() != "1":
        return
    try:
        import baton.torch  # noqa: F401
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        sys.path.insert(0, os.path.join(here, "..", "python"))
        for m in [m for m in sys.modules if m == "baton" or m.startswith("baton.")]:
            del sys.modules[m]
        import baton.torch  # noqa: F401


def mlp(sizes):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def main():
    args = parse()
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    rank, world = 0, 1
    load_backend("" if args.alone else args.backend)
    if not args.alone:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group(args.backend)
        rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = mlp(sizes)
    nparams = sum(p.numel() for p in model.parameters())
    net = model if args.alone else DDP(model, gradient_as_bucket_view=args.bucket_view)
    if args.noop_hook and not args.alone:
        def noop(state, bucket):
            fut = torch.futures.Future()
            fut.set_result(bucket.buffer())
            return fut
        net.register_comm_hook(None, noop)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    g = torch.Generator()
    g.manual_seed(1 + rank)
    x = torch.randn(args.batch, sizes[0], generator=g)
    y = torch.randn(args.batch, sizes[-1], generator=g)
    if rank == 0:
        print("%s, %d rank%s, %.1fM parameters, batch %d per rank, %d thread%s per rank" % (
            "alone (no torch.distributed)" if args.alone else "backend " + args.backend +
            (", no communication (--noop-hook)" if args.noop_hook else ""), world,
            "s" * (world != 1), nparams / 1e6, args.batch, args.threads,
            "s" * (args.threads != 1)), flush=True)

    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        if rank == 0:
            print("step %d: %.1f ms, loss %.5f" % (step, 1e3 * times[-1], loss.item()), flush=True)

    timed = times[args.warmup:] or times
    if rank == 0:
        print("median step %.1f ms, mean %.1f ms over steps %d..%d" % (
            1e3 * statistics.median(timed), 1e3 * statistics.mean(timed),
            len(times) - len(timed), len(times) - 1), flush=True)
        if args.json:
            print("JSON " + json.dumps({"backend": "alone" if args.alone else "noop-hook"
                                        if args.noop_hook else args.backend,
                                        "ranks": world, "params": nparams, "batch": args.batch,
                                        "step_s": times, "warmup": args.warmup}), flush=True)
    status = 0
    if args.check and not args.alone:
        flat = torch.cat([p.detach().flatten() for p in model.parameters()])
        first = flat.clone()
        dist.broadcast(first, 0)
        same = torch.tensor([int(torch.equal(first, flat))])
        dist.all_reduce(same, op=dist.ReduceOp.MIN)
        if rank == 0:
            print("check: every rank holds rank 0's parameters: %s" % (
                "yes" if same.item() else "NO"), flush=True)
        status = 0 if same.item() else 1
    if not args.alone:
        dist.destroy_process_group()
    return status


if __name__ == "__main__":
    sys.exit(main())
