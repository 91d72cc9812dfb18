#!/usr/bin/env python3
"""bench/report.py - the report of one bench/compare.sh run.

    python3 bench/report.py RAW_DIR BASE RATE

RAW_DIR holds machine.txt, runs.tsv and one <part>.<lib>.r<rep>.json per
run (the --json output of baton-bench and of the peers); with several
repetitions each size takes the best (lowest) time of them. Writes BASE.md (the
machine, the commands, a table per part with baton / best peer) and, per
part, BASE-<part>-busbw.svg and BASE-<part>-time.svg: log-log plots with
one line per library. Standard library only, so that it runs wherever
python3 does.

baton-old is another build of baton (compare.sh --baseline), named by the
commit that machine.txt gives; it is no peer: the tables set it beside
baton as new / old = baton's time / baton-old's time (< 1: the current
build is faster), and the plots draw it dashed.

The figures are those of the in-place group, which every library has
(Gloo's halving-doubling works in place only). A run killed by the
timeout leaves a JSON document without its end; the sizes it finished are
still read, one per line.
"""
import glob
import json
import math
import os
import re
import sys

LIBS = ["baton", "baton-old", "openmpi", "mpich", "gloo", "gloo-ring",
        "gloo-hd"]
BATONS = ("baton", "baton-old")
LABEL = {"baton": "baton", "baton-old": "baton-old", "openmpi": "Open MPI",
         "mpich": "MPICH",
         "gloo": "Gloo", "gloo-ring": "Gloo ring",
         "gloo-hd": "Gloo halving-doubling"}
COLOR = {"baton": "#d62728", "baton-old": "#8c564b", "openmpi": "#1f77b4",
         "mpich": "#2ca02c",
         "gloo": "#9467bd", "gloo-ring": "#9467bd", "gloo-hd": "#ff7f0e",
         "model": "#555555"}
PARTS = {"shm2": "shared memory, N=2", "shm4": "shared memory, N=4",
         "tcp2": "loopback TCP, N=2",
         "cluster4": "emulated cluster, 4 hosts x 1 rank",
         "cluster8": "emulated cluster, 8 hosts x 1 rank"}


