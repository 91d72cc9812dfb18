#!/usr/bin/env python3
"""bench/trace_calls.py - each collective of a BATON_TRACE run, rank beside rank.

    BATON_TRACE=/tmp/t.%r baton-run -n 2 ./prog
    python3 bench/trace_calls.py [--min-bytes N] /tmp/t.0 /tmp/t.1 ...

For every call (its seq) of at least --min-bytes (default 1 MiB: count times
4 bytes, as for float32), one line: the collective, its algorithm and size,
and on each rank the time from the start of its first step to the end of
its last (docs/trace.md). A call that takes long on one rank and short on
another spent the difference waiting for that other rank to arrive: the
late rank's time is what moving the data took, the early rank's the wait
too. The last column is the first rank's start minus the last rank's, so
how far ahead the earliest rank was. The clocks are CLOCK_MONOTONIC, one
per machine, so only the ranks of one host compare. Standard library only.
"""
import argparse
import json


def calls_of(path):
    """{seq: (coll, algo, count, first start, last end)} of one rank's trace."""
    calls = {}
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d["t_end_us"] < 0:
                continue
            c = calls.get(d["seq"])
            t0, t1 = d["t_start_us"], d["t_end_us"]
            if c:
                t0, t1 = min(c[3], t0), max(c[4], t1)
            calls[d["seq"]] = (d["coll"], d["algo"], d["count"], t0, t1)
    return calls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-bytes", type=int, default=1 << 20)
    ap.add_argument("traces", nargs="+", help="one BATON_TRACE file a rank, in rank order")
    args = ap.parse_args()
    ranks = [calls_of(p) for p in args.traces]
    print("seq  collective  algo      MB     " +
          "  ".join("rank %d ms" % r for r in range(len(ranks))) + "  earliest ahead, ms")
    for seq in sorted(ranks[0]):
        coll, algo, count, _, _ = ranks[0][seq]
        if count * 4 < args.min_bytes or any(seq not in r for r in ranks):
            continue
        spans = [(r[seq][4] - r[seq][3]) / 1e3 for r in ranks]
        starts = [r[seq][3] for r in ranks]
        print("%-4d %-11s %-9s %-6.1f %s  %.1f" % (
            seq, coll, algo, count * 4 / 1e6, "  ".join("%9.2f" % s for s in spans),
            (max(starts) - min(starts)) / 1e3))


if __name__ == "__main__":
    main()
