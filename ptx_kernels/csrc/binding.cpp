// binding.cpp — the one place that knows about Torch: checks, the current stream, launch errors.
// Kernels live in the .cu files (plain nvcc, no Torch headers); this file is compiled by the host compiler.
// The headers of what it uses, not <torch/extension.h> (the whole C++ frontend: nn, optim, jit, ...): this file is
// the build's one translation unit that includes Torch, compiled beside the kernel files, and the frontend's headers
// were most of its compile time.
#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/utils/pybind.h>  // PYBIND11_MODULE and the Tensor, tuple and vector conversions

#include <dlfcn.h>

#include <string>
#include <tuple>
#include <vector>

#include "hgemm.cuh"
#include "host/registry.h"
#include "host/stage_copy.h"
#include "lab/lab.h"

// The variants this build holds: the names their kernel files registered (HGEMM_VARIANT), in name order.
std::vector<std::string> hgemm_variants() {
  std::vector<std::string> names;
  for (const auto& kv : hgemm::registry()) names.push_back(kv.first);
  return names;
}

// Opens the on-demand library at `path` (host/on_demand.cu: the kernel files built on first use, ptx_kernels/build.py)
// and adds its variants and ceilings to this extension's registries; returns the number of entries the library's
// registries hold (the extension's too, where the toolchain makes the registries one process-wide symbol). The library
// stays open: its launchers are called from here on.
int64_t hgemm_load_on_demand(const std::string& path) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(lib != nullptr, "hgemm: cannot open the on-demand library ", path, ": ", dlerror());
  using Export = int (*)(void*, void*);
  const auto entry = reinterpret_cast<Export>(dlsym(lib, "hgemm_on_demand_export"));
  TORCH_CHECK(entry != nullptr, "hgemm: ", path, " has no hgemm_on_demand_export: not an on-demand library");
  return entry(&hgemm::registry(), &hgemm::ceilings());
}

// {grid_x, grid_y, block, smem_bytes, smem_limit, tile_m, tile_n, split, plan} and the variant whose kernel ran
// (where the launcher handed the problem to another's; else empty). plan: LaunchInfo::plan (PlanSource).
using LaunchReport = std::tuple<std::vector<int64_t>, std::string>;
template <typename E>
LaunchReport launch_registered(const std::string& variant, LauncherOf<E> launch, const GemmArgsOf<E>& p,
                               const at::Device& device, bool acc_fp16);

// The problem with typed pointers: A, B and C of element type E (half for kHalf, __nv_bfloat16 for kBFloat16).
template <typename E>
GemmArgsOf<E> gemm_args(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, bool a_col_major,
                        bool b_col_major) {
  GemmArgsOf<E> p;
  p.A = static_cast<const E*>(a.data_ptr());
  p.B = static_cast<const E*>(b.data_ptr());
  p.C = static_cast<E*>(c.data_ptr());
  p.M = static_cast<int>(a.size(0));
  p.N = static_cast<int>(b.size(1));
  p.K = static_cast<int>(a.size(1));
  p.sam = a.stride(0);
  p.sak = a.stride(1);
  p.sbk = b.stride(0);
  p.sbn = b.stride(1);
  p.ldc = c.stride(0);
  p.b_col_major = b_col_major;
  p.a_col_major = a_col_major;
  return p;
}

// hgemm_launch's tile and split as the launchers read them: tile 1 and 2 the large and base tile of the variants
// with two (GemmArgs::tile); 1-32 also pin a Hopper plan (GemmArgs::plan_tile, sm90/handoff.h; 7-16 the cut tiles,
// hopper::cut_tile, 17-26 the same swapped, hopper::kSwapFirstCode, 27-32 the 128-row swapped ones paired in
// clusters, hopper::kPairFirstCode), as do K splits.
constexpr int64_t kMaxTile = 32, kMaxSplit = 256;
// hgemm_launch's sms: the SM count a stream-K schedule sees (GemmArgs::sms; 0: the device's).
constexpr int64_t kMaxSms = 1 << 16;