def load_run(path):
    """(header, [result, ...]) of one JSON output, complete or cut off."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None, []
    try:
        doc = json.loads(text)
        return doc, doc.get("results", [])
    except ValueError:
        pass
    results = []
    for line in text.splitlines():
        line = line.strip().rstrip(",")
        if line.startswith('{"size"'):
            try:
                results.append(json.loads(line))
            except ValueError:
                pass
    return None, results


def in_place(r):
    return r.get("in_place") or r.get("out_of_place")


# nccl-tests' bus bandwidth factors, as tools/bench_common.h has them.
def bus_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll in ("broadcast", "reduce"):
        return 1.0
    return (n - 1) / n


COLLECTIVE = ["allreduce"]  # of this run, from the first JSON header seen


def load_best(raw, part, lib):
    """{size: in-place figures} with the lowest time over the repetitions,
    and how many runs gave figures."""
    best, nruns = {}, 0
    for path in sorted(glob.glob(os.path.join(raw, "%s.%s.r*.json"
                                              % (part, lib)))):
        head, results = load_run(path)
        if head and head.get("collective"):
            COLLECTIVE[0] = head["collective"]
        nruns += bool(results)
        for r in results:
            g = in_place(r)
            if r["size"] not in best or g["time_us"] < best[r["size"]]["time_us"]:
                best[r["size"]] = g
    return best, nruns


def rate_bytes(rate):
    """tc's rate ("1gbit", "100mbit", "0") in bytes per second; None if
    unshaped or unknown."""
    m = re.fullmatch(r"([0-9.]+)([kmg]?)(bit|bps)?", rate.strip().lower())
    if not m or float(m.group(1)) == 0:
        return None
    mult = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    bits = float(m.group(1)) * mult
    return bits if m.group(3) == "bps" else bits / 8


def hsize(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            v = b / div
            return ("%d %s" % (v, unit)) if v == int(v) else "%.1f %s" % (v, unit)
    return "%d B" % b


def fmt_us(t):
    if t is None:
        return "-"
    return "%.0f" % t if t >= 100 else "%.2f" % t


# ---------------------------------------------------------------- plots

def log_ticks(lo, hi, base):
    k0, k1 = math.floor(math.log(lo, base)), math.ceil(math.log(hi, base))
    return [base ** k for k in range(k0, k1 + 1)]


def svg_plot(path, title, ylabel, series, yfmt):
    """series: [(name, color, dashed, [(x, y), ...])]; log x and log y."""
    pts = [(x, y) for _, _, _, s in series for x, y in s if x > 0 and y > 0]
    if not pts:
        return False
    W, H, L, R, T, B = 900, 480, 80, 230, 40, 60
    pw, ph = W - L - R, H - T - B
    xt = log_ticks(min(p[0] for p in pts), max(p[0] for p in pts), 4)
    yt = log_ticks(min(p[1] for p in pts), max(p[1] for p in pts), 10)
    lx0, lx1 = math.log(xt[0]), math.log(xt[-1])
    ly0, ly1 = math.log(yt[0]), math.log(yt[-1])
    if lx1 == lx0:
        lx1 += 1
    if ly1 == ly0:
        ly1 += 1

    def X(x):
        return L + (math.log(x) - lx0) / (lx1 - lx0) * pw

    def Y(y):
        return T + ph - (math.log(y) - ly0) / (ly1 - ly0) * ph

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">'
           % (W, H, W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>'
           % (L, esc(title))]
    for x in xt:
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>'
                   % (X(x), T, X(x), T + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (X(x), T + ph + 18, esc(hsize(x))))
    for y in yt:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                   % (L, Y(y), L + pw, Y(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (L - 6, Y(y) + 4, esc(yfmt(y))))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" '
               'stroke="#333"/>' % (L, T, pw, ph))
    out.append('<text x="%.1f" y="%d" text-anchor="middle">message size '
               '(bytes, log scale)</text>' % (L + pw / 2, H - 14))
    out.append('<text transform="translate(18,%.1f) rotate(-90)" '
               'text-anchor="middle">%s</text>' % (T + ph / 2, esc(ylabel)))
    ly = T + 10
    for name, color, dashed, s in series:
        s = [(x, y) for x, y in s if x > 0 and y > 0]
        if not s:
            continue
        dash = ' stroke-dasharray="6,4"' if dashed else ""
        width = 3 if name in BATONS else 2
        out.append('<polyline fill="none" stroke="%s" stroke-width="%d"%s '
                   'points="%s"/>' % (color, width, dash, " ".join(
                       "%.1f,%.1f" % (X(x), Y(y)) for x, y in s)))
        for x, y in s:
            out.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>'
                       % (X(x), Y(y), color))
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                   'stroke-width="%d"%s/>' % (L + pw + 16, ly, L + pw + 46, ly,
                                               color, width, dash))
        out.append('<text x="%d" y="%d">%s</text>'
                   % (L + pw + 52, ly + 4, esc(LABEL.get(name, name))))
        ly += 20
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return True


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fmt_axis(v):
    return ("%g" % v) if v < 1e4 else "%.0e" % v


def fmt_time_axis(us):
    for unit, div in (("s", 1e6), ("ms", 1e3), ("us", 1)):
        if us >= div:
            return "%g %s" % (us / div, unit)
    return "%g us" % us


# ---------------------------------------------------------------- report

SMALL_MAX = 8192  # the largest size whose time is mostly latency


def ring_model(part, sizes, baton, rate):
    """Rows of the ring's model next to the measured time, or []."""
    B = rate_bytes(rate)
    n = int(re.sub(r"\D", "", part))
    if B is None or not baton:
        return [], None
    small = min(baton)
    # us, from the smallest size; a run without a small size (--min
    # above 8 KiB) has none to take it from, and its sizes are
    # bandwidth-bound: alpha 0.
    alpha = baton[small] / (2 * (n - 1)) if small <= SMALL_MAX else 0.0
    rows = []
    for k in sizes:
        if k not in baton:
            continue
        t_bw = 2 * (n - 1) / n * k / B * 1e6
        t = t_bw + 2 * (n - 1) * alpha
        rows.append((k, t_bw, t, baton[k], t / baton[k] * 100))
    return rows, alpha


