/*
 * module.cpp - the Python module baton._baton_torch: the creator that
 * torch.distributed calls for backend "baton" (python/baton/torch.py
 * registers it with Backend.register_backend).
 *
 * PyTorch 1.13 calls a plugin's creator as creator(store, rank, world_size,
 * timeout), with store the group's PrefixStore and timeout a timedelta, and
 * takes the ProcessGroup it returns. The store and the group travel as the
 * classes torch's own module registered with pybind11 (built with the same
 * pybind11 ABI, which the Makefile takes from torch._C).
 */
#include <torch/csrc/utils/pybind.h>

#include <pybind11/chrono.h>

#include "allocator.hpp"
#include "process_group.hpp"

namespace {

c10::intrusive_ptr<c10d::ProcessGroup> create(const c10::intrusive_ptr<c10d::Store> &store,
                                              int rank, int size,
                                              std::chrono::duration<float> timeout) {
  return c10::make_intrusive<baton_torch::ProcessGroupBaton>(store, rank, size, timeout);
}

} // namespace

PYBIND11_MODULE(_baton_torch, m) {
  m.doc() = "baton as a torch.distributed backend; import baton.torch to register it";
  /* The communicator's set-up waits for every rank of the group: without
   * the GIL, so that the process's other Python threads run meanwhile. */
  m.def("create_process_group", &create, py::arg("store"), py::arg("rank"), py::arg("world_size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Makes the baton process group of rank `rank` of `world_size` through `store`.");
  /* For the tests: what a group holds, so that a dropped work's freeing
   * can be seen. */
  m.def(
      "_works_in_flight",
      [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg) {
        auto *group = dynamic_cast<baton_torch::ProcessGroupBaton *>(pg.get());
        TORCH_CHECK(group, "baton: _works_in_flight: not a baton process group");
        return group->inFlight();
      },
      py::arg("group"), "The works the baton group `group` issued that have not completed.");
  /* baton.torch.empty's memory (python/baton/torch.py views it as the
   * caller's dtype and shape). */
  m.def(
      "_empty_registered",
      [](const c10::intrusive_ptr<c10d::ProcessGroup> &pg, int64_t nbytes) {
        auto *group = dynamic_cast<baton_torch::ProcessGroupBaton *>(pg.get());
        TORCH_CHECK(group, "baton.torch.empty: the group is not a baton process group (its "
                           "backend is ", pg->getBackendName(), ")");
        return group->emptyRegistered(nbytes);
      },
      py::arg("group"), py::arg("nbytes"), py::call_guard<py::gil_scoped_release>(),
      "nbytes of registered memory of the baton group `group` as a uint8 tensor; collective.");
  /* BATON_MEM_LOCAL=1: torch's CPU tensors over baton's local memory
   * (python/baton/torch.py installs it at import). */
  m.def("_install_local_allocator", &baton_torch::installLocalAllocator, py::arg("min_bytes"),
        "Makes torch's CPU tensors of min_bytes and more baton local memory; True when torch "
        "now allocates through it.");
  m.def("_local_blocks_held", &baton_torch::localBlocksHeld,
        "How many blocks of local memory torch's tensors hold now.");
  m.attr("BACKEND_NAME") = "baton";
  m.attr("BATON_VERSION") =
      py::str(std::to_string(BATON_VERSION_MAJOR) + "." + std::to_string(BATON_VERSION_MINOR) +
              "." + std::to_string(BATON_VERSION_PATCH));
}