// Launch `variant` on the current stream: C = A @ B. Python has validated shapes, dtypes and devices and chosen
// the layouts (a_col_major only for the variants registered with Operands::AnyMajor); these checks guard the
// contract again. tile, split, sms: GemmArgs::tile, ::split, ::sms (sms may be left out: 0). float16 runs the variant's fp16 launcher, bfloat16 its
// bf16 one (registered by the variants that take bf16; fp32 accumulation).
LaunchReport hgemm_launch(const std::string& variant, const at::Tensor& a, const at::Tensor& b,
                          const at::Tensor& c, bool a_col_major, bool b_col_major, bool acc_fp16, int64_t tile,
                          int64_t split, int64_t sms) {
  const auto it = hgemm::registry().find(variant);
  TORCH_CHECK(it != hgemm::registry().end(), "hgemm: no PTX variant named '", variant, "' in this build");
  const auto dtype = a.scalar_type();
  const bool bf16 = dtype == at::kBFloat16;
  for (const auto* t : {&a, &b, &c}) {
    TORCH_CHECK(t->is_cuda() && (dtype == at::kHalf || bf16) && t->scalar_type() == dtype && t->dim() == 2,
                "hgemm_launch: expected 2-D CUDA tensors, all float16 or all bfloat16");
    TORCH_CHECK(t->device() == a.device(), "hgemm_launch: tensors on different devices");
  }
  TORCH_CHECK(!bf16 || it->second.launch_bf16, "hgemm: variant '", variant, "' takes float16 only, got bfloat16");
  TORCH_CHECK(!(bf16 && acc_fp16), "hgemm: bfloat16 inputs accumulate in fp32 only");
  TORCH_CHECK(a.size(1) == b.size(0) && c.size(0) == a.size(0) && c.size(1) == b.size(1),
              "hgemm_launch: shapes (", a.size(0), "x", a.size(1), ") @ (", b.size(0), "x", b.size(1), ") -> (",
              c.size(0), "x", c.size(1), ") do not match");
  TORCH_CHECK(c.stride(1) == 1 || c.size(1) == 1, "hgemm_launch: C needs unit column stride");
  if (it->second.operands != hgemm::Operands::AnyStrides) {
    TORCH_CHECK(!a_col_major || it->second.operands == hgemm::Operands::AnyMajor, "hgemm_launch: variant '",
                variant, "' needs row-major A");
    TORCH_CHECK(a_col_major ? (a.stride(0) == 1 || a.size(0) == 1) : (a.stride(1) == 1 || a.size(1) == 1),
                "hgemm_launch: variant '", variant, "': A strides do not match a_col_major=", a_col_major);
    TORCH_CHECK(b_col_major ? (b.stride(0) == 1 || b.size(0) == 1) : (b.stride(1) == 1 || b.size(1) == 1),
                "hgemm_launch: B strides do not match b_col_major=", b_col_major);
  }
  const c10::cuda::CUDAGuard guard(a.device());
  TORCH_CHECK(tile >= 0 && tile <= kMaxTile, "hgemm_launch: tile must be 0 (auto) to ", kMaxTile,
              " (the variant's own choices)");
  TORCH_CHECK(split >= 0 && split <= kMaxSplit, "hgemm_launch: split must be 0 (auto) to ", kMaxSplit);
  TORCH_CHECK(sms >= 0 && sms <= kMaxSms, "hgemm_launch: sms must be 0 (the device's) to ", kMaxSms);
  auto launch = [&](auto element, auto launcher) {
    auto p = gemm_args<decltype(element)>(a, b, c, a_col_major, b_col_major);
    p.tile = tile <= 2 ? static_cast<int>(tile) : 0;  // the block tile of the kernels with two
    p.plan_tile = static_cast<int8_t>(tile);             // a Hopper plan pinned (1-32: tests and experiments)
    p.split = static_cast<int>(split);
    p.sms = static_cast<int>(sms);
    return launch_registered(variant, launcher, p, a.device(), acc_fp16);
  };
  return bf16 ? launch(__nv_bfloat16{}, it->second.launch_bf16) : launch(half{}, it->second.launch);
}

