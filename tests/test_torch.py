#!/usr/bin/env python3
"""tests/test_torch.py - baton's torch.distributed backend beside Gloo, in one job.

    build/bin/baton-run -n N /usr/bin/python3 tests/test_torch.py [--backend B] [--quick]

Every process joins the default group of backend B (default "baton", after
`import baton.torch`) through env:// (MASTER_ADDR, MASTER_PORT, RANK,
WORLD_SIZE: baton-run and torchrun set them) and then a Gloo group over the
same ranks, and makes every call of torch.distributed through both on the
same inputs:

  - the reductions (all_reduce, all_reduce_coalesced, reduce, reduce_scatter,
    _reduce_scatter_base / reduce_scatter_tensor) x every op x every dtype,
    counts 0, 1, 13 and 40000 (past the flat algorithm's 64 KiB);
  - the moves (broadcast from every rank, all_gather, _all_gather_base /
    all_gather_into_tensor, all_gather_coalesced, gather, scatter,
    all_to_all_single with and without split sizes, zeros included,
    all_to_all, send/recv blocking and as isend/irecv, barrier) x dtypes;
  - new_group of subsets (a group this rank is not in too), many groups;
  - calls in flight (async_op=True) waited in a different order on each
    rank, Work.is_completed/wait/get_future and a future's then(); many
    dropped without a wait, each freed when it completes;
  - tensors over registered memory (baton.torch.empty) on every rank and
    on some, their memory given back, one outliving its group;
  - with BATON_MEM_LOCAL=1, torch's own tensors of 256 KiB and more over
    baton's local memory (so every part above runs on them too): such a
    tensor lies in a local block, the calls on ordinary tensors are right,
    and a rank maps its peers' blocks once a large call ran direct on them;
  - refusals (PREMUL_SUM, sparse, meta, non-contiguous, negated, complex,
    sizes that do not match, recv without src), the RuntimeError's text
    checked; a count that differs between ranks, and a group's own timeout.

Each result is compared with a reference computed here from every rank's
inputs (each rank can make them all: they are a function of the case and the
rank), and with Gloo's where Gloo has the call, the op and the dtype (it has
no AVG, no bfloat16, int16 or bool, no reduce_scatter, _reduce_scatter_base,
_allgather_base or all_to_all in 1.13, and dies of SIGFPE in an all_gather
of zero elements: there the reference alone judges).
Integers, bool, MIN and MAX, and float sums whose order is fixed (N <= 2)
must agree exactly; other float results within the bound of rounding stated
at `tolerance` below.

With --backend gloo both groups are Gloo's: a run that checks the test itself
(the refusals, which are baton's, are skipped then).

Prints `FAIL [rank r]: ...` for each failed check and, on rank 0, the counts
of all ranks: `N passed, M failed, K skipped` (tests/run.sh reads it). The
exit status is 1 when any rank failed a check.
"""
import argparse
import datetime
import gc
import os
import random
import sys
import time
import warnings
import zlib

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
warnings.filterwarnings("ignore", message=".*(private function|will be deprecated|does not belong).*")

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--backend", default=os.environ.get("TEST_BACKEND", "baton"),
                help="the backend under test (default baton); the reference group is Gloo")
ap.add_argument("--quick", action="store_true", help="counts 1 and 13 only")
args = ap.parse_args()
BACKEND = args.backend
if BACKEND == "baton":
    import baton.torch  # noqa: F401  registers the backend

torch.set_num_threads(1)
dist.init_process_group(BACKEND, timeout=datetime.timedelta(seconds=120))
RANK, W = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
R = dist.ReduceOp

# ------------------------------------------------------------------ counting


class Tally:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def check(self, cond, what, detail=""):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL [rank %d]: %s%s" % (RANK, what, (": " + detail) if detail else ""),
                  file=sys.stderr, flush=True)
        return cond

    def skip(self, why):
        """A part that cannot run here; counted once, on rank 0."""
        if RANK == 0:
            self.skipped += 1
            print("SKIP: " + why, flush=True)


T = Tally()

# ------------------------------------------------------------------ dtypes, ops, inputs

F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
DTYPES = [F32, F64, F16, BF16, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
          torch.bool]
# Unit roundoff u (half an ulp of 1) and the smallest subnormal of each float.
FLOATS = {F32: (2.0 ** -24, 2.0 ** -149), F64: (2.0 ** -53, 2.0 ** -1074),
          F16: (2.0 ** -11, 2.0 ** -24), BF16: (2.0 ** -8, 2.0 ** -133)}
GLOO_DTYPES = {F32, F64, F16, torch.int8, torch.uint8, torch.int32, torch.int64}
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR"]
BITWISE = {"BAND", "BOR", "BXOR"}


def name(dt):
    return str(dt).replace("torch.", "")


def accepts(dt, op):
    """What baton.h says baton computes: no bitwise op on floats, no AVG of bool."""
    if dt in FLOATS and op in BITWISE:
        return False
    return not (dt == torch.bool and op == "AVG")


def gloo_has(dt, op=None):
    return dt in GLOO_DTYPES and op != "AVG" and (op is None or accepts(dt, op))


# What Gloo 1.13 lacks among the calls.
GLOO_LACKS = {"reduce_scatter", "_reduce_scatter_base", "_all_gather_base", "all_to_all"}


def tested_has(method, dt=None, op=None):
    """The backend under test has the call: baton has them all; with
    --backend gloo, what Gloo has."""
    return BACKEND != "gloo" or (method not in GLOO_LACKS and (dt is None or gloo_has(dt, op)))


