"""baton: collectives between the processes of one host, over NumPy arrays.

    import numpy as np
    import baton

    comm = baton.init()                  # under baton-run, which sets BATON_RANK/SIZE/ADDR
    g = np.full(1000, comm.rank, np.float32)
    comm.allreduce(g, op="avg", out=g)   # in place, because out is g
    comm.close()

Every collective takes C-contiguous arrays and returns its result array:
`out` when given (checked for dtype, shape and contiguity), else a new one.
The baton dtype follows from the array's NumPy dtype (np.int16, np.uint16 and
np.bool_ included); bfloat16, which NumPy lacks, travels as raw uint16 with
dtype="bfloat16" (see to_bfloat16 and from_bfloat16), as without it a uint16
array is uint16. The ops are "sum", "prod", "min", "max", "avg" and the
bitwise "band", "bor" and "bxor" (integers and bool only); on bool, sum and
max are logical or, prod and min logical and, and avg is refused. Bad arguments raise TypeError or ValueError before anything
is sent; a failure inside the library raises BatonError, which carries the
error's name and baton_comm_last_error(). comm.split(color, key) and
comm.dup() make communicators of some or all of the ranks (groups).
comm.empty(shape, dtype) returns an array over registered memory
(baton_mem_alloc): a collective whose arrays all come from it, on every
rank, reads and writes them in place instead of staging every byte.
"""
import ctypes
import weakref

import numpy as np

from . import _lib

__all__ = ["init", "Comm", "BatonError", "DTYPES", "OPS", "SPLIT_NONE", "to_bfloat16",
           "from_bfloat16"]

# baton.h's BATON_SPLIT_NONE; Comm.split(None) passes it too.
SPLIT_NONE = -1

# baton dtype name -> (baton_dtype_t value, NumPy dtype of the storage).
DTYPES = {
    "int8": (0, np.dtype(np.int8)),
    "uint8": (1, np.dtype(np.uint8)),
    "int32": (2, np.dtype(np.int32)),
    "uint32": (3, np.dtype(np.uint32)),
    "int64": (4, np.dtype(np.int64)),
    "uint64": (5, np.dtype(np.uint64)),
    "float16": (6, np.dtype(np.float16)),
    "bfloat16": (7, np.dtype(np.uint16)),  # raw bits; only with dtype="bfloat16"
    "float32": (8, np.dtype(np.float32)),
    "float64": (9, np.dtype(np.float64)),
    "int16": (10, np.dtype(np.int16)),
    "uint16": (11, np.dtype(np.uint16)),
    "bool": (12, np.dtype(np.bool_)),
}
# baton op name -> baton_op_t value. A pair without a meaning (a float with
# band/bor/bxor, bool with avg) is refused by the library: BatonError,
# BATON_EINVAL, with the op and the dtype in its detail.
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4, "band": 5, "bor": 6, "bxor": 7}

_BY_NUMPY = {storage: name for name, (_, storage) in DTYPES.items() if name != "bfloat16"}

# The table above mirrors baton.h's enum; a library built from a different
# header shows up here rather than as wrong results.
for _name, (_value, _storage) in DTYPES.items():
    if _lib.lib.baton_dtype_size(_value) != _storage.itemsize:
        raise ImportError("baton: %s reports %d bytes for dtype %d (%s), the binding expects %d"
                          % (_lib.path, _lib.lib.baton_dtype_size(_value), _value, _name,
                             _storage.itemsize))


class BatonError(RuntimeError):
    """A baton call failed. `code` is the negative return code, `name` its
    baton_err_name() (e.g. "BATON_ETIMEDOUT"), `detail` the text of
    baton_comm_last_error() (or baton_last_init_error() for init)."""

    def __init__(self, call, code, detail):
        self.call, self.code, self.detail = call, code, detail
        self.name = _lib.text(_lib.lib.baton_err_name(code))
        self.strerror = _lib.text(_lib.lib.baton_strerror(code))
        super().__init__("%s: %s (%s): %s" % (call, self.name, self.strerror, detail))