def model_section(part, sizes, times, rate, md):
    """The ring's model beside baton's time (and Gloo's ring, itself a
    ring); returns baton's model curve (or Gloo's when baton is absent)."""
    n = int(re.sub(r"\D", "", part))
    B = rate_bytes(rate)
    if B is None:
        md.append("The links were unshaped: no link rate B for the ring's "
                  "model.\n")
        return []
    curve = []
    rings = [lib for lib in ("baton", "gloo-ring") if lib in times]
    if not rings:
        md.append("Neither baton nor Gloo's ring ran here: no measurement "
                  "to set beside the ring's model.\n")
        return []
    where = ("taken from the same library's smallest size (T(%s) / 2(N-1))"
             % hsize(min(sizes)) if min(sizes) <= SMALL_MAX else
             "0, since this run has no size below %s to take it from"
             % hsize(SMALL_MAX))
    md.append("The ring's model: T = 2(N-1)/N * K/B + 2(N-1) * alpha, with "
              "N = %d, B = %s = %.0f MB/s per link and direction, alpha "
              "%s; model / measured is the share of the model's speed "
              "reached.\n" % (n, rate, B / 1e6, where))
    for lib in rings:
        rows, alpha = ring_model(part, sizes, times[lib], rate)
        if not rows:
            continue
        md.append("%s (alpha = %.1f us):\n" % (LABEL[lib], alpha))
        md.append("| K | 2(N-1)/N K/B (us) | model T (us) | measured (us) "
                  "| model / measured |")
        md.append("|---:|---:|---:|---:|---:|")
        for k, t_bw, t, meas, pct in rows:
            md.append("| %s | %s | %s | %s | %.0f%% |" % (
                hsize(k), fmt_us(t_bw), fmt_us(t), fmt_us(meas), pct))
        md.append("")
        if not curve:
            curve = [("ring model, alpha of " + LABEL[lib], k, t)
                     for k, _, t, _, _ in rows]
    return curve