def gen(key, rank, shape, dt, op=None):
    """The input of `rank` in case `key`: the same on every process that asks.

    Floats: uniform in [-1, 1) (PRODUCT: +-[0.5, 2), so that products of N
    <= 8 factors neither overflow nor reach the subnormals; "exact": whole
    numbers in [-16, 16], whose sums are exact in every float dtype).
    Integers: the dtype's whole range (SUM and PRODUCT wrap, as in baton and
    Gloo), AVG small enough that the sum of N fits. bool: coin flips."""
    if isinstance(shape, int):
        shape = (shape,)
    g = torch.Generator()
    g.manual_seed(zlib.crc32(("%s/%d" % (key, rank)).encode()))
    if dt == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dt in FLOATS:
        if op == "exact":
            return torch.randint(-16, 17, shape, generator=g).to(dt)
        x = torch.rand(shape, generator=g, dtype=F64)
        if op == "PRODUCT":
            sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
            return (sign * (0.5 + 1.5 * x)).to(dt)
        return (2 * x - 1).to(dt)
    info = torch.iinfo(dt)
    lo, hi = info.min, info.max
    if op == "AVG":
        lo, hi = max(lo, -(info.max // W)), info.max // W
    # randint's bound is exclusive; int64's largest value itself cannot be one.
    hi = hi if dt == torch.int64 else hi + 1
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dt)


def reduce_ref(xs, dt, op):
    """xs (one tensor per rank, in rank order) reduced as baton.h defines it:
    floats in float64 (the exact value for SUM of N <= 4 float32 / float16 /
    bfloat16 terms; within 2^-53 relative of it otherwise), integers in their
    own dtype (wrapping), AVG of integers as the sum divided by N, truncated
    toward zero; bool as logic."""
    n = len(xs)
    if dt == torch.bool:
        s = torch.stack(xs).to(torch.int64)
        if op in ("SUM", "MAX", "BOR"):
            return s.sum(0) > 0
        if op in ("PRODUCT", "MIN", "BAND"):
            return s.sum(0) == n
        return s.sum(0) % 2 == 1
    if dt in FLOATS:
        s = torch.stack([x.to(F64) for x in xs])
        return {"SUM": lambda: s.sum(0), "AVG": lambda: s.sum(0) / n,
                "PRODUCT": lambda: s.prod(0), "MIN": lambda: s.min(0).values,
                "MAX": lambda: s.max(0).values}[op]()
    if op == "AVG":
        total = torch.stack([x.to(torch.int64) for x in xs]).sum(0)
        return torch.div(total, n, rounding_mode="trunc").to(dt)
    acc = xs[0].clone()
    for x in xs[1:]:
        if op == "SUM":
            acc = acc + x
        elif op == "PRODUCT":
            acc = acc * x
        elif op == "MIN":
            acc = torch.minimum(acc, x)
        elif op == "MAX":
            acc = torch.maximum(acc, x)
        elif op == "BAND":
            acc = acc & x
        elif op == "BOR":
            acc = acc | x
        else:
            acc = acc ^ x
    return acc.to(dt)


def tolerance(xs, dt, op, kind=None):
    """How far two correct results of reducing xs may lie apart, per element
    (0: they must be equal).

    Integers, bool, MIN, MAX and sums of whole numbers are exact whatever the
    order. A float sum of n terms, in any order, in a precision with unit
    roundoff u, lies within (n-1) u sum|x_i| of the exact sum (each of the
    n-1 additions adds at most u times a partial sum, and every partial sum
    is at most sum|x_i|), and rounding it to the dtype adds u |s|. baton sums
    float16 and bfloat16 in float32 (u = 2^-24) and Gloo in the dtype itself;
    taking u of the dtype covers both. Two such results are then within
    twice that: 2 ((n-1) u sum|x_i| + u |s|), plus n times the smallest
    subnormal where a sum cancels into the subnormals (there the error is
    absolute, half a subnormal per rounding). With n <= 2 (one addition, which
    is commutative) float32 and float64 sums are exact, and so is AVG of 2
    (halving is exact). AVG divides the sum by n: the sum's bound over n plus
    one more rounding on each side, 2 u |avg|. A product of n factors in
    [0.5, 2) never under- or overflows, and each of its n-1 multiplications
    and the final rounding add at most u relative: 2 n u |p|."""
    n = len(xs)
    if dt not in FLOATS or op in ("MIN", "MAX") or kind == "exact" or n == 1:
        return 0.0
    u, tiny = FLOATS[dt]
    x = torch.stack([t.to(F64) for t in xs])
    if op == "PRODUCT":
        return 2 * n * u * x.prod(0).abs()
    if n <= 2 and dt in (F32, F64):
        return 0.0
    s = x.sum(0)
    bound = 2 * ((n - 1) * u * x.abs().sum(0) + u * s.abs()) + n * tiny
    if op == "AVG":
        return bound / n + 2 * u * (s / n).abs()
    return bound


def agree(got, want, tol):
    """got (in its dtype) matches want within tol; (ok, a description)."""
    if got.shape != want.shape:
        return False, "shape %s, want %s" % (tuple(got.shape), tuple(want.shape))
    exact = isinstance(tol, float) and tol == 0.0
    if exact:
        bad = got != (want.bool() if got.dtype == torch.bool else want.to(got.dtype))
    else:
        bad = (got.to(F64) - want.to(F64)).abs() > tol
    ok = not bool(bad.any())
    if ok:
        return True, ""
    i = int(bad.flatten().nonzero()[0])
    t = tol if isinstance(tol, float) else float(tol.flatten()[i])
    return False, "%d of %d elements differ, first [%d]: got %r, want %r (bound %g)" % (
        int(bad.sum()), bad.numel(), i, got.flatten()[i].item(), want.flatten()[i].item(), t)


def attempt(what, run, group):
    """run(group), or None and a failure when it raises. Every rank raises
    alike for the arguments that the backends check before anything moves,
    so the job goes on in step."""
    try:
        return run(group)
    except RuntimeError as e:
        T.check(False, what, "RuntimeError: %s" % str(e).split("\n")[0])
        return None


def compare(what, got, want, tol=0.0):
    ok, why = agree(got, want, tol)
    return T.check(ok, what, why)


# ------------------------------------------------------------------ the reductions


def counts():
    return (1, 13) if args.quick else (0, 1, 13, 40000)


def reduction_case(method, dt, op, n):
    """Runs one reduction through the group under test and Gloo; checks both
    against the reference and each other."""
    kind = "exact" if op == "exact" else None
    rop = "SUM" if op == "exact" else op
    if not tested_has(method, dt, rop):
        return
    key = "%s/%s/%s/%d" % (method, name(dt), op, n)
    what = "%s %s %s n=%d" % (method, name(dt), op, n)
    ins = [gen(key, q, n * (W if method in ("reduce_scatter", "_reduce_scatter_base") else 1),
               dt, op) for q in range(W)]
    extra = [gen(key + "/2", q, n + 3, dt, op) for q in range(W)]  # all_reduce_coalesced's second
    root = W - 1

    def run(group):
        x = ins[RANK].clone()
        if method == "all_reduce":
            dist.all_reduce(x, op=getattr(R, rop), group=group)
            return [x]
        if method == "all_reduce_coalesced":
            y = extra[RANK].clone()
            dist.all_reduce_coalesced([x, y], op=getattr(R, rop), group=group)
            return [x, y]
        if method == "reduce":
            dist.reduce(x, dst=root, op=getattr(R, rop), group=group)
            return [x] if RANK == root else []
        if method == "reduce_scatter":
            out = torch.empty(n, dtype=dt)
            dist.reduce_scatter(out, list(x.chunk(W)) if n else [x[:0]] * W,
                                op=getattr(R, rop), group=group)
            return [out]
        out = torch.empty(n, dtype=dt)
        f = getattr(dist, "reduce_scatter_tensor", None) if n % 2 else None
        (f or dist._reduce_scatter_base)(out, x, op=getattr(R, rop), group=group)
        return [out]

    def mine(xs):
        if method in ("reduce_scatter", "_reduce_scatter_base"):
            return [x[RANK * n:(RANK + 1) * n] for x in xs]
        return xs

    wants = [(mine(ins), reduce_ref(mine(ins), dt, rop))]
    if method == "all_reduce_coalesced":
        wants.append((extra, reduce_ref(extra, dt, rop)))
    if method == "reduce" and RANK != root:
        wants = []
    got = attempt(what, run, None)
    if got is None:
        return
    for i, (xs, want) in enumerate(wants):
        compare("%s [%d] against the reference" % (what, i), got[i], want,
                tolerance(xs, dt, rop, kind))
    if gloo_has(dt, rop) and method in ("all_reduce", "all_reduce_coalesced", "reduce"):
        ref = attempt(what + " through Gloo", run, GLOO)
        if ref is None:
            return
        for i, (xs, _) in enumerate(wants):
            compare("%s [%d] against Gloo" % (what, i), got[i], ref[i],
                    tolerance(xs, dt, rop, kind))


def reductions():
    for method in ("all_reduce", "all_reduce_coalesced", "reduce", "reduce_scatter",
                   "_reduce_scatter_base"):
        for dt in DTYPES:
            ops = [op for op in OPS if accepts(dt, op)]
            if dt in FLOATS:
                ops.append("exact")
            for op in ops:
                for n in counts():
                    reduction_case(method, dt, op, n)
    # What neither computes: a bitwise op on a float, an average of bools.
    for dt, op in ((F32, "BAND"), (F64, "BXOR"), (BF16, "BOR"), (torch.bool, "AVG")):
        refused("all_reduce %s %s" % (name(dt), op),
                lambda: dist.all_reduce(torch.ones(3, dtype=dt), op=getattr(R, op)),
                [op.lower(), name(dt)] if BACKEND == "baton" else [])


# ------------------------------------------------------------------ the moves


def splits(key):
    """S[p][q]: the rows rank p sends rank q in an all_to_all with split
    sizes; zeros among them, and rank 0 sends nothing at all when W > 1."""
    rnd = random.Random(zlib.crc32(key.encode()))
    s = [[rnd.choice((0, 0, 1, 2, 5)) for _ in range(W)] for _ in range(W)]
    if W > 1:
        s[0] = [0] * W
    return s


def move_cases(dt, n):
    """Each move through a group; yields (what, run(group) -> outputs,
    reference outputs, gloo has it)."""
    key = "%s/%d" % (name(dt), n)
    x = [gen("in/" + key, q, n, dt) for q in range(W)]
    for src in range(W):
        def bcast(g, src=src):
            t = x[RANK].clone() if RANK == src else torch.zeros(n, dtype=dt)
            dist.broadcast(t, src, group=g)
            return [t]
        yield "broadcast src=%d" % src, bcast, [x[src]], gloo_has(dt)

    def all_gather(g):
        outs = [torch.empty(n, dtype=dt) for _ in range(W)]
        dist.all_gather(outs, x[RANK], group=g)
        return outs
    # Gloo 1.13 dies of SIGFPE in an all_gather of zero elements.
    yield "all_gather", all_gather, x, gloo_has(dt) and n > 0

    def all_gather_base(g):
        out = torch.empty(n * W, dtype=dt)
        f = getattr(dist, "all_gather_into_tensor", None) if n % 2 else None
        (f or dist._all_gather_base)(out, x[RANK], group=g)
        return [out]
    yield "_all_gather_base", all_gather_base, [torch.cat(x)], False

    y = [gen("in2/" + key, q, (2, n + 1), dt) for q in range(W)]

    def all_gather_coalesced(g):
        outs = [[torch.empty(n, dtype=dt), torch.empty((2, n + 1), dtype=dt)] for _ in range(W)]
        dist.all_gather_coalesced(outs, [x[RANK], y[RANK]], group=g)
        return [t for pair in outs for t in pair]
    yield "all_gather_coalesced", all_gather_coalesced, \
        [t for q in range(W) for t in (x[q], y[q])], gloo_has(dt) and n > 0

    dst = W - 1

    def gather(g):
        outs = [torch.empty(n, dtype=dt) for _ in range(W)] if RANK == dst else None
        dist.gather(x[RANK], outs, dst=dst, group=g)
        return outs or []
    yield "gather dst=%d" % dst, gather, x if RANK == dst else [], gloo_has(dt)

    pieces = [gen("scatter/" + key + "/%d" % q, 0, n, dt) for q in range(W)]

    def scatter(g):
        out = torch.empty(n, dtype=dt)
        dist.scatter(out, pieces if RANK == 0 else None, src=0, group=g)
        return [out]
    yield "scatter src=0", scatter, [pieces[RANK]], gloo_has(dt)

    big = [gen("a2a/" + key, q, n * W, dt) for q in range(W)]

    def a2a_equal(g):
        out = torch.empty(n * W, dtype=dt)
        dist.all_to_all_single(out, big[RANK], group=g)
        return [out]
    yield "all_to_all_single", a2a_equal, \
        [torch.cat([big[q][RANK * n:(RANK + 1) * n] for q in range(W)])], gloo_has(dt)

    s = splits("a2av/" + key)
    width = max(n, 1) if n < 100 else 3
    rows = [gen("a2av/" + key, p, (sum(s[p]), width), dt) for p in range(W)]

    def block(p, q):  # the rows p sends q
        start = sum(s[p][:q])
        return rows[p][start:start + s[p][q]]

    def a2a_split(g):
        out = torch.empty((sum(s[p][RANK] for p in range(W)), width), dtype=dt)
        dist.all_to_all_single(out, rows[RANK], [s[p][RANK] for p in range(W)], s[RANK], group=g)
        return [out]
    yield "all_to_all_single with split sizes %s" % s, a2a_split, \
        [torch.cat([block(p, RANK) for p in range(W)])], gloo_has(dt)

    def a2a_list(g):
        outs = [torch.empty((s[p][RANK], width), dtype=dt) for p in range(W)]
        dist.all_to_all(outs, [block(RANK, q).clone() for q in range(W)], group=g)
        return outs
    yield "all_to_all sizes %s" % s, a2a_list, [block(p, RANK) for p in range(W)], False


def moves():
    for dt in DTYPES:
        for n in counts():
            for what, run, want, gloo in move_cases(dt, n):
                if BACKEND == "gloo" and not gloo:
                    continue  # what Gloo lacks, or dies of
                what = "%s %s n=%d" % (what, name(dt), n)
                got = attempt(what, run, None)
                if got is None:
                    continue
                T.check(len(got) == len(want), what, "%d outputs, want %d" % (len(got), len(want)))
                for i, (a, b) in enumerate(zip(got, want)):
                    compare("%s [%d] against the reference" % (what, i), a, b)
                if gloo:
                    for i, (a, b) in enumerate(zip(got, attempt(what, run, GLOO) or [])):
                        compare("%s [%d] against Gloo" % (what, i), a, b)
    for dt in DTYPES:
        point_to_point(dt, 13)
        point_to_point(dt, 40000)
    barrier()


def point_to_point(dt, n):
    """A ring of isend/irecv with two tags received in the opposite order,
    then blocking send/recv between pairs (2k, 2k+1)."""
    if W == 1:
        return
    key = "p2p/%s/%d" % (name(dt), n)
    nxt, prv = (RANK + 1) % W, (RANK - 1) % W
    for group, who in ((None, BACKEND), (GLOO, "Gloo")):
        if who == "Gloo" and dt not in GLOO_DTYPES:
            continue
        a, b = torch.empty(n, dtype=dt), torch.empty(n + 1, dtype=dt)
        works = [dist.irecv(b, prv, group=group, tag=2), dist.irecv(a, prv, group=group, tag=1),
                 dist.isend(gen(key + "/1", RANK, n, dt), nxt, group=group, tag=1),
                 dist.isend(gen(key + "/2", RANK, n + 1, dt), nxt, group=group, tag=2)]
        for w in reversed(works):
            w.wait()
        what = "isend/irecv ring %s n=%d through %s" % (name(dt), n, who)
        compare(what + ", tag 1", a, gen(key + "/1", prv, n, dt))
        compare(what + ", tag 2", b, gen(key + "/2", prv, n + 1, dt))
        peer = RANK ^ 1
        if peer < W:
            t = torch.empty(n, dtype=dt)
            if RANK % 2 == 0:
                dist.send(gen(key + "/s", RANK, n, dt), peer, group=group, tag=5)
                dist.recv(t, peer, group=group, tag=6)
            else:
                dist.recv(t, peer, group=group, tag=5)
                dist.send(gen(key + "/s", RANK, n, dt), peer, group=group, tag=6)
            compare("send/recv %s n=%d through %s" % (name(dt), n, who), t,
                    gen(key + "/s", peer, n, dt))


def barrier():
    dist.barrier()
    w = dist.barrier(async_op=True)
    w.wait()
    T.check(w.is_completed(), "barrier(async_op=True): completed after wait()")


# ------------------------------------------------------------------ groups


def groups():
    """Subsets made by new_group on every rank, each through the backend
    under test and Gloo: members compare with the reference and Gloo, a rank
    that is not in a group gets GroupMember.NON_GROUP_MEMBER and calls that
    do nothing."""
    subsets = [list(range(W)), [0], [W - 1], list(range(0, W, 2)), list(range(1, W, 2)),
               list(range(W - 1)), list(range(1, W))]
    for i, ranks in enumerate(subsets):
        if not ranks:
            continue
        g = dist.new_group(ranks, backend=BACKEND)
        gg = dist.new_group(ranks, backend="gloo")
        what = "new_group(%s)" % ranks
        if RANK not in ranks:
            T.check(g == dist.GroupMember.NON_GROUP_MEMBER, what + ": a non-member's handle",
                    repr(g))
            t = torch.full((4,), 7.0)
            T.check(dist.all_reduce(t, group=g) is None and bool((t == 7).all()),
                    what + ": all_reduce on a rank outside it does nothing")
            continue
        T.check(dist.get_world_size(g) == len(ranks) and
                dist.get_rank(g) == ranks.index(RANK), what + ": its size and this rank's rank",
                "%d, %d" % (dist.get_world_size(g), dist.get_rank(g)))
        if BACKEND == "baton":
            T.check(dist.get_backend(g) == "baton", what + ": get_backend", dist.get_backend(g))
        for dt, op in ((F32, "exact"), (F32, "SUM"), (torch.int32, "MAX"), (torch.int64, "BXOR"),
                       (BF16, "MIN")):
            rop = "SUM" if op == "exact" else op
            if not tested_has("all_reduce", dt, rop):
                continue
            key = "group%d/%s/%s" % (i, name(dt), op)
            xs = [gen(key, q, 1000, dt, op) for q in ranks]
            t = xs[ranks.index(RANK)].clone()
            dist.all_reduce(t, op=getattr(R, rop), group=g)
            tol = tolerance(xs, dt, rop, "exact" if op == "exact" else None)
            compare("%s all_reduce %s %s" % (what, name(dt), op), t, reduce_ref(xs, dt, rop), tol)
            if gloo_has(dt, rop):
                u = xs[ranks.index(RANK)].clone()
                dist.all_reduce(u, op=getattr(R, rop), group=gg)
                compare("%s all_reduce %s %s against Gloo" % (what, name(dt), op), t, u, tol)
        xs = [gen("group%d/bcast" % i, q, 100, torch.int64) for q in ranks]
        t = xs[ranks.index(RANK)].clone()
        dist.broadcast(t, ranks[-1], group=g)  # src is the global rank
        compare(what + " broadcast from global rank %d" % ranks[-1], t, xs[-1])
        outs = [torch.empty(100, dtype=torch.int64) for _ in ranks]
        dist.all_gather(outs, xs[ranks.index(RANK)], group=g)
        compare(what + " all_gather", torch.stack(outs), torch.stack(xs))
        dist.barrier(group=g)
    # Many groups of the whole world, one after the other, each used once.
    for i in range(12):
        g = dist.new_group(backend=BACKEND)
        t = torch.full((3,), float(RANK + i))
        dist.all_reduce(t, group=g)
        compare("group %d of 12 more of the world" % i, t,
                torch.full((3,), float(sum(range(W)) + W * i)))


# ------------------------------------------------------------------ in flight


def in_flight():
    """Several calls issued with async_op=True before any is waited for,
    then waited in an order drawn per rank (so ranks wait in different
    orders), through wait(), the future, or is_completed() alone."""
    big = 1 << 18
    half = BF16 if tested_has("all_to_all_single", BF16) else F16
    for rnd in range(4):
        key = "async/%d" % rnd
        xs = [gen(key + "/ar", q, big, F32, "exact") for q in range(W)]
        ys = [gen(key + "/ag", q, 1000, torch.int32) for q in range(W)]
        zs = [gen(key + "/a2a", q, 7 * W, half) for q in range(W)]
        rs = [gen(key + "/rs", q, 5 * W, torch.int64, "MAX") for q in range(W)]
        a = xs[RANK].clone()
        ag = [torch.empty(1000, dtype=torch.int32) for _ in range(W)]
        b = torch.full((50,), float(RANK))
        a2a = torch.empty(7 * W, dtype=half)
        rs_out = torch.empty(5, dtype=torch.int64)
        c = torch.tensor([RANK + rnd], dtype=torch.int64)
        works = [("all_reduce", dist.all_reduce(a, async_op=True)),
                 ("all_gather", dist.all_gather(ag, ys[RANK], async_op=True)),
                 ("broadcast", dist.broadcast(b, W - 1, async_op=True)),
                 ("all_to_all_single", dist.all_to_all_single(a2a, zs[RANK], async_op=True)),
                 ("barrier", dist.barrier(async_op=True)),
                 ("all_reduce MAX", dist.all_reduce(c, op=R.MAX, async_op=True))]
        if tested_has("_reduce_scatter_base"):
            works.append(("_reduce_scatter_base",
                          dist._reduce_scatter_base(rs_out, rs[RANK], op=R.MAX, async_op=True)))
        if W > 1:  # messages in flight beside the collectives
            p_in = torch.empty(300, dtype=F64)
            works.append(("irecv", dist.irecv(p_in, (RANK - 1) % W, tag=9)))
            works.append(("isend", dist.isend(gen(key + "/p2p", RANK, 300, F64), (RANK + 1) % W,
                                              tag=9)))
        order = list(range(len(works)))
        random.Random(RANK * 101 + rnd).shuffle(order)
        futures = {}
        for i in order:
            wname, w = works[i]
            how = "wait" if rnd == 0 else "future" if rnd == 1 else "poll" if rnd == 2 else \
                ("wait", "future", "poll")[i % 3]
            if how == "poll" and wname.startswith("i") and BACKEND == "gloo":
                how = "wait"  # Gloo's send and recv works complete only in wait()
            if how == "future" and not wname.startswith("i"):
                futures[wname] = w.get_future().wait()
                w.wait()  # Gloo marks the work completed just after its future
            elif how == "poll":
                deadline = time.monotonic() + 60
                while not w.is_completed() and time.monotonic() < deadline:
                    time.sleep(0.0005)
                T.check(w.is_completed(), "round %d: %s completes without wait()" % (rnd, wname))
                w.wait()
            else:
                w.wait()
            T.check(w.is_completed(), "round %d: %s is_completed() after it was waited (%s)" % (
                rnd, wname, how))
        what = "in flight, round %d: " % rnd
        compare(what + "all_reduce", a, reduce_ref(xs, F32, "SUM"))
        compare(what + "all_gather", torch.stack(ag), torch.stack(ys))
        compare(what + "broadcast", b, torch.full((50,), float(W - 1)))
        compare(what + "all_to_all_single", a2a,
                torch.cat([zs[q][RANK * 7:(RANK + 1) * 7] for q in range(W)]))
        if tested_has("_reduce_scatter_base"):
            compare(what + "_reduce_scatter_base", rs_out,
                    reduce_ref([r[RANK * 5:(RANK + 1) * 5] for r in rs], torch.int64, "MAX"))
        compare(what + "all_reduce MAX", c, torch.tensor([W - 1 + rnd]))
        if W > 1:
            compare(what + "irecv", p_in, gen(key + "/p2p", (RANK - 1) % W, 300, F64))
        if "all_reduce" in futures:
            f = futures["all_reduce"]
            T.check(isinstance(f, list) and len(f) == 1 and f[0] is not None and
                    torch.equal(f[0], a), what + "the future's value is [the output tensor]")
        if "all_gather" in futures:
            T.check(len(futures["all_gather"]) >= 1, what + "all_gather's future has a value")
    # A future chained with then(), never waited through the work (DDP's
    # comm hook does this), and is_success after wait.
    t = torch.ones(10)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future().then(lambda f: f.value()[0] * 2)
    compare("get_future().then(...)", fut.wait(), torch.full((10,), 2.0 * W))
    w.wait()
    T.check(w.is_success(), "is_success() after wait()")


def dropped():
    """Works dropped without a wait (isend, irecv, collectives with
    async_op=True): each is freed when its request completes, so that many
    of them in a loop leave nothing held, and the group still works and is
    destroyed cleanly. In a group of its own."""
    if BACKEND != "baton" or W == 1:
        return
    in_flight = sys.modules["baton._baton_torch"]._works_in_flight
    g = dist.new_group(backend=BACKEND)
    nxt, prv = (RANK + 1) % W, (RANK - 1) % W
    rounds = 300
    for i in range(rounds):
        dist.irecv(torch.empty(1000), prv, group=g, tag=4)
        dist.isend(torch.full((1000,), float(i)), nxt, group=g, tag=4)
        if i % 3 == 0:
            dist.all_reduce(torch.ones(100), group=g, async_op=True)
            dist.all_gather([torch.empty(10) for _ in range(W)], torch.ones(10), group=g,
                            async_op=True)
    dist.barrier(group=g)  # every rank has made all its calls
    deadline = time.monotonic() + 30
    while in_flight(g) > 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    T.check(in_flight(g) == 0, "%d rounds of dropped isend, irecv and collectives: all freed once "
            "complete" % rounds, "%d works still held" % in_flight(g))
    t = torch.full((5,), float(RANK))
    dist.all_reduce(t, group=g)
    compare("all_reduce after the dropped works", t, torch.full((5,), float(sum(range(W)))))
    r = torch.empty(3)
    works = [dist.irecv(r, prv, group=g, tag=5),
             dist.isend(torch.full((3,), float(RANK)), nxt, group=g, tag=5)]
    for w in works:
        w.wait()
    compare("isend/irecv after the dropped works", r, torch.full((3,), float(prv)))
    dist.destroy_process_group(g)


# ------------------------------------------------------------------ registered memory


def baton_maps():
    """How many mappings of this process's own registered memory it has
    (baton's files /dev/shm/baton-mem-PID-...; a peer's stay mapped until
    every rank has freed its own), to see that a tensor's memory is given
    back."""
    mine = "/baton-mem-%d-" % os.getpid()
    with open("/proc/self/maps") as f:
        return sum(1 for line in f if mine in line)


def host_identity():
    """What baton takes a host to be: BATON_HOSTID where it is set, else
    the kernel's boot id with this process's network and PID namespaces."""
    if os.environ.get("BATON_HOSTID"):
        return os.environ["BATON_HOSTID"]
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    return "%s/%d/%d" % (boot, os.stat("/proc/self/ns/net").st_ino,
                         os.stat("/proc/self/ns/pid").st_ino)


def registered():
    """baton.torch.empty: tensors over registered memory. The calls that work
    on the caller's tensors (all_reduce, broadcast, _all_gather_base,
    _reduce_scatter_base, all_to_all_single), in and out of place, on
    registered tensors on every rank and on every other rank only (the rest
    ordinary: the staged path), x float32, bfloat16, int64, past the flat
    algorithm's 64 KiB and not, against the reference; then the memory given
    back once the tensor is gone (a call in flight holding it back), a tensor
    outliving its group, and the refusals. In a group of its own."""
    if BACKEND != "baton":
        return
    bt = sys.modules["baton.torch"]
    g = dist.new_group(backend=BACKEND)
    for mode in ("every rank", "every other rank"):
        use = mode == "every rank" or RANK % 2 == 0

        def alloc(k, dt):  # collective on every rank; used where `use`
            t = bt.empty(k, dtype=dt, group=g)
            return t if use else torch.empty(k, dtype=dt)
        for dt in (F32, BF16, torch.int64):
            for n in (13, 40000):
                key = "registered/%s/%d" % (name(dt), n)
                what = "registered on %s: %%s %s n=%d" % (mode, name(dt), n)
                ins = [gen(key, q, n * W, dt, "exact") for q in range(W)]
                x = alloc(n * W, dt)
                x.copy_(ins[RANK])
                dist.all_reduce(x, group=g)
                compare(what % "all_reduce in place", x, reduce_ref(ins, dt, "SUM"))
                x = alloc(n * W, dt)
                x.copy_(ins[RANK])
                out = alloc(n, dt)
                dist._reduce_scatter_base(out, x, group=g)
                mine = [t[RANK * n:(RANK + 1) * n] for t in ins]
                compare(what % "_reduce_scatter_base", out, reduce_ref(mine, dt, "SUM"))
                part = alloc(n, dt)
                part.copy_(ins[RANK][:n])
                full = alloc(n * W, dt)
                dist._all_gather_base(full, part, group=g)
                compare(what % "_all_gather_base", full, torch.cat([t[:n] for t in ins]))
                dist._all_gather_base(full, full[RANK * n:(RANK + 1) * n], group=g)
                compare(what % "_all_gather_base in place", full,
                        torch.cat([t[:n] for t in ins]))
                b = alloc(n, dt)
                b.copy_(ins[RANK][:n])
                dist.broadcast(b, W - 1, group=g)
                compare(what % "broadcast", b, ins[W - 1][:n])
                out = alloc(n * W, dt)
                dist.all_to_all_single(out, x, group=g)
                compare(what % "all_to_all_single", out,
                        torch.cat([t[RANK * n:(RANK + 1) * n] for t in ins]))
                del x, out, part, full, b
    # Given back: a tensor gone while a call is in flight waits for the
    # next call; then the mappings are what they were.
    # Shared on one host with shared memory; plain memory otherwise (baton.h).
    # One host is what baton takes it to be: one BATON_HOSTID, or else one
    # kernel, network namespace and PID namespace (src/bootstrap.c).
    hosts = [None] * W
    dist.all_gather_object(hosts, host_identity(), group=g)
    shared = W > 1 and len(set(hosts)) == 1 and os.environ.get("BATON_TRANSPORT") != "tcp"
    dist.barrier(group=g)
    before = baton_maps()
    x = bt.empty(1 << 18, group=g)
    T.check((baton_maps() > before) == shared, "baton.torch.empty maps registered memory "
            "where the group is on one host, plain memory elsewhere",
            "%d mappings before, %d after, %s" % (before, baton_maps(),
                                                  "shared" if shared else "not shared"))
    y = torch.ones(100)
    work = dist.all_reduce(y, group=g, async_op=True)
    del x  # with the all_reduce perhaps in flight
    work.wait()
    dist.all_reduce(torch.ones(1), group=g)  # the next call frees it
    T.check(baton_maps() <= before, "a registered tensor's memory given back when it is gone",
            "%d mappings, %d before" % (baton_maps(), before))
    compare("all_reduce beside a registered tensor gone", y, torch.full((100,), float(W)))
    # A view keeps the memory; the tensor outlives its group.
    v = bt.empty(4, 5, dtype=F64, group=g)[1:3]
    v.fill_(RANK)
    dist.all_reduce(v, group=g)
    compare("all_reduce on a view of a registered tensor", v,
            torch.full((2, 5), float(sum(range(W))), dtype=F64))
    refused("baton.torch.empty with a call in flight",
            lambda: (dist.all_reduce(torch.ones(10), group=g, async_op=True),
                     bt.empty(10, group=g)), ["in flight", "wait"])
    dist.barrier(group=g)
    dist.destroy_process_group(g)
    v += 1
    compare("a registered tensor after its group is destroyed", v,
            torch.full((2, 5), float(sum(range(W)) + 1), dtype=F64))
    refused("baton.torch.empty on a Gloo group", lambda: bt.empty(10, group=GLOO),
            ["not a baton process group"])
    refused("baton.torch.empty of a negative size", lambda: bt.empty(3, -1),
            ["ints >= 0"])


# ------------------------------------------------------------------ local memory


def peer_blocks():
    """How many of its peers' local blocks this process maps: the
    memfd:baton-local mappings whose inode is none of its own blocks'
    (each of which it holds open; a peer's descriptor is closed once
    mapped)."""
    own = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd).startswith("/memfd:baton-local"):
                own.add(os.stat("/proc/self/fd/" + fd).st_ino)
        except OSError:
            pass
    with open("/proc/self/maps") as f:
        inodes = {int(line.split()[4]) for line in f if "memfd:baton-local" in line}
    return len(inodes - own)


