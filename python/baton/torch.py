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

__all__ = ["BACKEND", "extension_path", "create_process_group"]

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

# Registered once per process, even if this module is loaded again.
if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, create_process_group)