// The launch of a registered variant with its arguments filled, and the errors a launch can report, in words.
template <typename E>
LaunchReport launch_registered(const std::string& variant, LauncherOf<E> launch, const GemmArgsOf<E>& p,
                               const at::Device& device, bool acc_fp16) {
  LaunchInfo info;
  const Acc acc = acc_fp16 ? Acc::F16 : Acc::F32;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index());
  cudaError_t err = launch(p, acc, stream, &info);
  if (err == kWorkspaceNeeded && info.workspace_bytes > p.workspace_bytes) {
    // From the caching allocator on this stream: the launch that reads it is queued on the same stream before the
    // block can be handed out again (and a CUDA graph capture takes it from the graph's pool).
    const at::Tensor workspace =
        at::empty({info.workspace_bytes}, at::TensorOptions().dtype(at::kByte).device(device));
    GemmArgsOf<E> q = p;
    q.workspace = workspace.data_ptr();
    q.workspace_bytes = info.workspace_bytes;
    info = LaunchInfo{};
    err = launch(q, acc, stream, &info);
  }
  TORCH_CHECK(err != kWorkspaceNeeded, "hgemm: variant '", variant, "' asked for a workspace of ",
              info.workspace_bytes, " bytes twice");
  TORCH_CHECK(err != cudaErrorMisalignedAddress, "hgemm: variant '", variant,
              "' needs 16-byte aligned rows of A and B (16-byte aligned base, leading dimension a multiple of 8)");
  TORCH_CHECK(!(err == cudaErrorInvalidValue && info.smem_bytes > info.smem_limit), "hgemm: variant '", variant,
              "' needs ", info.smem_bytes, " bytes of shared memory per block; this device allows ",
              info.smem_limit);
  TORCH_CHECK(err == cudaSuccess, "hgemm: variant '", variant, "' failed to launch: ", cudaGetErrorString(err));
  return {{info.grid_x, info.grid_y, info.block, info.smem_bytes, info.smem_limit, info.tile_m, info.tile_n,
           info.split, info.plan},
          info.kernel ? info.kernel : ""};
}

// Launch 2:4 sparse `variant` on the current stream: C = decompress(values, meta) @ B with the dense K = k. Python
// has validated the operands (ptx_kernels.sparse_hgemm); these checks guard the contract again.
LaunchReport sparse_launch(const std::string& variant, const at::Tensor& values, const at::Tensor& meta,
                           const at::Tensor& b, const at::Tensor& c, int64_t k, bool b_col_major,
                           bool acc_fp16, int64_t tile, int64_t schedule) {
  const auto it = hgemm::registry().find(variant);
  TORCH_CHECK(it != hgemm::registry().end(), "sparse_hgemm: no PTX variant named '", variant, "' in this build");
  for (const auto* t : {&values, &b, &c})
    TORCH_CHECK(t->is_cuda() && t->scalar_type() == at::kHalf && t->dim() == 2 && t->device() == values.device(),
                "sparse_launch: expected 2-D CUDA float16 tensors on one device");
  const int64_t kp = (k + 31) / 32 * 32, m = values.size(0);
  TORCH_CHECK(meta.is_cuda() && meta.device() == values.device() && meta.scalar_type() == at::kInt &&
                  meta.is_contiguous() && meta.dim() == 3 && meta.size(0) == kp / 32 && meta.size(1) == (m + 15) / 16 &&
                  meta.size(2) == 16,
              "sparse_launch: metadata must be a contiguous CUDA int32 tensor of shape (", kp / 32, ", ", (m + 15) / 16,
              ", 16)");
  TORCH_CHECK(values.size(1) == kp / 2 && b.size(0) == k && c.size(0) == m && c.size(1) == b.size(1),
              "sparse_launch: shapes do not match");
  TORCH_CHECK(values.stride(1) == 1 && c.stride(1) == 1 &&
                  (b_col_major ? (b.stride(0) == 1 || b.size(0) == 1) : (b.stride(1) == 1 || b.size(1) == 1)),
              "sparse_launch: row-major values and C, B strides matching b_col_major");
  const c10::cuda::CUDAGuard guard(values.device());
  GemmArgs p;
  p.A = reinterpret_cast<const half*>(values.data_ptr<at::Half>());
  p.B = reinterpret_cast<const half*>(b.data_ptr<at::Half>());
  p.C = reinterpret_cast<half*>(c.data_ptr<at::Half>());
  p.E = reinterpret_cast<const uint32_t*>(meta.data_ptr<int32_t>());
  p.M = static_cast<int>(m);
  p.N = static_cast<int>(b.size(1));
  p.K = static_cast<int>(k);
  p.sam = values.stride(0);
  p.sak = 1;
  p.sbk = b.stride(0);
  p.sbn = b.stride(1);
  p.ldc = c.stride(0);
  p.b_col_major = b_col_major;
  TORCH_CHECK(tile >= 0 && tile <= 2, "sparse_launch: tile must be 0 (auto), 1 (large) or 2 (base)");
  TORCH_CHECK(schedule >= 0 && schedule <= 3, "sparse_launch: schedule must be 0 (auto), 1, 2 or 3");
  p.tile = static_cast<int>(tile);
  p.schedule = static_cast<int8_t>(schedule);
  return launch_registered(variant, it->second.launch, p, values.device(), acc_fp16);
}