def local_memory():
    """BATON_MEM_LOCAL=1: torch's tensors of 256 KiB and more are baton's
    local memory; calls on them are right in and out of place, and on one
    host (with shared memory) the peers' blocks get mapped here, which is
    direct running on them. A small tensor stays torch's own."""
    if BACKEND != "baton" or os.environ.get("BATON_MEM_LOCAL") != "1":
        return
    ext = sys.modules["baton.torch"]._ext
    held = ext._local_blocks_held()
    small = torch.empty(1000)
    T.check(ext._local_blocks_held() == held, "a 4000-byte tensor is torch's own memory")
    hosts = [None] * W
    dist.all_gather_object(hosts, host_identity())
    # Direct serves a group on one host with shared memory (baton.h).
    shared = W > 1 and len(set(hosts)) == 1 and os.environ.get("BATON_TRANSPORT") != "tcp"
    n = 1 << 18  # 1 MiB of float32 a rank's share
    ins = [gen("local/%d" % q, q, n * W, F32, "exact") for q in range(W)]
    x = ins[RANK].clone()
    T.check(ext._local_blocks_held() > held, "a 1 MiB tensor lies in baton's local memory",
            "%d blocks held before, %d after" % (held, ext._local_blocks_held()))
    y = torch.empty_like(x)
    dist.all_reduce(x)
    compare("all_reduce in place on a local-memory tensor", x, reduce_ref(ins, F32, "SUM"))
    out = torch.empty(n)
    dist._reduce_scatter_base(out, ins[RANK].clone())
    compare("_reduce_scatter_base on local-memory tensors", out,
            reduce_ref([t[RANK * n:(RANK + 1) * n] for t in ins], F32, "SUM"))
    dist.all_to_all_single(y, ins[RANK].clone())
    compare("all_to_all_single on local-memory tensors", y,
            torch.cat([t[RANK * n:(RANK + 1) * n] for t in ins]))
    dist._all_gather_base(y, ins[RANK][:n].clone())
    compare("_all_gather_base on local-memory tensors", y, torch.cat([t[:n] for t in ins]))
    b = ins[RANK].clone()
    dist.broadcast(b, W - 1)
    compare("broadcast on a local-memory tensor", b, ins[W - 1])
    peers = peer_blocks()  # mapped by these calls, or by earlier ones on the same blocks
    T.check((peers > 0) == shared, "the peers' local blocks mapped where the group is one host",
            "%d of the peers' blocks mapped, %s" % (peers, "one host" if shared else "not one host"))
    del small