def init():
    """Joins the other ranks and returns a Comm. Reads BATON_RANK,
    BATON_SIZE and BATON_ADDR as baton-run sets them."""
    handle = ctypes.c_void_p()
    rc = _lib.lib.baton_comm_init(ctypes.byref(handle))
    if rc != 0:
        raise BatonError("baton_comm_init", rc, _lib.text(_lib.lib.baton_last_init_error()))
    return Comm(handle)


def _array(x, what):
    if not isinstance(x, np.ndarray):
        raise TypeError("%s must be a numpy.ndarray, not %s" % (what, type(x).__name__))
    if not x.flags.c_contiguous:
        raise ValueError("%s is not C-contiguous (shape %s, strides %s); baton reads and writes "
                         "flat memory: pass np.ascontiguousarray(%s)" % (what, x.shape, x.strides, what))
    return x


def _dtype(a, dtype):
    """The baton_dtype_t value for array a, given the optional dtype name."""
    if dtype is None:
        name = _BY_NUMPY.get(a.dtype)
        if name is None:
            hint = ""
            if not a.dtype.isnative:
                hint = " (non-native byte order; convert with a.astype(a.dtype.newbyteorder(\"=\")))"
            raise TypeError("array dtype %s is not a baton dtype%s; baton's dtypes are %s"
                            % (a.dtype.str if not a.dtype.isnative else a.dtype, hint,
                               ", ".join(DTYPES)))
        return DTYPES[name][0]
    if dtype not in DTYPES:
        raise ValueError("unknown dtype %r; baton's dtypes are %s" % (dtype, ", ".join(DTYPES)))
    value, storage = DTYPES[dtype]
    if a.dtype != storage:
        raise TypeError("dtype=%r needs an array of %s, got %s" % (dtype, storage, a.dtype.str))
    return value


def _op(op):
    if isinstance(op, str):
        if op.lower() not in OPS:
            raise ValueError("unknown op %r; baton's ops are %s" % (op, ", ".join(OPS)))
        return OPS[op.lower()]
    # A raw baton_op_t goes to the library as it is, which checks it.
    if isinstance(op, (int, np.integer)) and not isinstance(op, bool):
        return int(op)
    raise TypeError("op must be one of %s, not %r" % (", ".join(OPS), op))


def _out(out, a, shape, call):
    if out is None:
        return np.empty(shape, a.dtype)
    _array(out, "out")
    if not out.flags.writeable:
        raise ValueError("%s: out is read-only" % call)
    if out.dtype != a.dtype:
        raise TypeError("%s: out has dtype %s but the input has %s" % (call, out.dtype, a.dtype))
    if out.shape != tuple(shape):
        raise ValueError("%s: out has shape %s, the result has shape %s (%d elements)"
                         % (call, out.shape, tuple(shape), int(np.prod(shape))))
    return out


def _check_overlap(a, out, in_place_offset, call):
    """Refuses an out that overlaps a anywhere but at the one position the C
    call treats as in place: out starting in_place_offset elements into a
    (or a starting -in_place_offset elements into out)."""
    if out is a or a.nbytes == 0 or out.nbytes == 0:
        return
    pa, po = a.ctypes.data, out.ctypes.data
    if pa + a.nbytes <= po or po + out.nbytes <= pa:
        return
    if po - pa == in_place_offset * a.itemsize:
        return
    raise ValueError("%s: out overlaps the input other than at the in-place position; use "
                     "separate arrays or the in-place form (see help(baton.Comm.%s))" % (call, call))


