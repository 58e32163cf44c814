// host/registry.h — the variants this extension holds, each registered by its own kernel file.
//
// A kernel file ends with one line, HGEMM_VARIANT(name, launcher, operands) (host/launch.h), which adds {name,
// launcher, operands} here when the library is loaded; binding.cpp looks variants up by name and knows none of
// them. The name is the record's (ptx_kernels/variants.py); tests/test_ptx_compile.py checks that every kernel
// file registers exactly its record's name. Plain C++ (no CUDA syntax): binding.cpp is compiled by the host
// compiler.
#pragma once
#include <map>
#include <string>

#include "hgemm.cuh"

namespace hgemm {

// Which operand strides a variant's launcher takes (GemmArgs).
enum class Operands {
  RowMajorA,   // A row-major (sak == 1), B row-major or column-major as GemmArgs::b_col_major says
  AnyStrides,  // any strides of A and B (the wrapper copies nothing)
};

struct Registered {
  Launcher launch;
  Operands operands;
};

// One registry per shared library: a function-local static, so every translation unit's registrar (run at load,
// in no particular order) adds to the same map.
inline std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> variants;
  return variants;
}

struct Registrar {
  Registrar(const char* name, Launcher launch, Operands operands) { registry()[name] = {launch, operands}; }
};

}  // namespace hgemm

// At the end of a kernel file, at namespace scope: HGEMM_VARIANT(wmma_multistage, launch_wmma_multistage, RowMajorA);
#define HGEMM_VARIANT(NAME, LAUNCHER, OPERANDS) \
  static const ::hgemm::Registrar hgemm_registrar_##NAME(#NAME, LAUNCHER, ::hgemm::Operands::OPERANDS)