# ------------------------------------------------------------------ refusals


def refused(what, fn, needles):
    """fn raises RuntimeError (ValueError where torch's own layer refuses),
    and its text names the problem: every needle, case-insensitively."""
    try:
        r = fn()
        if r is not None and hasattr(r, "wait"):
            r.wait()
    except (RuntimeError, ValueError) as e:
        text = str(e)
        missing = [s for s in needles if s.lower() not in text.lower()]
        return T.check(not missing, "refusal of " + what,
                       "the error does not name %s: %s" % (missing, text))
    return T.check(False, "refusal of " + what, "no error")


def refusals():
    if BACKEND != "baton":
        if RANK == 0:  # not a skip: they are not part of a test of the test
            print("refusals: baton's; --backend %s takes some of them" % BACKEND, flush=True)
        return
    pg = dist.distributed_c10d._get_default_group()
    premul = dist._make_nccl_premul_sum(2.0)
    refused("PREMUL_SUM all_reduce", lambda: dist.all_reduce(torch.ones(3), op=premul),
            ["PREMUL_SUM"])
    refused("PREMUL_SUM reduce", lambda: dist.reduce(torch.ones(3), 0, op=premul), ["PREMUL_SUM"])
    refused("PREMUL_SUM _reduce_scatter_base",
            lambda: dist._reduce_scatter_base(torch.empty(1), torch.ones(W), op=premul),
            ["PREMUL_SUM"])
    sp = torch.eye(3).to_sparse()
    refused("a sparse tensor in all_reduce", lambda: dist.all_reduce(sp), ["tensors[0]", "sparse"])
    refused("a sparse tensor in broadcast", lambda: dist.broadcast(sp, 0), ["sparse"])
    refused("a meta tensor (not on the CPU) in all_reduce",
            lambda: dist.all_reduce(torch.empty(3, device="meta")), ["meta", "CPU"])
    nc = torch.zeros(4, 4).t()
    refused("a non-contiguous tensor in all_reduce", lambda: dist.all_reduce(nc),
            ["tensors[0]", "not contiguous"])
    refused("a non-contiguous tensor in broadcast", lambda: dist.broadcast(nc, 0),
            ["not contiguous"])
    refused("a non-contiguous output of all_gather",
            lambda: dist.all_gather([torch.zeros(4, 4).t() for _ in range(W)], torch.ones(4, 4)),
            ["output", "not contiguous"])
    refused("a non-contiguous input of all_to_all_single",
            lambda: dist.all_to_all_single(torch.empty(2 * W, 2), torch.zeros(2, 2 * W).t()),
            ["input", "not contiguous"])
    # A negated view (torch._neg_view) never reaches a backend in 1.13: the
    # dispatcher hands the process group a resolved copy, and the result is
    # lost, with Gloo as with baton. Nothing to check here.
    cx = torch.ones(3, dtype=torch.complex64)
    refused("a complex64 tensor in broadcast", lambda: dist.broadcast(cx, 0),
            ["ComplexFloat", "does not support"])
    refused("a complex128 tensor in ProcessGroup.allreduce",
            lambda: pg.allreduce([cx.to(torch.complex128)]), ["ComplexDouble", "does not support"])
    refused("a complex64 tensor in send", lambda: dist.send(cx, (RANK + 1) % W) if W > 1 else
            pg.allgather([[cx]], [cx]), ["ComplexFloat"])
    # Sizes that do not match, each found on this rank before anything moves.
    refused("all_gather with an output of the wrong size",
            lambda: dist.all_gather([torch.empty(5) for _ in range(W)], torch.ones(4)),
            ["5 elements", "4"])
    refused("all_gather with W+1 outputs",
            lambda: dist.all_gather([torch.empty(4) for _ in range(W + 1)], torch.ones(4)),
            [str(W + 1), "one per rank"])
    refused("all_gather with an output of another dtype",
            lambda: dist.all_gather([torch.empty(4, dtype=F64) for _ in range(W)], torch.ones(4)),
            ["dtype"])
    refused("_all_gather_base into a tensor too small",
            lambda: dist._all_gather_base(torch.empty(4 * W - 1), torch.ones(4)),
            [str(4 * W - 1)])
    refused("_reduce_scatter_base from an input that is not W outputs",
            lambda: dist._reduce_scatter_base(torch.empty(4), torch.ones(4 * W + 1)),
            [str(4 * W + 1)])
    refused("reduce_scatter with W+1 inputs",
            lambda: dist.reduce_scatter(torch.empty(2), [torch.ones(2)] * (W + 1)),
            [str(W + 1)])
    refused("all_to_all_single with split sizes that do not add up",
            lambda: dist.all_to_all_single(torch.empty(W), torch.ones(W), [1] * W, [2] * W),
            ["add up to"])
    refused("all_to_all_single whose rows do not split evenly",
            lambda: dist.all_to_all_single(torch.empty(W + 1), torch.ones(W + 1)) if W > 1 else
            dist.all_to_all_single(torch.empty(2), torch.ones(3)),
            ["elements" if W == 1 else "split"])
    refused("all_reduce_coalesced of mixed dtypes",
            lambda: dist.all_reduce_coalesced([torch.ones(2), torch.ones(2, dtype=F64)]),
            ["dtype"])
    refused("all_gather_coalesced with outputs of the wrong size",
            lambda: dist.all_gather_coalesced([[torch.empty(3)] for _ in range(W)],
                                              [torch.ones(2)]), ["3", "2"])
    if W > 1:
        refused("recv without src", lambda: dist.recv(torch.empty(2)), ["src"])
    T.skip("CUDA tensors: this torch has no CUDA (%s); the device check ran on a meta tensor"
           % torch.__version__) if not torch.cuda.is_available() else refused(
        "a CUDA tensor", lambda: dist.all_reduce(torch.ones(3, device="cuda")), ["cuda"])


