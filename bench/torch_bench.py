#!/usr/bin/env python3
"""bench/torch_bench.py - collectives through torch.distributed, baton and
Gloo side by side in the same processes; and the report of
bench/torch-compare.sh.

    build/bin/baton-run -n N /usr/bin/python3 bench/torch_bench.py [options] > OUT.jsonl
    /usr/bin/python3 bench/torch_bench.py report RAWDIR OUT.md

Every process joins a "baton" group (the default one) and a Gloo group of
the same ranks. For each collective and size, both groups are timed one
right after the other (baton first at even sizes, Gloo first at odd ones):
a warm-up call, one call whose slowest rank's time fixes how many calls fit
in --budget seconds (at least 3, at most --iters), then that many calls back
to back after a barrier; the time of a call is the slowest rank's mean.
--reps repeats that batch and keeps the best. One JSON line per collective,
size and backend goes to stdout.

Sizes are those of nccl-tests: the whole buffer of the call (allgather's
output, reduce_scatter's input, alltoall's buffer), float32, so a rank's
share is size / N. Gloo 1.13 has no reduce_scatter: its column is the
all_reduce of the whole input, which is what a Gloo user calls instead
(the rank's share is then a view of it). --colls allgather_base (not in the
default list) times baton's _all_gather_base beside Gloo's all_gather of a
list (Gloo has no _allgather_base).
"""
import argparse
import datetime
import json
import os
import sys
import time

