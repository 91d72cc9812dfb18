"""tests/test_python.py - the Python binding, under baton-run at any rank count.

    PYTHONPATH=python build/bin/baton-run -n 4 /usr/bin/python3 tests/test_python.py
    BATON_TIMEOUT=1 PYTHONPATH=python build/bin/baton-run -n 2 /usr/bin/python3 tests/test_python.py stall

Every collective, every dtype and op, in and out of place, against a NumPy
reference built from every rank's input (each rank can make any rank's input).
The inputs are small integers, so every sum, product and average by 1, 2 or 4
ranks is exact in every dtype and the comparison is bit for bit whatever the
order of reduction. Then the error paths: each bad argument raises the
exception that names it, and a failure inside the library raises BatonError
with the error's name and baton_comm_last_error(). Then split and dup,
and comm.empty (registered memory).
`stall` mode: rank 0's
peers stay away from a collective, and rank 0 must get BATON_ETIMEDOUT.
Each rank prints `N passed, M failed` and exits 1 on a failure.
"""
import os
import subprocess
import sys
import time

import numpy as np

import baton

passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("rank %d FAIL: %s %s" % (comm.rank, name, detail), flush=True)


def raises(name, exc, fragment, fn, *args, **kw):
    """fn(*args, **kw) must raise exc with `fragment` in its message."""
    try:
        fn(*args, **kw)
    except exc as e:
        check(name, fragment in str(e), "message %r lacks %r" % (str(e), fragment))
        return e
    except Exception as e:  # noqa: BLE001 - any other exception is the failure itself
        check(name, False, "raised %s: %s instead of %s" % (type(e).__name__, e, exc.__name__))
        return None
    check(name, False, "raised nothing, expected %s" % exc.__name__)
    return None


def values(rank, count, dtype):
    """Rank `rank`'s input: integers in -2..2 (0..3 unsigned), as float64."""
    i = np.arange(count, dtype=np.int64)
    v = (i * 7 + rank * 3) % (4 if dtype.startswith("u") else 5)
    return (v if dtype.startswith("u") else v - 2).astype(np.float64)


def stored(x, dtype):
    """float64 values in the storage of baton dtype `dtype`."""
    if dtype == "bfloat16":
        return baton.to_bfloat16(x.astype(np.float32))
    return x.astype(baton.DTYPES[dtype][1])


BITWISE = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
FLOATS = ("float16", "bfloat16", "float32", "float64")


def valid(op, dtype):
    """Whether baton reduces dtype with op: no bitwise floats, no bool average."""
    if op in BITWISE:
        return dtype not in FLOATS
    return not (dtype == "bool" and op == "avg")