// The instruction ceilings this build holds (host/registry.h): "mma.sync", and "wgmma" on sm_90a.
std::vector<std::string> hgemm_ceilings() {
  std::vector<std::string> names;
  for (const auto& kv : hgemm::ceilings()) names.push_back(kv.first);
  return names;
}

// One launch of ceiling `name` on `blocks_per_sm` x SMs blocks; returns the FLOPs it performs so Python can turn a
// time into TFLOPS.
// blocks_per_sm: 0 takes the ceiling's own (as many warps as saturate the pipe); fewer ask what the pipe gives at a
// GEMM kernel's occupancy.
double hgemm_ceiling(const std::string& name, const at::Tensor& sink, int64_t iters, bool acc_fp16,
                     int64_t blocks_per_sm) {
  const auto it = hgemm::ceilings().find(name);
  TORCH_CHECK(it != hgemm::ceilings().end(), "hgemm_ceiling: no ceiling named '", name, "' in this build");
  const hgemm::Ceiling& c = it->second;
  TORCH_CHECK(blocks_per_sm >= 0 && blocks_per_sm <= 64, "hgemm_ceiling: blocks_per_sm must be 0 (the ceiling's own) to 64");
  const int64_t per_sm = blocks_per_sm ? blocks_per_sm : int64_t(c.blocks_per_sm);
  const int64_t blocks = per_sm * at::cuda::getDeviceProperties(sink.device().index())->multiProcessorCount;
  TORCH_CHECK(sink.is_cuda() && sink.scalar_type() == at::kFloat && sink.numel() >= blocks * c.sink_per_block,
              "hgemm_ceiling: sink must be a CUDA float tensor of at least ", blocks * c.sink_per_block, " elements");
  const c10::cuda::CUDAGuard guard(sink.device());
  const cudaError_t err = c.launch(static_cast<int>(blocks), static_cast<int>(iters), acc_fp16 ? Acc::F16 : Acc::F32,
                                   sink.data_ptr<float>(), at::cuda::getCurrentCUDAStream(sink.device().index()));
  TORCH_CHECK(err == cudaSuccess, "hgemm_ceiling '", name, "' failed to launch: ", cudaGetErrorString(err));
  return c.flops(blocks, iters);
}

// Copies srcs[i] into dsts[i] in one launch (ptx_kernels.call stages a call's A and B so: host/stage_copy.cu): one
// or two pairs of 2-D CUDA tensors of one shape and one 2-byte dtype, unit column stride; each dst with a 16-byte
// aligned base and row pitch (a staging buffer's).
void stage_copy(const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& dsts) {
  TORCH_CHECK(!srcs.empty() && srcs.size() <= 2 && srcs.size() == dsts.size(),
              "stage_copy: one or two source tensors and as many destinations");
  StageCopy copies[2];
  for (size_t i = 0; i < srcs.size(); ++i) {
    const at::Tensor &s = srcs[i], &d = dsts[i];
    TORCH_CHECK(s.is_cuda() && s.device() == srcs[0].device() && d.device() == s.device() && s.dim() == 2 &&
                    d.sizes() == s.sizes() && s.element_size() == 2 && d.scalar_type() == s.scalar_type(),
                "stage_copy: pairs of 2-D CUDA tensors of one shape and one 2-byte dtype, on one device");
    TORCH_CHECK((s.stride(1) == 1 || s.size(1) <= 1) && (d.stride(1) == 1 || d.size(1) <= 1),
                "stage_copy: tensors with unit column stride");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(d.data_ptr()) % 16 == 0 && d.stride(0) % 8 == 0,
                "stage_copy: a destination with a 16-byte aligned base and row pitch");
    copies[i] = StageCopy{s.data_ptr(), d.data_ptr(), s.stride(0), d.stride(0), s.size(0), s.size(1)};
  }
  const c10::cuda::CUDAGuard guard(srcs[0].device());
  const cudaError_t err = launch_stage_copy(copies, static_cast<int>(srcs.size()),
                                            at::cuda::getCurrentCUDAStream(srcs[0].device().index()));
  TORCH_CHECK(err == cudaSuccess, "stage_copy failed to launch: ", cudaGetErrorString(err));
}