def errors_between_ranks():
    """A count that differs between ranks fails on every rank with baton's
    error text, and a group's own timeout bounds a call that a rank makes
    alone. Each in a group of its own, used for nothing else afterwards."""
    if BACKEND != "baton" or W == 1:
        return
    g = dist.new_group(backend=BACKEND)
    try:
        dist.all_reduce(torch.ones(5 + RANK), group=g)
        T.check(False, "all_reduce of 5+rank elements on each rank", "no error")
    except RuntimeError as e:
        T.check("baton all_reduce" in str(e) or "baton allreduce" in str(e),
                "a count that differs between ranks: the error is baton's", str(e))
        T.check("MISMATCH" in str(e).upper() and "rank" in str(e),
                "a count that differs between ranks: the error names the mismatch and a rank",
                str(e))
    # The default group's timeout is 120 s; this group's is 2 s. Rank 0 calls
    # alone: its error must come from the group's timeout, long before the
    # default's (the bound below is 30 times the group's: which timeout
    # applied, not how fast baton is).
    g = dist.new_group(backend=BACKEND, timeout=datetime.timedelta(seconds=2))
    if RANK == 0:
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(3), group=g)
            T.check(False, "all_reduce on rank 0 alone in a group of timeout 2 s", "no error")
        except RuntimeError as e:
            took = time.monotonic() - start
            print("rank 0 alone in a group of timeout 2 s: RuntimeError after %.2f s: %s" % (
                took, str(e).split("\n")[0]), flush=True)
            T.check(took < 60, "the group's timeout (2 s) bounds its call", "%.1f s" % took)
            T.check("time" in str(e).lower(), "the group's timeout: the error says so", str(e))