class Request:
    """A collective in flight (async_op=True): wait() blocks until it
    completes and returns what the blocking call would have (raising
    BatonError if it failed); wait(timeout=S) raises TimeoutError when S
    seconds pass first, with the call still in flight (wait again);
    is_completed() asks without blocking. Calls on one communicator
    complete in the order they were issued."""

    def __init__(self, comm, name, handle, result, keep):
        self._comm, self._name, self._h = comm, name, handle
        self._result, self._keep, self._rc = result, keep, None

    def __repr__(self):
        return "<baton.Request %s, %s>" % (self._name,
                                          "pending" if self._rc is None else "completed")

    def wait(self, timeout=None):
        if self._rc is None and timeout is not None:
            if not timeout >= 0:
                raise ValueError("%s: wait(timeout=%r): seconds, 0 or more" % (self._name, timeout))
            done = ctypes.c_int(0)
            rc = _lib.lib.baton_wait_for(self._h, float(timeout), ctypes.byref(done))
            if not done.value:
                self._comm._check(self._name, rc)
                raise TimeoutError("%s: not complete after %g s; the call is still in flight "
                                   "(wait again)" % (self._name, timeout))
            self._rc, self._keep = rc, None
        if self._rc is None:
            self._rc = _lib.lib.baton_wait(self._h)
            self._keep = None
        self._comm._check(self._name, self._rc)
        return self._result

    def is_completed(self):
        if self._rc is None:
            done = ctypes.c_int(0)
            rc = _lib.lib.baton_test(self._h, ctypes.byref(done))
            if done.value:
                self._rc, self._keep = rc, None
            elif rc != 0:
                self._comm._check(self._name, rc)
        return self._rc is not None