// ---- fragment-layout probes: small outputs, one warp, synchronous results for the tests -------------------
namespace {
cudaStream_t stream_of(const at::Tensor& t) { return at::cuda::getCurrentCUDAStream(t.device().index()); }
void check_probe(cudaError_t err, const char* what) {
  TORCH_CHECK(err != cudaErrorInvalidDeviceFunction, what, " needs sm_90 (stmatrix)");
  TORCH_CHECK(err == cudaSuccess, what, " failed: ", cudaGetErrorString(err));
}
at::TensorOptions on_cuda(at::ScalarType t) { return at::TensorOptions().dtype(t).device(at::kCUDA); }
}  // namespace

at::Tensor probe_ldmatrix(int64_t num, bool trans) {
  auto out = at::zeros({32, 2 * num}, on_cuda(at::kShort));
  check_probe(launch_probe_ldmatrix(static_cast<int>(num), trans, reinterpret_cast<uint16_t*>(out.data_ptr<int16_t>()),
                                    stream_of(out)), "probe_ldmatrix");
  return out;
}

at::Tensor probe_stmatrix(int64_t num, bool trans) {
  auto out = at::zeros({num * 64}, on_cuda(at::kShort));
  check_probe(launch_probe_stmatrix(static_cast<int>(num), trans, reinterpret_cast<uint16_t*>(out.data_ptr<int16_t>()),
                                    stream_of(out)), "probe_stmatrix");
  return out;
}

at::Tensor probe_mma(const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, bool fp16) {
  TORCH_CHECK(a.is_cuda() && a.scalar_type() == at::kInt && a.numel() == 128, "probe_mma: a is (32, 4) int32");
  TORCH_CHECK(b.is_cuda() && b.scalar_type() == at::kInt && b.numel() == 64, "probe_mma: b is (32, 2) int32");
  TORCH_CHECK(c.is_cuda() && c.is_contiguous() && a.is_contiguous() && b.is_contiguous(), "probe_mma: contiguous CUDA");
  TORCH_CHECK(fp16 ? (c.scalar_type() == at::kInt && c.numel() == 64)
                   : (c.scalar_type() == at::kFloat && c.numel() == 128),
              "probe_mma: c is (32, 2) int32 for fp16 accumulation, (32, 4) float32 for fp32");
  auto d = at::empty_like(c);
  check_probe(launch_probe_mma(fp16, reinterpret_cast<const uint32_t*>(a.data_ptr<int32_t>()),
                               reinterpret_cast<const uint32_t*>(b.data_ptr<int32_t>()), c.data_ptr(), d.data_ptr(),
                               stream_of(a)), "probe_mma");
  return d;
}

at::Tensor probe_mma_sp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& e, const at::Tensor& c, bool fp16,
                        int64_t sel) {
  for (const auto* t : {&a, &b, &e, &c})
    TORCH_CHECK(t->is_cuda() && t->is_contiguous(), "probe_mma_sp: contiguous CUDA tensors");
  TORCH_CHECK(a.scalar_type() == at::kInt && a.numel() == 128 && b.scalar_type() == at::kInt &&
                  b.numel() == 128 && e.scalar_type() == at::kInt && e.numel() == 32,
              "probe_mma_sp: a, b are (32, 4) int32, e is (32,) int32");
  TORCH_CHECK(fp16 ? (c.scalar_type() == at::kInt && c.numel() == 64)
                   : (c.scalar_type() == at::kFloat && c.numel() == 128),
              "probe_mma_sp: c is (32, 2) int32 for fp16 accumulation, (32, 4) float32 for fp32");
  auto d = at::empty_like(c);
  check_probe(launch_probe_mma_sp(fp16, static_cast<int>(sel), reinterpret_cast<const uint32_t*>(a.data_ptr<int32_t>()),
                                  reinterpret_cast<const uint32_t*>(b.data_ptr<int32_t>()),
                                  reinterpret_cast<const uint32_t*>(e.data_ptr<int32_t>()), c.data_ptr(), d.data_ptr(),
                                  stream_of(a)), "probe_mma_sp");
  return d;
}