def wait_deadline():
    """work.wait(timeout): rank 0 waits 50 ms for an all_reduce and a
    receive that its peers join 300 ms late. The wait must raise, saying
    it timed out, after 50 ms and well before the peers come, and the same
    work must then complete with the right result."""
    if BACKEND != "baton" or W == 1:
        return
    for what in ("all_reduce", "recv"):
        dist.barrier()
        if RANK != 0:
            time.sleep(0.3)
        t = torch.ones(4)
        if what == "all_reduce":
            w = dist.all_reduce(t, async_op=True)
        elif RANK == 0:
            w = dist.irecv(t, 1, tag=11)
        else:
            w = dist.isend(torch.full((4,), 7.0), 0, tag=11) if RANK == 1 else None
        want = float(W) if what == "all_reduce" else 7.0
        if RANK == 0:
            start = time.monotonic()
            try:
                w.wait(datetime.timedelta(milliseconds=50))
                T.check(False, "%s: wait(50 ms) with the peers 300 ms late" % what, "no error")
            except RuntimeError as e:
                took = time.monotonic() - start
                T.check(0.05 <= took < 0.25 and "timed out" in str(e),
                        "%s: wait(50 ms) with the peers 300 ms late raises after 50 ms" % what,
                        "%.3f s: %s" % (took, e))
        if w is not None:
            w.wait()
        if RANK == 0 or what == "all_reduce":
            T.check(bool((t == want).all()), "%s: the work completes after its wait timed out"
                    % what, str(t))


