#!/usr/bin/env python3
"""bench/thread_cpu.py - where a running job's CPU time goes, thread by thread.

    build/bin/baton-run -n 2 /usr/bin/python3 examples/train_torch.py --steps 20 &
    python3 bench/thread_cpu.py --match train_torch --after 9 --for 8

Waits --after seconds, then reads every thread of the processes whose command
line holds --match (/proc/PID/task/TID: stat, status and schedstat), again
--for seconds later, and prints for each thread that ran at least --least
seconds in between: its rank (RANK or BATON_RANK in the process's
environment), its name (baton's threads are named: baton-progress,
baton-complete, ...), the CPU time it used, the time it sat runnable waiting
for a core, and its voluntary switches (it blocked) and involuntary ones (it
was preempted). A thread that runs for the whole window and never blocks is
the one the job waits for.
"""
import argparse
import os
import sys
import time


def rank_of(pid):
    try:
        env = open("/proc/%s/environ" % pid, "rb").read().split(b"\0")
    except OSError:
        return "?"
    for key in (b"RANK=", b"BATON_RANK="):
        for e in env:
            if e.startswith(key):
                return e[len(key):].decode()
    return "?"


def threads(match):
    """{(pid, tid): (rank, name, cpu_s, wait_s, voluntary, involuntary)}"""
    out = {}
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            cmd = open("/proc/%s/cmdline" % pid, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if match not in cmd:
            continue
        rank = rank_of(pid)
        try:
            tids = os.listdir("/proc/%s/task" % pid)
        except OSError:
            continue
        for tid in tids:
            base = "/proc/%s/task/%s/" % (pid, tid)
            try:
                name = open(base + "comm").read().strip()
                run_ns, wait_ns = (int(x) for x in open(base + "schedstat").read().split()[:2])
                sw = {}
                for line in open(base + "status"):
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        k, v = line.split(":")
                        sw[k] = int(v)
            except (OSError, ValueError):
                continue  # the thread ended meanwhile
            out[(pid, tid)] = (rank, name, run_ns / 1e9, wait_ns / 1e9,
                               sw.get("voluntary_ctxt_switches", 0),
                               sw.get("nonvoluntary_ctxt_switches", 0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--match", default="train_torch",
                    help="a piece of the command line of the processes to watch")
    ap.add_argument("--after", type=float, default=5, help="seconds before the first look")
    ap.add_argument("--for", dest="span", type=float, default=5,
                    help="seconds between the two looks")
    ap.add_argument("--least", type=float, default=0.01,
                    help="leave out threads that ran less than this many seconds")
    a = ap.parse_args()
    time.sleep(a.after)
    first = threads(a.match)
    if not first:
        sys.exit("thread_cpu.py: no process's command line holds %r" % a.match)
    time.sleep(a.span)
    second = threads(a.match)
    rows = []
    for key, (rank, name, cpu, wait, vol, inv) in second.items():
        if key not in first:
            continue
        _, _, cpu0, wait0, vol0, inv0 = first[key]
        if cpu - cpu0 >= a.least:
            rows.append((rank, key[0], key[1], name, cpu - cpu0, wait - wait0, vol - vol0,
                         inv - inv0))
    if not rows:
        sys.exit("thread_cpu.py: the processes ended before the second look")
    print("over %.1f s:" % a.span)
    print("%-5s %8s %8s %-16s %8s %9s %8s %8s" % ("rank", "pid", "tid", "name", "cpu s",
                                                "waited s", "blocked", "preempt"))
    for r in sorted(rows, key=lambda r: (r[0], r[1], -r[4])):
        print("%-5s %8s %8s %-16s %8.2f %9.2f %8d %8d" % r)


if __name__ == "__main__":
    sys.exit(main())