// a: (64, 32) int16 compressed values, b: (256, 64) int16 (n, k), e: (128, 2) int32 metadata registers; returns the
// accumulators per thread in register order: (128, 128) int32 bits of fp32, or (128, 64) fp16 pairs.
at::Tensor probe_wgmma_sp(const at::Tensor& a, const at::Tensor& b, const at::Tensor& e, bool fp16, bool b_col,
                          int64_t sel) {
  TORCH_CHECK(wgmma_sp_probe() != nullptr, "probe_wgmma_sp needs a build for sm_90a (wgmma.mma_async.sp)");
  for (const auto* t : {&a, &b, &e})
    TORCH_CHECK(t->is_cuda() && t->is_contiguous(), "probe_wgmma_sp: contiguous CUDA tensors");
  TORCH_CHECK(a.scalar_type() == at::kShort && a.numel() == 64 * 32 && b.scalar_type() == at::kShort &&
                  b.numel() == 256 * 64 && e.scalar_type() == at::kInt && e.numel() == 128 * 2,
              "probe_wgmma_sp: a is (64, 32) int16, b (256, 64) int16, e (128, 2) int32");
  auto d = at::empty({128, fp16 ? 64 : 128}, on_cuda(at::kInt));
  check_probe(wgmma_sp_probe()(fp16, b_col, static_cast<int>(sel), reinterpret_cast<const uint16_t*>(a.data_ptr<int16_t>()),
                               reinterpret_cast<const uint16_t*>(b.data_ptr<int16_t>()),
                               reinterpret_cast<const uint32_t*>(e.data_ptr<int32_t>()),
                               reinterpret_cast<uint32_t*>(d.data_ptr<int32_t>()), stream_of(a)), "probe_wgmma_sp");
  return d;
}

std::vector<at::Tensor> probe_wmma(int64_t which) {
  auto out = at::zeros({32, 16}, on_cuda(at::kInt));
  auto n = at::zeros({1}, on_cuda(at::kInt));
  check_probe(launch_probe_wmma(static_cast<int>(which), reinterpret_cast<uint32_t*>(out.data_ptr<int32_t>()),
                                n.data_ptr<int32_t>(), stream_of(out)), "probe_wmma");
  return {out, n};
}

std::vector<at::Tensor> probe_asm() {
  auto out = at::zeros({32, 16}, on_cuda(at::kInt));
  auto out64 = at::zeros({32}, on_cuda(at::kLong));
  auto outd = at::zeros({32}, on_cuda(at::kDouble));
  check_probe(launch_probe_asm(reinterpret_cast<uint32_t*>(out.data_ptr<int32_t>()),
                               reinterpret_cast<uint64_t*>(out64.data_ptr<int64_t>()), outd.data_ptr<double>(),
                               stream_of(out)), "probe_asm");
  return {out, out64, outd};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("hgemm_launch", &hgemm_launch, py::arg("variant"), py::arg("a"), py::arg("b"), py::arg("c"),
        py::arg("a_col_major"), py::arg("b_col_major"), py::arg("acc_fp16"), py::arg("tile"), py::arg("split"),
        py::arg("sms") = 0);
  m.def("sparse_launch", &sparse_launch);
  m.def("hgemm_variants", &hgemm_variants);
  m.def("stage_copy", &stage_copy);
  m.def("hgemm_load_on_demand", &hgemm_load_on_demand);
  m.def("hgemm_ceilings", &hgemm_ceilings);
  m.def("hgemm_ceiling", &hgemm_ceiling);
  m.def("probe_ldmatrix", &probe_ldmatrix);
  m.def("probe_stmatrix", &probe_stmatrix);
  m.def("probe_mma", &probe_mma);
  m.def("probe_wmma", &probe_wmma);
  m.def("probe_mma_sp", &probe_mma_sp);
  m.def("probe_wgmma_sp", &probe_wgmma_sp);
  m.def("probe_asm", &probe_asm);
}