def part_report(part, raw, base, rate, md):
    runs, times, busbw, p99 = {}, {}, {}, {}
    n = int(re.sub(r"\D", "", part))
    for lib in LIBS:
        best, nruns = load_best(raw, part, lib)
        if best:
            runs[lib] = nruns
            times[lib] = {s: g["time_us"] for s, g in best.items()}
            # From the time, not the printed busbw, which is rounded.
            busbw[lib] = {s: s / (t * 1e-6) / 1e9 * bus_factor(
                COLLECTIVE[0], n) for s, t in times[lib].items() if t > 0}
            p99[lib] = {s: g["p99_us"] for s, g in best.items()}
    md.append("## %s (`%s`)\n" % (PARTS[part], part))
    if not runs:
        md.append("No library produced figures here; see the status of the "
                  "runs above.\n")
        return
    sizes = sorted({s for t in times.values() for s in t})
    libs = [lib for lib in LIBS if lib in times]
    peers = [lib for lib in libs if lib not in BATONS]
    both = "baton" in times and "baton-old" in times
    head = ["size"] + ["%s (us)" % LABEL[lib] for lib in libs]
    if both:
        head += ["new / old"]
    if "baton" in times:
        head += ["baton p99 (us)"]
    if "baton" in times and peers:
        head += ["best peer", "baton / best peer"]
    most = max(runs.values())
    md.append("In-place time per call (the slowest rank's average%s)%s%s.\n" % (
        ", best of %d runs" % most if most > 1 else "",
        "; new / old = baton's time / %s's time, so below 1 the current "
        "build is faster" % LABEL["baton-old"] if both else "",
        "; baton / best peer = best peer's time / baton's time, so above 1 "
        "baton is faster" if "baton" in times and peers else ""))
    md.append("| " + " | ".join(head) + " |")
    md.append("|" + "|".join("---:" for _ in head) + "|")
    for s in sizes:
        row = [hsize(s)] + [fmt_us(times[lib].get(s)) for lib in libs]
        if both:
            new, old = times["baton"].get(s), times["baton-old"].get(s)
            row.append("%.2f" % (new / old) if new and old else "-")
        if "baton" in times:
            row.append(fmt_us(p99["baton"].get(s)))
        if "baton" in times and peers:
            best = [(times[p][s], p) for p in peers if times[p].get(s)]
            b = times["baton"].get(s)
            if best and b:
                t, p = min(best)
                row += [LABEL[p], "%.2f" % (t / b)]
            else:
                row += ["-", "-"]
        md.append("| " + " | ".join(row) + " |")
    md.append("")

    model = []
    if part.startswith("cluster") and COLLECTIVE[0] == "allreduce":
        model = model_section(part, sizes, times, rate, md)

    name = os.path.basename(base)
    series_t = [(lib, COLOR[lib], lib == "baton-old",
                 sorted(times[lib].items())) for lib in libs]
    if model:
        series_t.append((model[0][0], COLOR["model"], True,
                         [(k, t) for _, k, t in model]))
    series_b = [(lib, COLOR[lib], lib == "baton-old",
                 sorted((s, v) for s, v in busbw[lib].items() if s > 0))
                for lib in libs]
    title = "float32 %s, %s" % (
        "sum allreduce" if COLLECTIVE[0] == "allreduce" else COLLECTIVE[0],
        PARTS[part])
    wrote = []
    if svg_plot("%s-%s-busbw.svg" % (base, part), title,
                "bus bandwidth (GB/s, log scale)", series_b, fmt_axis):
        wrote.append("%s-%s-busbw.svg" % (name, part))
    if svg_plot("%s-%s-time.svg" % (base, part), title,
                "time per call (log scale)", series_t, fmt_time_axis):
        wrote.append("%s-%s-time.svg" % (name, part))
    for w in wrote:
        md.append("![%s](%s)\n" % (w, w))


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: report.py RAW_DIR BASE RATE")
    raw, base, rate = sys.argv[1:]
    coll = "allreduce"
    for path in sorted(glob.glob(os.path.join(raw, "*.json"))):
        head, _ = load_run(path)
        if head and head.get("collective"):
            coll = COLLECTIVE[0] = head["collective"]
            break
    with open(os.path.join(raw, "machine.txt")) as f:
        machine = [l.rstrip("\n") for l in f if l.strip()]
    for l in machine:
        m = re.match(r"baton-old: git ([^\s,]+)", l)
        if m:
            LABEL["baton-old"] = "baton-old %s" % m.group(1)
    runs = []
    with open(os.path.join(raw, "runs.tsv")) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 4:
                runs.append(cols)
    md = ["# baton, Open MPI, MPICH and Gloo side by side: %s\n" % coll,
          "Made by `bench/compare.sh`; the raw output of every run is in "
          "`%s/`.\n" % raw, "## The machine\n"]
    md += ["- " + l for l in machine]
    md.append("")
    md.append("Every peer ran with `LD_PRELOAD` of Debian's "
              "`libtcmalloc_minimal.so.4` (each run's header says so); baton "
              "ran with glibc malloc. Gloo has no shared-memory transport: "
              "in the shm parts it runs over loopback TCP. Times are of the "
              "in-place group, the slowest rank's average per call "
              "(nccl-tests); busbw = size / time * %s.\n" % (
                  "2(N-1)/N" if coll == "allreduce" else
                  "1" if coll in ("broadcast", "reduce") else "(N-1)/N"))
    md.append("## The runs\n")
    md.append("| part | library | status | command |")
    md.append("|---|---|---|---|")
    for part, lib, status, cmd in runs:
        md.append("| %s | %s | %s | %s |" % (part, lib, status.replace(
            "|", "/"), ("`%s`" % cmd.replace("|", "/")) if cmd else ""))
    md.append("")
    parts = []
    for part, _, _, _ in runs:
        if part in PARTS and part not in parts:
            parts.append(part)
    for part in parts:
        part_report(part, raw, base, rate, md)
    with open(base + ".md", "w") as f:
        f.write("\n".join(md) + "\n")


if __name__ == "__main__":
    main()