# ------------------------------------------------------------------ main


def main():
    global GLOO
    start = time.monotonic()
    if BACKEND == "baton":
        T.check(dist.get_backend() == "baton", "get_backend() of the default group",
                dist.get_backend())
        T.check(dist.distributed_c10d._get_default_group().name() == "baton",
                "the process group's getBackendName()")
    for part in (reductions, moves, groups, in_flight, dropped, registered, local_memory, refusals,
                 wait_deadline, errors_between_ranks):
        t0 = time.monotonic()
        part()
        if RANK == 0:
            print("%s: %.1f s" % (part.__name__, time.monotonic() - t0), flush=True)
    # Everybody's counts, through Gloo (which works whatever baton did).
    c = torch.tensor([T.passed, T.failed, T.skipped], dtype=torch.int64)
    dist.all_reduce(c, group=GLOO)
    passed, failed, skipped = (int(v) for v in c)
    if RANK == 0:
        print("test_torch.py, backend %s beside Gloo, %d ranks, %.0f s: %d passed, %d failed, "
              "%d skipped" % (BACKEND, W, time.monotonic() - start, passed, failed, skipped),
              flush=True)
    dist.barrier(group=GLOO)
    dist.destroy_process_group()
    # Let go of the Gloo group before finalisation (see test_torch_ddp.py).
    GLOO = None
    gc.collect()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
