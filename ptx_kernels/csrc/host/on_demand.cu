// host/on_demand.cu — the entry point of the on-demand library: the kernel files of the records marked on_demand
// (ptx_kernels/variants.py), built on first use into a shared library of their own beside the extension
// (ptx_kernels/build.py, load(on_demand=True)). Their registrars fill this library's own registry when it is
// loaded; the extension's binding opens the library (hgemm_load_on_demand in binding.cpp) and calls this function,
// which copies those entries into the extension's registries. The launchers stay in this library, which is never
// closed.
#include "host/registry.h"

extern "C" __attribute__((visibility("default"))) int hgemm_on_demand_export(void* variants, void* ceilings) {
  // The registries are function-local statics of inline functions, which the toolchain may make process-wide
  // unique symbols (the library's registrars then fill the extension's maps themselves): nothing to copy then.
  auto& to_variants = *static_cast<std::map<std::string, hgemm::Registered>*>(variants);
  auto& to_ceilings = *static_cast<std::map<std::string, hgemm::Ceiling>*>(ceilings);
  if (&to_variants != &hgemm::registry())
    for (const auto& kv : hgemm::registry()) to_variants[kv.first] = kv.second;
  if (&to_ceilings != &hgemm::ceilings())
    for (const auto& kv : hgemm::ceilings()) to_ceilings[kv.first] = kv.second;
  return int(hgemm::registry().size() + hgemm::ceilings().size());
}