class Comm:
    """A communicator: rank, size and the collectives. Every rank must call
    the same collectives in the same order; close() is collective too."""

    def __init__(self, handle):
        self._h = handle
        self.rank = _lib.lib.baton_comm_rank(handle)
        self.size = _lib.lib.baton_comm_size(handle)
        self._unfreed = []  # registered memory whose array went while a request was in flight

    def __repr__(self):
        return "<baton.Comm rank %d of %d%s>" % (self.rank, self.size,
                                                  "" if self._h else ", closed")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def last_error(self):
        """baton_comm_last_error(): what the last failed call did wrong."""
        return _lib.text(_lib.lib.baton_comm_last_error(self._handle()))

    def _handle(self):
        if not self._h:
            raise ValueError("the communicator is closed")
        return self._h

    def _check(self, call, rc):
        if rc != 0:
            raise BatonError(call, rc, self.last_error)

    def empty(self, shape, dtype=np.float32):
        """A new array of `shape` and `dtype` (a NumPy dtype, or "bfloat16"
        for raw uint16 bits) over registered memory: baton_mem_alloc, which
        is collective (every rank calls empty() at the same point, sizes may
        differ), zeroed. A collective whose arrays on every rank come from
        empty() (or are views into them) runs the direct algorithm. The
        memory is freed when the array and its views are gone; one still
        held at close() stays valid as plain memory."""
        h = self._handle()
        self._need("mem_alloc")
        if isinstance(dtype, str):
            if dtype not in DTYPES:
                raise ValueError("empty: unknown dtype %r; known: %s" % (dtype, ", ".join(DTYPES)))
            storage = DTYPES[dtype][1]
        else:
            storage = np.dtype(dtype)
            if storage not in _BY_NUMPY:
                raise TypeError("empty: baton has no dtype for NumPy's %s" % storage)
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        if any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
            raise ValueError("empty: shape must be ints >= 0, not %r" % (shape,))
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        nbytes = count * storage.itemsize
        self._free_pending()
        ptr = ctypes.c_void_p()
        self._check("mem_alloc", _lib.lib.baton_mem_alloc(h, max(nbytes, 1), ctypes.byref(ptr)))
        buf = (ctypes.c_char * max(nbytes, 1)).from_address(ptr.value)
        weakref.finalize(buf, Comm._release, weakref.ref(self), h, ptr.value)
        return np.frombuffer(buf, dtype=storage, count=count).reshape(shape)

    @staticmethod
    def _release(comm_ref, h, ptr):
        # The array and its views are gone. A closed communicator keeps the
        # memory as plain memory; with a request in flight the free waits
        # for the next empty() or close().
        comm = comm_ref()
        if comm is None or comm._h != h:
            return
        if _lib.lib.baton_mem_free(h, ptr) != 0:
            comm._unfreed.append(ptr)

    def _free_pending(self):
        left = []
        for ptr in self._unfreed:
            if _lib.lib.baton_mem_free(self._h, ptr) != 0:
                left.append(ptr)
        self._unfreed = left

    def close(self):
        """baton_comm_destroy(); collective. Closing twice is a no-op."""
        if self._h:
            self._free_pending()
            h, self._h = self._h, None
            rc = _lib.lib.baton_comm_destroy(h)
            if rc != 0:
                raise BatonError("baton_comm_destroy", rc, "")

    def split(self, color, key=None):
        """baton_comm_split(); collective over this communicator. The ranks
        that pass the same color (an int >= 0) form a new Comm, ranked by key
        (default: their rank here), then by their rank here. color=None
        (BATON_SPLIT_NONE) takes part and returns None. The new Comm lives on
        after this one is closed; close() it too."""
        h = self._handle()
        self._need("comm_split")
        if color is None:
            color = SPLIT_NONE
        if not isinstance(color, int) or (color < 0 and color != SPLIT_NONE):
            raise ValueError("split: color must be an int >= 0 or None, not %r" % (color,))
        key = self.rank if key is None else key
        if not isinstance(key, int) or not -2**31 <= key < 2**31:
            raise ValueError("split: key must be an int that fits in a C int, not %r" % (key,))
        new = ctypes.c_void_p()
        self._check("split", _lib.lib.baton_comm_split(h, color, key, ctypes.byref(new)))
        return Comm(new) if new.value else None

    def dup(self):
        """baton_comm_dup(); collective: a new Comm of the same ranks in the
        same order, with its own connections."""
        h = self._handle()
        self._need("comm_dup")
        new = ctypes.c_void_p()
        self._check("dup", _lib.lib.baton_comm_dup(h, ctypes.byref(new)))
        return Comm(new)

    def allreduce(self, a, op="sum", out=None, dtype=None, async_op=False):
        """out[i] = op over all ranks of a[i]. In place when out is a.
        op: "sum", "prod", "min", "max", "avg" (integers: truncated), or
        "band", "bor", "bxor" (integers and bool)."""
        h = self._handle()
        _array(a, "a")
        dt, opv = _dtype(a, dtype), _op(op)
        out = _out(out, a, a.shape, "allreduce")
        _check_overlap(a, out, 0, "allreduce")
        return self._call("allreduce", (a.ctypes.data, out.ctypes.data, a.size, dt, opv, h), out, async_op, a, out)

    def reduce_scatter(self, a, op="sum", out=None, dtype=None, async_op=False):
        """a.shape[0] is size * k; rank r gets the reduction over all ranks
        of a[r*k:(r+1)*k], shape (k,) + a.shape[1:]. In place when out is
        that block of a, e.g. out=a[rank*k:(rank+1)*k]."""
        h = self._handle()
        _array(a, "a")
        dt, opv = _dtype(a, dtype), _op(op)
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError("reduce_scatter: a.shape[0] must be a multiple of the %d ranks; "
                             "a has shape %s" % (self.size, a.shape))
        count = a.size // self.size
        out = _out(out, a, (a.shape[0] // self.size,) + a.shape[1:], "reduce_scatter")
        _check_overlap(a, out, self.rank * count, "reduce_scatter")
        return self._call("reduce_scatter", (a.ctypes.data, out.ctypes.data, count, dt, opv, h), out, async_op, a, out)

    def allgather(self, a, out=None, dtype=None, async_op=False):
        """Rank r's a lands in block r of the result, shape
        (size * a.shape[0],) + a.shape[1:] (or (size,) for a 0-d a). In place
        when a is that block of out, e.g. a=out[rank*k:(rank+1)*k]."""
        h = self._handle()
        _array(a, "a")
        dt = _dtype(a, dtype)
        shape = (self.size * a.shape[0],) + a.shape[1:] if a.ndim else (self.size,)
        out = _out(out, a, shape, "allgather")
        _check_overlap(a, out, -self.rank * a.size, "allgather")
        return self._call("allgather", (a.ctypes.data, out.ctypes.data, a.size, dt, h), out, async_op, a, out)

    def broadcast(self, a, root=0, out=None, dtype=None, async_op=False):
        """Every rank gets root's a. In place when out is a; only root's a
        is read, the others' give the shape and dtype."""
        h = self._handle()
        if not _lib.has("baton_broadcast"):
            raise NotImplementedError("broadcast: %s has no baton_broadcast; rebuild baton from "
                                      "a version that has it" % _lib.path)
        _array(a, "a")
        dt = _dtype(a, dtype)
        if not isinstance(root, (int, np.integer)) or isinstance(root, bool):
            raise TypeError("broadcast: root must be an int, not %r" % (root,))
        if not 0 <= root < self.size:
            raise ValueError("broadcast: root %d is not a rank in [0, %d)" % (root, self.size))
        out = _out(out, a, a.shape, "broadcast")
        _check_overlap(a, out, 0, "broadcast")
        return self._call("broadcast", (a.ctypes.data, out.ctypes.data, a.size, dt, int(root), h), out, async_op, a, out)

    def _need(self, name):
        if not _lib.has("baton_" + name):
            raise NotImplementedError("%s: %s has no baton_%s; rebuild baton from a version "
                                      "that has it" % (name, _lib.path, name))

    def _root(self, root, call):
        if not isinstance(root, (int, np.integer)) or isinstance(root, bool):
            raise TypeError("%s: root must be an int, not %r" % (call, root))
        if not 0 <= root < self.size:
            raise ValueError("%s: root %d is not a rank in [0, %d)" % (call, root, self.size))
        return int(root)

    def _counts(self, counts, call):
        c = np.ascontiguousarray(counts, dtype=np.int64)
        if c.shape != (self.size,) or (c < 0).any():
            raise ValueError("%s: counts must be %d non-negative integers, one per rank"
                             % (call, self.size))
        return c.astype(np.uintp)

    def reduce(self, a, op="sum", root=0, out=None, dtype=None, async_op=False):
        """The reduction over all ranks of a lands on root, which gets it
        back (in place when out is a); the other ranks get None."""
        h = self._handle()
        self._need("reduce")
        _array(a, "a")
        dt, opv, root = _dtype(a, dtype), _op(op), self._root(root, "reduce")
        recv = None
        if self.rank == root:
            recv = _out(out, a, a.shape, "reduce")
            _check_overlap(a, recv, 0, "reduce")
        return self._call("reduce", (a.ctypes.data, recv.ctypes.data if recv is not None else None, a.size, dt, opv,
            root, h), recv, async_op, a, recv)

    def alltoall(self, a, out=None, dtype=None, async_op=False):
        """a.shape[0] is size * k: block q (a[q*k:(q+1)*k]) goes to rank q,
        and block q of the result comes from rank q. In place when out is a
        (baton stages the input in its scratch memory)."""
        h = self._handle()
        self._need("alltoall")
        _array(a, "a")
        dt = _dtype(a, dtype)
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError("alltoall: a.shape[0] must be a multiple of the %d ranks; a has "
                             "shape %s" % (self.size, a.shape))
        out = _out(out, a, a.shape, "alltoall")
        _check_overlap(a, out, 0, "alltoall")
        return self._call("alltoall", (a.ctypes.data, out.ctypes.data, a.size // self.size, dt, h), out, async_op, a, out)

    def gather(self, a, root=0, out=None, dtype=None, async_op=False):
        """Rank r's a lands in block r of root's result, shape
        (size * a.shape[0],) + a.shape[1:]; the other ranks get None. In
        place when root's a is its block of out."""
        h = self._handle()
        self._need("gather")
        _array(a, "a")
        dt, root = _dtype(a, dtype), self._root(root, "gather")
        recv = None
        if self.rank == root:
            shape = (self.size * a.shape[0],) + a.shape[1:] if a.ndim else (self.size,)
            recv = _out(out, a, shape, "gather")
            _check_overlap(a, recv, -root * a.size, "gather")
        return self._call("gather", (a.ctypes.data, recv.ctypes.data if recv is not None else None, a.size, dt, root,
            h), recv, async_op, a, recv)

    def scatter(self, a, root=0, out=None, dtype=None, async_op=False):
        """Block r of root's a (a.shape[0] is size * k) lands on rank r, shape
        (k,) + a.shape[1:]. Only root's a is read; the others' give the shape
        and dtype. In place when out is root's block of a."""
        h = self._handle()
        self._need("scatter")
        _array(a, "a")
        dt, root = _dtype(a, dtype), self._root(root, "scatter")
        if a.ndim == 0 or a.shape[0] % self.size:
            raise ValueError("scatter: a.shape[0] must be a multiple of the %d ranks; a has "
                             "shape %s" % (self.size, a.shape))
        count = a.size // self.size
        out = _out(out, a, (a.shape[0] // self.size,) + a.shape[1:], "scatter")
        _check_overlap(a, out, root * count, "scatter")
        return self._call("scatter", (a.ctypes.data if self.rank == root else None, out.ctypes.data, count, dt, root, h), out, async_op, a, out)

    def allgatherv(self, a, counts, displs=None, out=None, dtype=None, async_op=False):
        """Rank r's a (counts[r] elements) lands at element displs[r] of the
        flat result on every rank; displs defaults to the blocks one after
        the other, and is this rank's own layout (it may differ between
        ranks; counts may not). A given out is 1-D and may be longer than the blocks
        span; its elements outside the blocks stay as they were. In place
        when a is this rank's block of out."""
        h = self._handle()
        self._need("allgatherv")
        _array(a, "a")
        dt = _dtype(a, dtype)
        c = self._counts(counts, "allgatherv")
        d = self._counts(np.concatenate(([0], np.cumsum(c)[:-1])) if displs is None else displs,
                         "allgatherv")
        if a.size != int(c[self.rank]):
            raise ValueError("allgatherv: a has %d elements, counts[%d] is %d"
                             % (a.size, self.rank, int(c[self.rank])))
        span = int(max((d + c)[c > 0], default=0))
        if out is not None and getattr(out, "ndim", 0) == 1 and out.size > span:
            span = out.size  # a longer out is fine: only the blocks are written
        out = _out(out, a, (span,), "allgatherv")
        _check_overlap(a, out, -int(d[self.rank]), "allgatherv")
        return self._call("allgatherv", (a.ctypes.data, a.size, out.ctypes.data, c.ctypes.data, d.ctypes.data, dt, h), out, async_op, a, out, c, d)

    def alltoallv(self, a, sendcounts, recvcounts, sdispls=None, rdispls=None, out=None,
                  dtype=None, async_op=False):
        """baton_alltoallv(): a is flat; its block for rank q is sendcounts[q]
        elements at sdispls[q], and rank q's block for this rank lands in the
        flat result at rdispls[q], recvcounts[q] elements long. The displs
        default to the blocks one after the other; a given out may be longer
        than the blocks span (the rest stays as it was). sendcounts[q] here
        must equal recvcounts[this rank] on rank q: otherwise both raise
        BatonError EMISMATCH. In place when out is a."""
        h = self._handle()
        self._need("alltoallv")
        _array(a, "a")
        dt = _dtype(a, dtype)
        sc, rc = self._counts(sendcounts, "alltoallv"), self._counts(recvcounts, "alltoallv")
        prefix = lambda c: np.concatenate(([0], np.cumsum(c)[:-1]))
        sd = self._counts(prefix(sc) if sdispls is None else sdispls, "alltoallv")
        rd = self._counts(prefix(rc) if rdispls is None else rdispls, "alltoallv")
        need = int(max((sd + sc)[sc > 0], default=0))
        if a.size < need:
            raise ValueError("alltoallv: a has %d elements, the send blocks reach element %d"
                             % (a.size, need))
        span = int(max((rd + rc)[rc > 0], default=0))
        if out is not None and getattr(out, "ndim", 0) == 1 and out.size > span:
            span = out.size
        if out is not a:
            out = _out(out, a, (span,), "alltoallv")
            _check_overlap(a, out, 0, "alltoallv")
        elif a.ndim != 1 or a.size < span:
            raise ValueError("alltoallv: in place, a must be 1-D and hold the receive blocks too")
        return self._call("alltoallv", (a.ctypes.data, sc.ctypes.data, sd.ctypes.data,
                                        out.ctypes.data, rc.ctypes.data, rd.ctypes.data, dt, h),
                          out, async_op, a, out, sc, sd, rc, rd)

    def reduce_scatterv(self, a, counts, op="sum", out=None, dtype=None, async_op=False):
        """a is flat, sum(counts) elements; rank r gets the reduction over all
        ranks of its block (counts[r] elements after those of ranks < r). In
        place when out is that block of a."""
        h = self._handle()
        self._need("reduce_scatterv")
        _array(a, "a")
        dt, opv = _dtype(a, dtype), _op(op)
        c = self._counts(counts, "reduce_scatterv")
        if a.size != int(c.sum()):
            raise ValueError("reduce_scatterv: a has %d elements, the counts add up to %d"
                             % (a.size, int(c.sum())))
        out = _out(out, a, (int(c[self.rank]),), "reduce_scatterv")
        _check_overlap(a, out, int(c[:self.rank].sum()), "reduce_scatterv")
        return self._call("reduce_scatterv", (a.ctypes.data, out.ctypes.data, c.ctypes.data, dt, opv, h), out, async_op, a, out, c)

    def barrier(self, async_op=False):
        """Returns once every rank has entered the barrier."""
        return self._call("barrier", (self._handle(),), None, async_op)

    def _peer(self, peer, tag, call):
        if not isinstance(peer, int) or isinstance(peer, bool):
            raise TypeError("%s: peer must be an int, not %r" % (call, peer))
        if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag < 2**31:
            raise ValueError("%s: tag must be an int in [0, 2**31), not %r" % (call, tag))

    def send(self, a, peer, tag=0, dtype=None, async_op=False):
        """baton_send(): the array a to rank peer, with tag (>= 0). Returns
        once peer has matched it with a receive of the same count and dtype
        (both sides raise BatonError EMISMATCH otherwise); async_op=True
        returns a Request instead, and a must stay untouched until it
        completes."""
        h = self._handle()
        self._need("send")
        self._peer(peer, tag, "send")
        _array(a, "a")
        dt = _dtype(a, dtype)
        return self._call("send", (a.ctypes.data, a.size, dt, peer, tag, h), None, async_op, a)

    def recv(self, out, peer, tag=0, dtype=None, async_op=False):
        """baton_recv(): rank peer's message with tag into the array out,
        whose size and dtype must match the send's; returns out (with
        async_op=True, a Request whose wait() returns it). Messages from
        one peer with one tag arrive in the order they were sent."""
        h = self._handle()
        self._need("recv")
        self._peer(peer, tag, "recv")
        _array(out, "out")
        if not out.flags.writeable:
            raise ValueError("recv: out is read-only")
        dt = _dtype(out, dtype)
        return self._call("recv", (out.ctypes.data, out.size, dt, peer, tag, h), out, async_op,
                          out)

    def isend(self, a, peer, tag=0, dtype=None):
        """send(..., async_op=True): a Request."""
        return self.send(a, peer, tag, dtype, async_op=True)

    def irecv(self, out, peer, tag=0, dtype=None):
        """recv(..., async_op=True): a Request whose wait() returns out."""
        return self.recv(out, peer, tag, dtype, async_op=True)

    def _call(self, name, args, result, async_op, *keep):
        """The call, blocking; or with async_op its i-form, returning a
        Request whose wait() gives the result. The arrays stay referenced
        by the request until it completes: baton owns their bytes till then."""
        if not async_op:
            self._check(name, getattr(_lib.lib, "baton_" + name)(*args))
            return result
        self._need("i" + name)
        req = ctypes.c_void_p()
        self._check("i" + name, getattr(_lib.lib, "baton_i" + name)(*args, ctypes.byref(req)))
        return Request(self, name, req, result, keep)


def to_bfloat16(x):
    """float32 values -> their bfloat16 bits as uint16, rounded to nearest
    even (NaN stays NaN)."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def from_bfloat16(u):
    """bfloat16 bits (uint16) -> float32, exactly."""
    u = np.ascontiguousarray(u)
    if u.dtype != np.uint16:
        raise TypeError("from_bfloat16: expected uint16 bits, got %s" % u.dtype)
    return (u.astype(np.uint32) << np.uint32(16)).view(np.float32)
