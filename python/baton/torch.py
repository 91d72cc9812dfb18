"""baton as a torch.distributed backend.

    import torch, torch.distributed as dist
    import baton.torch                      # registers backend "baton"
    dist.init_process_group("baton")        # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE
    model = torch.nn.parallel.DistributedDataParallel(model)

Importing this module loads the C++ extension _baton_torch (python/csrc/,
built by `make` when PyTorch's headers are installed) and registers its
process group with torch.distributed.Backend.register_backend. The group
meets through the store torch hands it (the group's PrefixStore), so
new_group needs no port of its own, and its timeout bounds every wait.

Every collective, point-to-point call and barrier of torch.distributed is
served (all_to_all and the _base forms included) on dense, contiguous CPU
tensors of float32, float64, float16, bfloat16, int8, uint8, int16, int32,
int64 and bool, with ReduceOp SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR and
BXOR. Whatever baton cannot take as it is (sparse, CUDA or non-contiguous
tensors, other dtypes, PREMUL_SUM, recv without src) raises RuntimeError
naming the call, the tensor and why; a failure inside baton raises
RuntimeError with baton_comm_last_error()'s text.

baton.torch.empty(*size, dtype=..., group=None) makes a tensor over
registered memory of a baton group (baton_mem_alloc: every rank of the group
calls it at the same point). A collective whose tensors on every rank of a
host lie in such memory reads the peers' inputs and writes the outputs where
they lie, with no staging copy (the direct algorithm); on the others it
takes the usual path.

With BATON_MEM_LOCAL=1 in the environment of every rank, importing this
module also makes torch's own CPU tensors of 256 KiB and more local memory
(baton_mem_alloc_local), which the peers on the host map when a call uses it:
collectives on ordinary tensors then run direct too, with no change to the
program. Smaller tensors (flat's one round serves them) come from torch's
allocator as before. A child made by fork() (a DataLoader worker) maps such
tensors privately: its writes stay its own, but until it writes a page it sees
what the parent writes there later.

The extension is found beside this file (installed: PREFIX/lib/python3/
site-packages/baton/_baton_torch.so) or in the build tree
(build/python/baton/_baton_torch.so); BATON_TORCH_EXTENSION=/path/to/it
overrides both.
"""
import importlib.machinery
import importlib.util
import os
import sys

try:
    import torch
    import torch.distributed as dist
except ImportError as e:
    raise ImportError("baton.torch needs PyTorch, which %s cannot import (%s); Debian: apt-get "
                      "install python3-torch, then run /usr/bin/python3" % (sys.executable, e)) from e

if not dist.is_available():
    raise ImportError("baton.torch: this torch (%s) was built without torch.distributed" %
                      torch.__version__)

__all__ = ["BACKEND", "extension_path", "create_process_group", "empty"]

BACKEND = "baton"
_NAME = "_baton_torch"
_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    if os.environ.get("BATON_TORCH_EXTENSION"):
        return [os.environ["BATON_TORCH_EXTENSION"]]
    return [os.path.join(_here, _NAME + ".so"),
            os.path.normpath(os.path.join(_here, "..", "..", "build", "python", "baton",
                                          _NAME + ".so"))]


def _load():
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(path + " (no such file)")
            continue
        loader = importlib.machinery.ExtensionFileLoader(__package__ + "." + _NAME, path)
        spec = importlib.util.spec_from_file_location(loader.name, path, loader=loader)
        module = importlib.util.module_from_spec(spec)
        try:
            loader.exec_module(module)
        except ImportError as e:
            tried.append("%s (%s)" % (path, e))
            continue
        sys.modules[loader.name] = module
        return module, path
    raise ImportError("baton.torch: cannot load the extension %s; tried: %s. Build it with `make` "
                      "(it needs python3-torch, libtorch-dev and pybind11-dev: `make` says why it "
                      "skipped it otherwise), or set BATON_TORCH_EXTENSION to its path." %
                      (_NAME, "; ".join(tried)))


_ext, extension_path = _load()
create_process_group = _ext.create_process_group

# Torch's tensors of this size and more over local memory (BATON_MEM_LOCAL=1):
# below it flat's single round serves a call, and each block holds a file
# descriptor.
LOCAL_MIN_BYTES = 256 << 10
if os.environ.get("BATON_MEM_LOCAL", "").strip() == "1":
    if not _ext._install_local_allocator(LOCAL_MIN_BYTES):
        import warnings
        warnings.warn("baton.torch: BATON_MEM_LOCAL=1, but another CPU allocator of a higher "
                      "priority is installed, so torch's tensors stay ordinary memory")

# Registered once per process, even if this module is loaded again.
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, create_process_group)


def empty(*size, dtype=torch.float32, group=None):
    """A new zeroed CPU tensor of `size` and `dtype` over registered memory of
    the baton group `group` (default: the default group, which must be
    baton's): baton_mem_alloc, so collective over the group's ranks, each
    calling it at the same point among the group's calls, with none of them
    in flight (sizes may differ between ranks). Collectives of the group
    whose tensors on every rank of a host lie in such memory (or are views
    into it) run the direct algorithm: each byte read where it lies and
    written where it goes once, with no copy through shared memory. Like
    torch.empty otherwise; the memory is given back when the tensor and its
    views are gone (at the group's next call, or when it is destroyed, where
    a call of it was in flight then), and stays valid as plain memory when
    the tensor outlives its group."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    if any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in size):
        raise ValueError("baton.torch.empty: the size must be ints >= 0, not %r" % (size,))
    if not isinstance(dtype, torch.dtype):
        raise TypeError("baton.torch.empty: dtype must be a torch.dtype, not %r" % (dtype,))
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    numel = 1
    for d in size:
        numel *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    raw = _ext._empty_registered(pg, numel * itemsize)
    return raw.view(dtype).view(size)
