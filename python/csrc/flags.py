"""What the Makefile needs to build baton's torch extension, from the torch it is for.

    /usr/bin/python3 python/csrc/flags.py OUT.mk

writes OUT.mk (make syntax: TORCH_CXXFLAGS, TORCH_LDFLAGS) and exits 0; when
this Python cannot build it (no torch, no torch.distributed, no pybind11 or
Python headers) it prints one line saying why and exits 1, writing nothing.

The flags are the ones torch.utils.cpp_extension would use: torch's include
directories, the C++ ABI torch was built with (_GLIBCXX_USE_CXX11_ABI) and
pybind11's ABI strings from torch._C, so that the extension's pybind11 finds
the classes torch registered (ProcessGroup, Store) instead of its own.
"""
import os
import sys
import sysconfig


def fail(why):
    print(why)
    sys.exit(1)


def main(out):
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install
        fail("%s cannot import torch (%s); Debian: apt-get install python3-torch" %
             (sys.executable, e))
    try:
        import torch.distributed as dist
        available = dist.is_available()
    except Exception:
        available = False
    if not available:
        fail("torch %s was built without torch.distributed" % torch.__version__)
    root = os.path.dirname(os.path.abspath(torch.__file__))
    incs = [os.path.join(root, "include"), os.path.join(root, "include", "torch", "csrc", "api",
                                                        "include")]
    if not os.path.exists(os.path.join(incs[0], "torch", "csrc", "distributed", "c10d",
                                       "ProcessGroup.hpp")):
        fail("torch's C++ headers are not in %s; Debian: apt-get install libtorch-dev" % incs[0])
    pyinc = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(pyinc, "Python.h")):
        fail("no Python.h in %s; Debian: apt-get install python3-dev" % pyinc)
    pybind = [d for d in incs + [pyinc, "/usr/include", "/usr/local/include"]
              if os.path.exists(os.path.join(d, "pybind11", "pybind11.h"))]
    if not pybind:
        fail("no pybind11 headers; Debian: apt-get install pybind11-dev")
    defs = ["-D_GLIBCXX_USE_CXX11_ABI=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI)]
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, "_PYBIND11_" + name, None)
        if value is not None:
            defs.append("'-DPYBIND11_%s=\"%s\"'" % (name, value))
    isys = []
    for d in incs + [pyinc] + pybind:
        if d not in ("/usr/include", "/usr/local/include") and d not in isys:
            isys.append(d)
    libdir = os.path.join(root, "lib")
    with open(out + ".tmp", "w") as f:
        f.write("# made by python/csrc/flags.py for torch %s (%s)\n" %
                (torch.__version__, sys.executable))
        f.write("TORCH_CXXFLAGS = %s %s\n" % (" ".join("-isystem " + d for d in isys),
                                            " ".join(defs)))
        f.write("TORCH_LDFLAGS = -L%s -ltorch_python -ltorch -ltorch_cpu -lc10\n" % libdir)
    os.replace(out + ".tmp", out)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: flags.py OUT.mk")
    main(sys.argv[1])