def reference(op, dtype, count, size):
    every = np.stack([values(r, count, dtype) for r in range(size)])
    if dtype == "bool":  # true when nonzero; sum and max are or, prod and min and
        every = every != 0
        op = {"sum": "bor", "max": "bor", "prod": "band", "min": "band"}.get(op, op)
    if op in BITWISE:
        return stored(BITWISE[op].reduce(every.astype(np.int64), axis=0), dtype)
    if op == "avg":
        s = every.sum(axis=0) / size
        return stored(np.trunc(s) if "int" in dtype else s, dtype)
    return stored({"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}[op](every, axis=0),
                  dtype)


def same(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def test_allreduce(counts):
    for dtype in baton.DTYPES:
        kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
        for op in baton.OPS:
            if not valid(op, dtype):
                e = raises("allreduce %s %s refused" % (dtype, op), baton.BatonError, op,
                           comm.allreduce, stored(values(comm.rank, 4, dtype), dtype), op=op, **kw)
                check("allreduce %s %s: EINVAL naming both" % (dtype, op),
                      e is not None and e.name == "BATON_EINVAL" and dtype in e.detail,
                      repr(e))
                continue
            for count in counts:
                name = "allreduce %s %s count %d" % (dtype, op, count)
                want = reference(op, dtype, count, comm.size)
                a = stored(values(comm.rank, count, dtype), dtype)
                keep = a.copy()
                got = comm.allreduce(a, op=op, **kw)
                check(name + " new out", same(got, want), "got %s want %s" % (got[:8], want[:8]))
                check(name + " input untouched", same(a, keep))
                out = np.zeros_like(a)
                r = comm.allreduce(a, op=op.upper(), out=out, **kw)
                check(name + " given out", r is out and same(out, want))
                r = comm.allreduce(a, op=op, out=a, **kw)
                check(name + " in place", r is a and same(a, want))
    # Shapes other than 1-D come back in their own shape.
    a = np.full((3, 5), comm.rank + 1, np.int32)
    got = comm.allreduce(a, op="max")
    check("allreduce 2-D", got.shape == (3, 5) and (got == comm.size).all(), str(got))
    got = comm.allreduce(np.array(float(comm.rank)), op="sum")
    check("allreduce 0-d", got.shape == () and got == comm.size * (comm.size - 1) / 2, str(got))
    # bool arrays whose bytes are not 0 or 1 (a view of other bytes): true,
    # and the results are proper 0 or 1 bytes.
    raw = np.array([comm.rank % 3, 2, 255, 1, 0, 128, 7, 0], np.uint8)
    every = np.array([[r % 3, 2, 255, 1, 0, 128, 7, 0] for r in range(comm.size)]) != 0
    for op, want in (("sum", every.any(0)), ("prod", every.all(0)), ("bxor", every.sum(0) % 2)):
        got = comm.allreduce(raw.view(np.bool_), op=op)
        check("allreduce bool %s of bytes other than 0 and 1" % op,
              got.dtype == np.bool_ and got.view(np.uint8).tolist() == want.astype(int).tolist(),
              "got bytes %s want %s" % (got.view(np.uint8).tolist(), want.astype(int).tolist()))


def test_reduce_scatter(counts):
    n = comm.size
    for dtype in ("int8", "uint64", "float16", "bfloat16", "float32", "float64", "int16", "bool"):
        kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
        for count in counts:
            name = "reduce_scatter %s count %d" % (dtype, count)
            full = reference("sum", dtype, n * count, n)
            want = full[comm.rank * count:(comm.rank + 1) * count]
            a = stored(values(comm.rank, n * count, dtype), dtype)
            got = comm.reduce_scatter(a, **kw)
            check(name, same(got, want), "got %s want %s" % (got[:8], want[:8]))
            block = a[comm.rank * count:(comm.rank + 1) * count]
            r = comm.reduce_scatter(a, out=block, **kw)
            check(name + " in place", r is block and same(block, want))
    a = np.ones((n * 2, 3), np.int64)
    got = comm.reduce_scatter(a, op="sum")
    check("reduce_scatter 2-D", got.shape == (2, 3) and (got == n).all(), str(got))


def test_allgather(counts):
    n = comm.size
    for dtype in ("uint8", "int32", "float16", "bfloat16", "float64", "uint16", "bool"):
        kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
        for count in counts:
            name = "allgather %s count %d" % (dtype, count)
            want = np.concatenate([stored(values(r, count, dtype), dtype) for r in range(n)])
            got = comm.allgather(stored(values(comm.rank, count, dtype), dtype), **kw)
            check(name, same(got, want), "got %s want %s" % (got[:8], want[:8]))
            out = np.zeros_like(want)
            mine = out[comm.rank * count:(comm.rank + 1) * count]
            mine[...] = stored(values(comm.rank, count, dtype), dtype)
            r = comm.allgather(mine, out=out, **kw)
            check(name + " in place", r is out and same(out, want))
    got = comm.allgather(np.full((2, 3), comm.rank, np.int32))
    check("allgather 2-D", got.shape == (2 * n, 3) and
          (got == np.repeat(np.arange(n), 2)[:, None]).all(), str(got))


def test_broadcast(counts):
    if not baton._lib.has("baton_broadcast"):
        print("SKIP broadcast: %s does not export baton_broadcast (not in this version of "
              "the library)" % baton._lib.path, flush=True)
        return
    for root in range(comm.size):
        for dtype in ("int8", "uint32", "int64", "float16", "bfloat16", "float32"):
            kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
            for count in counts:
                name = "broadcast %s root %d count %d" % (dtype, root, count)
                want = stored(values(root, count, dtype), dtype)
                a = stored(values(comm.rank, count, dtype), dtype)
                keep = a.copy()
                got = comm.broadcast(a, root=root, **kw)
                check(name, same(got, want) and same(a, keep))
                r = comm.broadcast(a, root=root, out=a, **kw)
                check(name + " in place", r is a and same(a, want))
    raises("broadcast root out of range", ValueError, "root %d" % comm.size,
           comm.broadcast, np.zeros(3, np.float32), root=comm.size)


skipped = set()


def no_algorithm(call, fn):
    """fn(), or None when baton has no algorithm for call yet (said once)."""
    try:
        return fn()
    except baton.BatonError as e:
        if e.name == "BATON_EUSAGE" and "no algorithm" in e.detail:
            if call not in skipped and comm.rank == 0:
                print("SKIP %s: %s" % (call, e.detail), flush=True)
            skipped.add(call)
            return None
        raise


def test_more_collectives(counts):
    """reduce, alltoall, gather, scatter, allgatherv and reduce_scatterv,
    against the same NumPy reference, in and out of place."""
    n, me = comm.size, comm.rank
    for dtype in ("int8", "uint32", "float16", "bfloat16", "float64", "int16", "uint16", "bool"):
        kw = {"dtype": "bfloat16"} if dtype == "bfloat16" else {}
        for count in counts:
            root = count % n
            name = "%s count %d root %d" % (dtype, count, root)
            a = stored(values(me, count, dtype), dtype)
            got = comm.reduce(a, op="sum", root=root, **kw)
            want = reference("sum", dtype, count, n)
            check("reduce " + name, got is None if me != root else same(got, want))
            a = stored(values(me, n * count, dtype), dtype)
            want = np.concatenate([stored(values(q, n * count, dtype), dtype)
                                   [me * count:(me + 1) * count] for q in range(n)])
            check("alltoall " + name, same(comm.alltoall(a, **kw), want))
            check("alltoall in place " + name, same(comm.alltoall(a, out=a, **kw), want))
            counts_v = [count + q if (q + count) % 3 != 2 else 0 for q in range(n)]
            mine = stored(values(me, counts_v[me], dtype), dtype)
            want = np.concatenate([stored(values(q, counts_v[q], dtype), dtype) for q in range(n)])
            check("allgatherv " + name, same(comm.allgatherv(mine, counts_v, **kw), want))
            full = stored(values(me, sum(counts_v), dtype), dtype)
            lo = sum(counts_v[:me])
            want = reference("sum", dtype, sum(counts_v), n)[lo:lo + counts_v[me]]
            check("reduce_scatterv " + name, same(comm.reduce_scatterv(full, counts_v, **kw), want))
            a = stored(values(me, count, dtype), dtype)
            got = no_algorithm("gather", lambda: comm.gather(a, root=root, **kw))
            if got is not None or me != root:
                want = np.concatenate([stored(values(q, count, dtype), dtype) for q in range(n)])
                check("gather " + name, got is None if me != root else same(got, want))
            a = stored(values(me, n * count, dtype), dtype)
            got = no_algorithm("scatter", lambda: comm.scatter(a, root=root, **kw))
            if got is not None:
                want = stored(values(root, n * count, dtype), dtype)[me * count:(me + 1) * count]
                check("scatter " + name, same(got, want))
    # Gaps between allgatherv's blocks keep what out held.
    out = np.full(3 * n + 1, -1, np.int32)
    displs = [3 * q + 1 for q in range(n)]
    comm.allgatherv(np.full(2, me, np.int32), [2] * n, displs=displs, out=out)
    want = np.full(3 * n + 1, -1, np.int32)
    for q in range(n):
        want[3 * q + 1:3 * q + 3] = q
    check("allgatherv displs with gaps", same(out, want), str(out))
    raises("reduce root out of range", ValueError, "root", comm.reduce, np.zeros(2), root=-1)
    raises("allgatherv wrong counts", ValueError, "counts", comm.allgatherv,
           np.zeros(2), [1] * (n + 1))


def test_async(counts):
    """async_op=True: requests in flight at once, waited out of order."""
    reqs = []
    for i, n in enumerate(counts):
        a = np.full(n, comm.rank + i, np.int32)
        reqs.append((n, i, comm.allreduce(a, async_op=True)))
    g = comm.allgather(np.array([comm.rank], np.int64), async_op=True)
    b = comm.barrier(async_op=True)
    for n, i, r in reversed(reqs):
        want = sum(q + i for q in range(comm.size))
        got = r.wait()
        check("async allreduce count %d" % n, got.shape == (n,) and (got == want).all(), str(got))
    while not g.is_completed():
        time.sleep(0.0005)
    check("async allgather", (g.wait() == np.arange(comm.size)).all())
    check("async barrier", b.wait() is None)
    r = comm.allreduce(np.ones(3, np.float32), async_op=True)
    check("request repr", "allreduce" in repr(r))
    check("async twice waited", (r.wait() == comm.size).all() and (r.wait() == comm.size).all())
    # wait(timeout): rank 0 gives up after 50 ms on a call the others join
    # 300 ms late, then waits it out.
    comm.barrier()
    if comm.rank:
        time.sleep(0.3)
    r = comm.allreduce(np.ones(2, np.int32), async_op=True)
    timed_out, took = False, 0.0
    if comm.rank == 0 and comm.size > 1:
        t0 = time.monotonic()
        try:
            r.wait(timeout=0.05)
        except TimeoutError:
            timed_out = True
        took = time.monotonic() - t0
    check("async wait(timeout) times out", comm.rank or comm.size == 1 or
          (timed_out and 0.05 <= took < 0.25), "timed out %s after %.3f s" % (timed_out, took))
    check("async wait(timeout) then to the end", (r.wait(timeout=5) == comm.size).all())
    b = comm.barrier(async_op=True)
    try:
        b.wait(timeout=-1)
        check("async wait(timeout=-1) refused", False)
    except ValueError:
        check("async wait(timeout=-1) refused", True)
    check("async wait after a refused timeout", b.wait() is None)


def test_errors():
    n = comm.size
    f = np.zeros(8, np.float32)
    raises("non-contiguous input", ValueError, "not C-contiguous", comm.allreduce, f[::2])
    raises("Fortran-order input", ValueError, "not C-contiguous",
           comm.allreduce, np.asfortranarray(np.zeros((3, 4))))
    raises("non-contiguous out", ValueError, "not C-contiguous",
           comm.allreduce, f[:4], out=np.zeros(8, np.float32)[::2])
    raises("list input", TypeError, "numpy.ndarray", comm.allreduce, [1.0, 2.0])
    raises("float128 input", TypeError, "not a baton dtype", comm.allreduce,
           np.zeros(4, np.longdouble))
    raises("complex input", TypeError, "not a baton dtype", comm.allreduce, np.zeros(4, complex))
    got = comm.allreduce(np.full(4, 60000, np.uint16), op="max")
    check("uint16 without dtype is uint16", got.dtype == np.uint16 and (got == 60000).all(), str(got))
    e = raises("float32 with band", baton.BatonError, "band", comm.allreduce, f, op="band")
    check("float32 band: EINVAL naming float32", e is not None and e.name == "BATON_EINVAL" and
          "float32" in e.detail, repr(e))
    raises("bfloat16 on float32", TypeError, "needs an array of uint16",
           comm.allreduce, f, dtype="bfloat16")
    raises("unknown dtype name", ValueError, "unknown dtype 'float128'",
           comm.allreduce, f, dtype="float128")
    raises("big-endian input", TypeError, "byte order", comm.allreduce, np.zeros(4, ">f4"))
    raises("unknown op", ValueError, "unknown op 'mean'", comm.allreduce, f, op="mean")
    raises("op of wrong type", TypeError, "op must be", comm.allreduce, f, op=None)
    raises("out of wrong dtype", TypeError, "out has dtype float64",
           comm.allreduce, f, out=np.zeros(8))
    raises("out of wrong shape", ValueError, "out has shape (4, 2)",
           comm.allreduce, f, out=np.zeros((4, 2), np.float32))
    raises("out of wrong size", ValueError, "out has shape (9,)",
           comm.allreduce, f, out=np.zeros(9, np.float32))
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    raises("read-only out", ValueError, "read-only", comm.allreduce, f, out=ro)
    big = np.zeros(16, np.float32)
    raises("out overlapping the input", ValueError, "overlaps",
           comm.allreduce, big[:8], out=big[4:12])
    raises("reduce_scatter 0-d", ValueError, "multiple of the %d ranks" % n,
           comm.reduce_scatter, np.array(1.0, np.float32))
    if n > 1:
        raises("reduce_scatter uneven", ValueError, "multiple of the %d ranks" % n,
               comm.reduce_scatter, np.zeros(n + 1, np.float32))
    raises("allgather out of wrong shape", ValueError, "result has shape (%d,)" % (3 * n),
           comm.allgather, np.zeros(3, np.int8), out=np.zeros(3 * n + 1, np.int8))
    # An op number the binding does not know goes to the library, which
    # refuses it: BatonError with the error's name and the library's text.
    e = raises("op the library refuses", baton.BatonError, "op 99", comm.allreduce, f, op=99)
    if e is not None:
        check("BatonError name", e.name == "BATON_EINVAL" and e.code == -1, repr(e))
        check("BatonError detail is baton_comm_last_error", e.detail == comm.last_error != "",
              "%r vs %r" % (e.detail, comm.last_error))
    # A refused call touches no peer, so the communicator still works.
    got = comm.allreduce(np.ones(5, np.float32))
    check("usable after an error", (got == n).all(), str(got))


def test_missing_library():
    """An import that cannot find the library says where it looked."""
    env = dict(os.environ, BATON_LIBRARY="/nonexistent/libbaton.so")
    r = subprocess.run([sys.executable, "-c", "import baton"], env=env, capture_output=True,
                       text=True)
    check("import without the library", r.returncode != 0 and
          "cannot load libbaton.so; tried: /nonexistent/libbaton.so (no such file)" in r.stderr,
          r.stderr[-300:])


def test_split():
    """split by parity, reversed keys, None on the last rank, dup, nested;
    each new Comm checked with an allreduce against the reference, and one
    that outlives a closed parent."""
    n, r = comm.size, comm.rank
    for name, color, key, members in [
            ("parity", r % 2, r, [q for q in range(n) if q % 2 == r % 2]),
            ("reversed", 0, -r, list(range(n - 1, -1, -1))),
            ("last None", None if r == n - 1 else 3, r, list(range(n - 1)))]:
        c = comm.split(color, key)
        if color is None:
            check("split %s gives None" % name, c is None, repr(c))
            continue
        check("split %s rank/size" % name, c is not None and c.size == len(members) and
              c.rank == members.index(r), repr(c))
        got = c.allgather(np.array([r], np.int32))
        check("split %s order" % name, got.tolist() == members, "%s != %s" % (got, members))
        x = c.allreduce(np.arange(1000, dtype=np.int64) * (r + 1))
        want = np.arange(1000, dtype=np.int64) * sum(q + 1 for q in members)
        check("split %s allreduce" % name, same(x, want))
        c.close()
    raises("split color -2", ValueError, "color", comm.split, -2)
    raises("split key not an int", ValueError, "key", comm.split, 0, 1.5)
    d = comm.dup()
    check("dup rank/size", d.rank == r and d.size == n, repr(d))
    e = d.split(r % 2)  # nested, and it outlives d
    d.close()
    x = e.allreduce(np.ones(7, np.float32))
    check("nested split after its parent closed", same(x, np.full(7, e.size, np.float32)))
    e.close()


def stall():
    """Rank 0 waits in an allreduce its peers never join (BATON_TIMEOUT=1)."""
    if comm.rank == 0:
        t0 = time.monotonic()
        e = raises("allreduce nobody joins", baton.BatonError, "BATON_ETIMEDOUT",
                   comm.allreduce, np.ones(1 << 16, np.float32))
        if e is not None:
            check("timeout detail names the collective", "allreduce" in e.detail, e.detail)
            print("rank 0 got, after %.1f s: %s" % (time.monotonic() - t0, e), flush=True)
    else:
        time.sleep(3)


def test_p2p():
    """send/recv/isend/irecv: a ring of several dtypes and sizes, tags out of
    order, a mismatch (EMISMATCH on both sides), bad arguments."""
    me, n = comm.rank, comm.size
    nxt, prv = (me + 1) % n, (me - 1) % n
    for dt in (np.float32, np.int16, np.uint16, np.bool_, np.float64):
        for count in (0, 1, 1000, 100000):
            a = (np.arange(count) * (me + 1) % 7).astype(dt)
            out = np.zeros(count, dt)
            r = comm.irecv(out, prv, tag=3)
            s = comm.isend(a, nxt, tag=3)
            s.wait()
            got = r.wait()
            want = (np.arange(count) * (prv + 1) % 7).astype(dt)
            check("p2p ring %s count %d" % (np.dtype(dt).name, count),
                  got is out and same(got, want), "got %s want %s" % (got[:8], want[:8]))
    # Two tags, received in the other order than sent.
    if me == 0:
        a = comm.isend(np.full(5, 1, np.int32), 1, tag=1)
        b = comm.isend(np.full(7, 2, np.int32), 1, tag=2)
        a.wait()
        b.wait()
    elif me == 1:
        y = comm.recv(np.zeros(7, np.int32), 0, tag=2)
        x = comm.recv(np.zeros(5, np.int32), 0, tag=1)
        check("p2p tags out of order", (x == 1).all() and (y == 2).all(), "%s %s" % (x, y))
    # A mismatch: both sides raise EMISMATCH naming both counts.
    if me < 2:
        buf = np.zeros(10 if me == 0 else 12, np.int32)
        fn = comm.send if me == 0 else comm.recv
        e = raises("p2p mismatch", baton.BatonError, "BATON_EMISMATCH", fn, buf, 1 - me, 9)
        if e is not None:
            check("p2p mismatch names both counts", "10" in e.detail and "12" in e.detail, e.detail)
    # alltoallv: rank r sends rank q (r + q) % 3 elements of value 100 r + q.
    sc = np.array([(me + q) % 3 for q in range(n)])
    rc = np.array([(q + me) % 3 for q in range(n)])
    for dt in (np.float32, np.int16, np.uint8, np.bool_):
        a = np.concatenate([np.full(sc[q], 100 * me + q) for q in range(n)]).astype(dt)
        want = np.concatenate([np.full(rc[q], 100 * q + me) for q in range(n)]).astype(dt)
        got = comm.alltoallv(a, sc, rc)
        check("alltoallv %s" % np.dtype(dt).name, same(got, want), "got %s want %s" % (got, want))
        r = comm.alltoallv(a, sc, rc, async_op=True)
        check("alltoallv async %s" % np.dtype(dt).name, same(r.wait(), want))
    big = np.zeros(max(int(sc.sum()), int(rc.sum())), np.float32)
    big[:int(sc.sum())] = np.concatenate([np.full(sc[q], 100 * me + q) for q in range(n)])
    got = comm.alltoallv(big, sc, rc, out=big)
    want = np.concatenate([np.full(rc[q], 100 * q + me) for q in range(n)]).astype(np.float32)
    check("alltoallv in place", got is big and same(big[:want.size], want), str(big))
    raises("alltoallv counts of the wrong length", ValueError, "counts", comm.alltoallv,
           np.ones(3, np.float32), [1] * (n + 1), rc)
    raises("p2p to self", baton.BatonError, "BATON_EINVAL", comm.send, np.ones(1), me)
    raises("p2p negative tag", ValueError, "tag", comm.send, np.ones(1), nxt, -1)
    raises("p2p peer not an int", TypeError, "peer", comm.recv, np.ones(1), "1")
    raises("p2p recv into a list", TypeError, "numpy", comm.recv, [0.0], nxt)
    comm.barrier()


def test_empty():
    """comm.empty: arrays over registered memory, zeroed, of the shape and
    dtype asked; collectives on them (the direct algorithm, in place and
    not, async) agree with NumPy; mixed with ordinary arrays on some ranks;
    freed when dropped; bad arguments refused."""
    me, n = comm.rank, comm.size
    for dt in (np.float32, np.int64, np.float16, "bfloat16"):
        a = comm.empty((3, 50000), dt)
        storage = baton.DTYPES[dt][1] if isinstance(dt, str) else np.dtype(dt)
        check("empty %s shape and dtype" % dt, a.shape == (3, 50000) and a.dtype == storage and
              a.flags.c_contiguous and a.flags.writeable and not a.any())
    x, y = comm.empty(200000, np.float32), comm.empty(200000, np.float32)
    x[:] = (np.arange(200000) % 13) + me
    want = sum((np.arange(200000) % 13) + r for r in range(n)).astype(np.float32)
    check("empty allreduce", same(comm.allreduce(x, out=y), want))
    r = comm.allreduce(x, out=x, async_op=True)
    check("empty allreduce in place async", same(r.wait(), want))
    g = comm.empty(n * 1000, np.int32)
    mine = np.full(1000, me, np.int32)
    src = comm.empty(1000, np.int32)
    src[:] = mine
    got = comm.allgather(src, out=g)
    check("empty allgather", same(got, np.repeat(np.arange(n, dtype=np.int32), 1000)))
    # Rank 0 on registered memory, the others on their own: the staged path.
    z = comm.empty(70000, np.float64)  # collective: every rank allocates
    if me != 0:
        z = np.zeros(70000)
    z[:] = me + 1
    check("empty on some ranks", same(comm.allreduce(z, out=z), np.full(70000, n * (n + 1) / 2)))
    del x, y, g, src, z, r
    raises("empty of a bad dtype", TypeError, "no dtype", comm.empty, 4, np.complex64)
    raises("empty of a bad shape", ValueError, "shape", comm.empty, (2, -1))
    raises("empty of an unknown dtype name", ValueError, "unknown dtype", comm.empty, 4, "f8")
    comm.barrier()


comm = baton.init()
print("rank %d of %d: baton from %s, library %s" % (comm.rank, comm.size, baton.__file__,
                                                    baton._lib.path), flush=True)
if sys.argv[1:] == ["stall"]:
    stall()
else:
    counts = [0, 1, 7, 1000, 40000]  # 40000 * 4 bytes is past the flat limit: the ring
    test_allreduce(counts)
    test_reduce_scatter(counts)
    test_allgather(counts)
    test_broadcast(counts)
    test_more_collectives(counts)
    test_async(counts)
    test_empty()
    test_errors()
    if baton._lib.has("baton_comm_split"):
        test_split()
    if baton._lib.has("baton_send") and comm.size > 1:
        test_p2p()
    if comm.rank == 0:
        test_missing_library()
    comm.barrier()
    comm.close()
    comm.close()
    raises("closed communicator", ValueError, "closed", comm.allreduce, np.ones(2))
print("rank %d: %d passed, %d failed" % (comm.rank, passed, failed), flush=True)
sys.exit(1 if failed else 0)
