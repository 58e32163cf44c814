// host/registry.h — the variants this extension holds, each registered by its own kernel file.
//
// A kernel file ends with one line, HGEMM_VARIANT(name, launcher, operands) (fp16 only) or
// HGEMM_VARIANT_FP16_BF16(name, launcher, operands) (a launcher template, for fp16 and bf16), which adds {name,
// launchers, operands} here when the library is loaded; binding.cpp looks variants up by name and knows none of
// them. The name is the record's (ptx_kernels/variants.py); tests/test_ptx_compile.py checks that every kernel
// file registers exactly its record's name, operands and dtypes. Plain C++ (no CUDA syntax): binding.cpp is compiled by the host
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
  AnyMajor,    // A and B each row- or column-major, as GemmArgs::a_col_major and ::b_col_major say
};

struct Registered {
  Launcher launch;                                // fp16
  Operands operands;
  LauncherOf<__nv_bfloat16> launch_bf16 = nullptr;  // bf16 (fp32 accumulation), where the variant takes it
};

// One registry per shared library: a function-local static, so every translation unit's registrar (run at load,
// in no particular order) adds to the same map. The on-demand library's entries are copied into the extension's
// when it is loaded (host/on_demand.cu).
inline std::map<std::string, Registered>& registry() {
  static std::map<std::string, Registered> variants;
  return variants;
}

struct Registrar {
  Registrar(const char* name, Launcher launch, Operands operands,
            LauncherOf<__nv_bfloat16> launch_bf16 = nullptr) {
    registry()[name] = {launch, operands, launch_bf16};
  }
};

// Instruction ceilings (lab/*_ceiling.cu): a loop of one instruction with its operands already in registers or
// shared memory, filling the GPU, which the variants whose record names that ceiling are scored against. Each
// file registers itself, so a build holds the ceilings of the instructions its target has (wgmma on sm_90a only).
using CeilingLauncher = cudaError_t (*)(int blocks, int iters, Acc acc, float* sink, cudaStream_t stream);
struct Ceiling {
  CeilingLauncher launch;
  double (*flops)(long long blocks, long long iters);  // FLOPs of one launch
  int blocks_per_sm;                                   // blocks that fill an SM
  int sink_per_block;                                  // floats each block writes to the sink
};

inline std::map<std::string, Ceiling>& ceilings() {
  static std::map<std::string, Ceiling> all;
  return all;
}

struct CeilingRegistrar {
  CeilingRegistrar(const char* name, Ceiling c) { ceilings()[name] = c; }
};

}  // namespace hgemm

// At the end of a kernel file, at namespace scope: HGEMM_VARIANT(wmma_multistage, launch_wmma_multistage, RowMajorA);
#define HGEMM_VARIANT(NAME, LAUNCHER, OPERANDS) \
  static const ::hgemm::Registrar hgemm_registrar_##NAME(#NAME, LAUNCHER, ::hgemm::Operands::OPERANDS)

// The same for a variant that takes fp16 and bf16: LAUNCHER is a function template over the element type, explicitly
// instantiated here for both (other translation units may declare and call them: wgmma_persistent hands problems
// to wgmma_cluster's launcher).
// With -DHGEMM_ONLY_ELEMENT=half (or __nv_bfloat16), as `compare inspect` compiles a file for one instantiation
// (host/launch.h: builds), it instantiates that element type's launcher alone and registers nothing.
#ifdef HGEMM_ONLY_ELEMENT
#define HGEMM_VARIANT_FP16_BF16(NAME, LAUNCHER, OPERANDS)                                                    \
  template cudaError_t LAUNCHER<HGEMM_ONLY_ELEMENT>(const GemmArgsOf<HGEMM_ONLY_ELEMENT>&, Acc, cudaStream_t, \
                                                    LaunchInfo*)
#else
#define HGEMM_VARIANT_FP16_BF16(NAME, LAUNCHER, OPERANDS)                                                      \
  template cudaError_t LAUNCHER<half>(const GemmArgsOf<half>&, Acc, cudaStream_t, LaunchInfo*);                 \
  template cudaError_t LAUNCHER<__nv_bfloat16>(const GemmArgsOf<__nv_bfloat16>&, Acc, cudaStream_t, LaunchInfo*); \
  static const ::hgemm::Registrar hgemm_registrar_##NAME(#NAME, LAUNCHER<half>, ::hgemm::Operands::OPERANDS,     \
                                                         LAUNCHER<__nv_bfloat16>)
#endif

// At the end of a ceiling file: HGEMM_CEILING(wgmma, "wgmma", {launch_wgmma_ceiling, wgmma_ceiling_flops, 1, 256});
// NAME is the record's `ceiling` ("mma.sync", "wgmma").
#define HGEMM_CEILING(ID, NAME, ...) \
  static const ::hgemm::CeilingRegistrar hgemm_ceiling_registrar_##ID(NAME, ::hgemm::Ceiling __VA_ARGS__)