COLLS = ["allreduce", "allgather", "reduce_scatter", "broadcast", "alltoall"]
# Not in the default list: allgather_base is baton's _all_gather_base (one
# output tensor, no staging) beside Gloo's all_gather of a list, since Gloo
# 1.13 has no _allgather_base.
EXTRA = ["allgather_base"]
# busbw = algbw * factor(N), as nccl-tests defines it.
FACTORS = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
           "allgather_base": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0,
           "alltoall": lambda n: (n - 1) / n}


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def human(b):
    for unit, v in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= v:
            return "%d %s" % (b // v, unit)
    return "%d B" % b


# ------------------------------------------------------------------ measuring


def measure(args):
    import torch
    import torch.distributed as dist
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import baton.torch  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("baton", timeout=datetime.timedelta(seconds=600))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=600))
    n, rank = dist.get_world_size(), dist.get_rank()
    groups = {"baton": None, "gloo": gloo}

    def slowest(t):
        v = torch.tensor([t], dtype=torch.float64)
        dist.all_reduce(v, op=dist.ReduceOp.MAX, group=gloo)
        return v.item()

    def call_of(coll, size, backend):
        """A function making one call of coll on size bytes, buffers made once."""
        g = groups[backend]
        count = max(1, size // 4)
        share = max(1, count // n)

        def empty(k):  # --registered: baton's buffers from baton.torch.empty
            return baton.torch.empty(k) if args.registered and backend == "baton" else \
                torch.empty(k)

        def ones(k):
            return empty(k).fill_(1)
        if coll == "allreduce":
            t = ones(count)
            return lambda: dist.all_reduce(t, group=g)
        if coll == "allgather":
            x, outs = ones(share), [empty(share) for _ in range(n)]
            return lambda: dist.all_gather(outs, x, group=g)
        if coll == "allgather_base":
            x, out = ones(share), empty(share * n)
            if backend == "gloo":  # Gloo 1.13 has no _allgather_base
                outs = [torch.empty(share) for _ in range(n)]
                return lambda: dist.all_gather(outs, x, group=g)
            return lambda: dist._all_gather_base(out, x, group=g)
        if coll == "reduce_scatter":
            x, out = ones(share * n), empty(share)
            if backend == "gloo":  # Gloo 1.13 has no reduce_scatter of any form
                return lambda: dist.all_reduce(x, group=g)
            return lambda: dist._reduce_scatter_base(out, x, group=g)
        if coll == "broadcast":
            t = ones(count)
            return lambda: dist.broadcast(t, 0, group=g)
        x, out = ones(share * n), empty(share * n)
        return lambda: dist.all_to_all_single(out, x, group=g)

    def timed(fn, group):
        fn()  # warm-up: buffers faulted in, connections made
        dist.barrier(group=group)
        t0 = time.perf_counter()
        fn()
        one = slowest(time.perf_counter() - t0)
        k = int(max(3, min(args.iters, args.budget / max(one, 1e-7))))
        best = float("inf")
        for _ in range(args.reps):
            dist.barrier(group=group)
            t0 = time.perf_counter()
            for _ in range(k):
                fn()
            best = min(best, slowest((time.perf_counter() - t0) / k))
        return best, k

    sizes = []
    s = args.min
    while s <= args.max:
        sizes.append(s)
        s *= 4
    for coll in args.colls.split(","):
        for i, size in enumerate(sizes):
            order = ["baton", "gloo"] if i % 2 == 0 else ["gloo", "baton"]
            for backend in order:
                fn = call_of(coll, size, backend)
                t, k = timed(fn, groups[backend])
                del fn
                if rank == 0:
                    print(json.dumps({"coll": coll, "bytes": size, "backend": backend, "ranks": n,
                                      "time_s": t, "calls": k, "reps": args.reps}), flush=True)
    dist.destroy_process_group()


# ------------------------------------------------------------------ the report


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def us(t):
    return "%.1f us" % (t * 1e6) if t < 1e-3 else "%.2f ms" % (t * 1e3) if t < 1 else \
        "%.3f s" % t


def report(rawdir, out):
    """The markdown of one run of torch-compare.sh: its header (written by
    the script to RAWDIR/header.md), a table per part and collective, and the
    DDP step times."""
    meta = json.load(open(os.path.join(rawdir, "meta.json")))
    lines = [open(os.path.join(rawdir, "header.md")).read().rstrip(), ""]
    iperf = meta.get("iperf_MBps")
    verdicts = []
    for part in meta["parts"]:
        path = os.path.join(rawdir, part + ".jsonl")
        if part.startswith("ddp"):
            continue
        if not os.path.exists(path):
            lines += ["## %s" % part, "", "not run (see the log)", ""]
            continue
        rows = load(path)
        if not rows:
            lines += ["## %s" % part, "", "no results (see %s.log)" % part, ""]
            continue
        n = rows[0]["ranks"]
        lines += ["## %s: %d ranks, %s" % (part, n, meta["describe"][part]), ""]
        colls = [c for c in COLLS + EXTRA if any(r["coll"] == c for r in rows)]
        sizes = sorted({r["bytes"] for r in rows})
        t = {(r["coll"], r["bytes"], r["backend"]): r for r in rows}
        head = "| size |" + "|".join(" %s baton | Gloo | Gloo/baton " % c for c in colls) + "|"
        lines += [head, "|---:|" + "---:|---:|---:|" * len(colls)]
        worst = {}
        for s in sizes:
            cells = []
            for c in colls:
                b, g = t.get((c, s, "baton")), t.get((c, s, "gloo"))
                if not b or not g:
                    cells.append(" - | - | - ")
                    continue
                ratio = g["time_s"] / b["time_s"]
                if c not in worst or ratio < worst[c][0]:
                    worst[c] = (ratio, s)
                cells.append(" %s | %s | %.2f " % (us(b["time_s"]), us(g["time_s"]), ratio))
            lines.append("| %s |" % human(s) + "|".join(cells) + "|")
        lines.append("")
        if part.startswith("cluster") and iperf:
            lines.append("busbw at 32 MiB as a share of iperf3's %.1f MB/s over one link "
                         "(busbw = bytes x factor / time; factor 2(N-1)/N for allreduce, "
                         "(N-1)/N for allgather, reduce_scatter and alltoall, 1 for broadcast):"
                         % iperf)
            lines.append("")
            for c in colls:
                for backend in ("baton", "gloo"):
                    r = t.get((c, 32 << 20, backend))
                    if r:
                        bw = (32 << 20) * FACTORS[c](n) / r["time_s"] / 1e6
                        lines.append("- %s %s: %.1f MB/s busbw, %.1f%% of iperf3" % (
                            c, "baton" if backend == "baton" else "Gloo", bw, 100 * bw / iperf))
            lines.append("")
        target = 3.0 if part.startswith("shm") else 1.0
        for c in colls:
            ratio, s = worst[c]
            verdicts.append("| %s | %s | %.3f at %s | %s |" % (
                part, c, ratio, human(s), "met" if ratio >= target else "not met"))
    ddp = meta.get("ddp")
    if ddp:
        lines += ["## DDP: examples/train_torch.py, %s" % ddp["describe"], "",
                  "The overhead is the step time at N ranks minus one rank's alone. The "
                  "step without communication is DDP with a comm hook that returns the bucket "
                  "as it is (`--noop-hook`): bucketing, and N ranks sharing the cores and the "
                  "memory, with no backend at all; step minus it is what the backend adds.", "",
                  "| ranks | where | baton step | Gloo step | step without communication "
                  "| baton overhead | Gloo overhead | baton / Gloo overhead "
                  "| baton / Gloo, step minus the step without communication |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
        rounds_lines = []
        for row in ddp["rows"]:
            rounds = row.get("rounds", {})
            # The runs alone of this row's rounds where it has them (one host),
            # else those made for every row (the emulated hosts).
            alone = min(rounds["alone"]) if rounds.get("alone") else ddp["alone_s"]
            if rounds.get("alone"):
                per = ["%.2f" % ((b - a) / (g - a)) if g > a else "-" for a, b, g in
                       zip(rounds["alone"], rounds["baton"], rounds["gloo"])]
                rounds_lines.append(
                    "- %d ranks, %s, round by round (alone, baton, Gloo, without communication, "
                    "ms; baton / Gloo overhead with that round's own run alone): %s" % (
                        row["ranks"], row["where"], "; ".join(
                            "%.1f, %.1f, %.1f, %.1f: %s" % (1e3 * a, 1e3 * b, 1e3 * g, 1e3 * n, r)
                            for a, b, g, n, r in zip(rounds["alone"], rounds["baton"],
                                                     rounds["gloo"], rounds["noop"], per))))
            ob, og = row["baton_s"] - alone, row["gloo_s"] - alone
            nb, ng = row["baton_s"] - row["noop_s"], row["gloo_s"] - row["noop_s"]
            lines.append("| %d | %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %s | %s |"
                         % (row["ranks"], row["where"], 1e3 * row["baton_s"], 1e3 * row["gloo_s"],
                            1e3 * row["noop_s"], 1e3 * ob, 1e3 * og,
                            "%.2f" % (ob / og) if og > 0 else "-",
                            "%.1f / %.1f ms = %.2f" % (1e3 * nb, 1e3 * ng, nb / ng) if ng > 0
                            else "-"))
            if row["ranks"] == 2 and row["where"] == "one host":
                verdicts.append("| ddp2 | DDP overhead, baton / Gloo | %.2f | %s |" % (
                    ob / og if og > 0 else float("nan"),
                    "met" if og > 0 and ob / og <= 0.4 else "not met"))
        lines += ["", "One rank alone (`--alone`, no torch.distributed), the best run of "
                  "each row's rounds on one host (each round runs alone right before its DDP "
                  "runs); every run: %s ms per step (median)." % ", ".join(
                      "%.1f" % (1e3 * a) for a in ddp["alone_runs"]), ""] + rounds_lines + [""]
    if verdicts:
        lines += ["## Against the targets", "",
                  "Gloo/baton above 1: baton is faster. Targets: one host >= 3 at every size; "
                  "emulated hosts >= 1 at every size; DDP overhead <= 0.4 of Gloo's at N=2.", "",
                  "| part | collective | lowest Gloo/baton | target |", "|---|---|---:|---|"]
        lines += verdicts + [""]
    with open(out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "report":
        if len(sys.argv) != 4:
            sys.exit("usage: torch_bench.py report RAWDIR OUT.md")
        return report(sys.argv[2], sys.argv[3])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--colls", default=",".join(COLLS))
    ap.add_argument("--min", type=size_arg, default=8)
    ap.add_argument("--max", type=size_arg, default=128 << 20)
    ap.add_argument("--budget", type=float, default=0.5,
                    help="seconds of calls per measurement (default 0.5)")
    ap.add_argument("--iters", type=int, default=1000, help="at most this many calls")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--registered", action="store_true",
                    help="baton's tensors from baton.torch.empty (registered memory); Gloo's "
                         "as ever")
    return measure(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
