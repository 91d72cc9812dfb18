"""Finding and loading libbaton.so, and the C prototypes.

The package finds the library by itself in the two places it is laid out:

  installed   PREFIX/lib/python3/site-packages/baton/  ->  PREFIX/lib/libbaton.so
  build tree  python/baton/ in the source tree          ->  build/lib/libbaton.so

BATON_LIBRARY=/path/to/libbaton.so overrides both; if neither exists the
dynamic linker's search (LD_LIBRARY_PATH, ld.so.cache) is the last resort.
"""
import ctypes
import os

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    if os.environ.get("BATON_LIBRARY"):
        return [os.environ["BATON_LIBRARY"]]
    return [
        os.path.normpath(os.path.join(_here, "..", "..", "..", "libbaton.so")),
        os.path.normpath(os.path.join(_here, "..", "..", "build", "lib", "libbaton.so")),
        "libbaton.so",
    ]


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (no such file)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("baton: cannot load libbaton.so; tried: " + "; ".join(tried) +
                      ". Build it with `make`, or set BATON_LIBRARY to its path.")


lib, path = _load()

_p, _sz, _i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
_PROTOTYPES = {
    "baton_strerror": (ctypes.c_char_p, [_i]),
    "baton_err_name": (ctypes.c_char_p, [_i]),
    "baton_dtype_size": (_sz, [_i]),
    "baton_comm_init": (_i, [ctypes.POINTER(_p)]),
    "baton_last_init_error": (ctypes.c_char_p, []),
    "baton_comm_destroy": (_i, [_p]),
    "baton_comm_split": (_i, [_p, _i, _i, ctypes.POINTER(_p)]),
    "baton_comm_dup": (_i, [_p, ctypes.POINTER(_p)]),
    "baton_comm_rank": (_i, [_p]),
    "baton_comm_size": (_i, [_p]),
    "baton_comm_last_error": (ctypes.c_char_p, [_p]),
    "baton_allreduce": (_i, [_p, _p, _sz, _i, _i, _p]),
    "baton_reduce_scatter": (_i, [_p, _p, _sz, _i, _i, _p]),
    "baton_allgather": (_i, [_p, _p, _sz, _i, _p]),
    "baton_broadcast": (_i, [_p, _p, _sz, _i, _i, _p]),
    "baton_barrier": (_i, [_p]),
    "baton_reduce": (_i, [_p, _p, _sz, _i, _i, _i, _p]),
    "baton_alltoall": (_i, [_p, _p, _sz, _i, _p]),
    "baton_gather": (_i, [_p, _p, _sz, _i, _i, _p]),
    "baton_scatter": (_i, [_p, _p, _sz, _i, _i, _p]),
    "baton_allgatherv": (_i, [_p, _sz, _p, _p, _p, _i, _p]),
    "baton_reduce_scatterv": (_i, [_p, _p, _p, _i, _i, _p]),
    "baton_alltoallv": (_i, [_p, _p, _p, _p, _p, _p, _i, _p]),
    "baton_send": (_i, [_p, _sz, _i, _i, _i, _p]),
    "baton_recv": (_i, [_p, _sz, _i, _i, _i, _p]),
    "baton_isend": (_i, [_p, _sz, _i, _i, _i, _p, ctypes.POINTER(_p)]),
    "baton_irecv": (_i, [_p, _sz, _i, _i, _i, _p, ctypes.POINTER(_p)]),
    "baton_wait": (_i, [_p]),
    "baton_test": (_i, [_p, ctypes.POINTER(_i)]),
    "baton_wait_for": (_i, [_p, ctypes.c_double, ctypes.POINTER(_i)]),
    "baton_mem_alloc": (_i, [_p, _sz, ctypes.POINTER(_p)]),
    "baton_mem_free": (_i, [_p, _p]),
}
# The i-forms: the blocking call's arguments and a request.
for _name in [k for k in _PROTOTYPES if k.startswith("baton_") and k != "baton_barrier" and
              k[6:] in ("allreduce", "reduce_scatter", "allgather", "broadcast", "reduce",
                        "alltoall", "gather", "scatter", "allgatherv", "reduce_scatterv",
                        "alltoallv")]:
    _PROTOTYPES["baton_i" + _name[6:]] = (_i, _PROTOTYPES[_name][1] + [ctypes.POINTER(_p)])
_PROTOTYPES["baton_ibarrier"] = (_i, [_p, ctypes.POINTER(_p)])
for _name, (_res, _args) in _PROTOTYPES.items():
    # A library older than the binding may lack a call (baton_broadcast);
    # the binding then raises when that call is used, not at import.
    if hasattr(lib, _name):
        _fn = getattr(lib, _name)
        _fn.restype, _fn.argtypes = _res, _args


def has(name):
    """True when the loaded libbaton.so exports the C function `name`."""
    return hasattr(lib, name)


def text(b):
    return b.decode("utf-8", "replace") if b else ""
