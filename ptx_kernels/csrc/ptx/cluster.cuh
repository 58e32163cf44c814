// ptx/cluster.cuh — thread block clusters: a CTA's rank, shared addresses in a peer CTA and loads from them, the
// cluster barrier and arrivals on a peer's mbarrier (sm_90).
//
// One __device__ __forceinline__ wrapper per PTX instruction, with its exact PTX string and its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/).
#pragma once
#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "ptx/cluster.cuh needs sm_90 or newer (thread block clusters)"
#endif

namespace ptx {

// mov.u32 r, %cluster_ctarank;  — this CTA's rank in its cluster (0 .. cluster size - 1).
// ISA: 10.25 "Special Registers: %cluster_ctarank"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#special-registers-cluster-ctarank
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}

// mov.u32 r, %cluster_nctarank;  — the number of CTAs in this CTA's cluster (1 for a launch without clusters).
// ISA: 10.26 "Special Registers: %cluster_nctarank"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#special-registers-cluster-nctarank
__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}

// mapa.shared::cluster.u32 remote, local, rank;  — the shared::cluster address of the same offset in CTA `rank`.
// ISA: 9.7.9.21 "Data Movement and Conversion Instructions: mapa"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-mapa
__device__ __forceinline__ uint32_t mapa_shared(uint32_t local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}

// ld.shared::cluster.v4.f32 {x, y, z, w}, [addr];  — 16 bytes from the shared memory of any CTA of the cluster
// (addr from mapa_shared; distributed shared memory). Ordered after the owner's writes by a cluster barrier.
// ISA: 9.7.9.8 "Data Movement and Conversion Instructions: ld"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-ld
__device__ __forceinline__ float4 ld_shared_cluster_v4_f32(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// mbarrier.arrive.shared::cluster.b64 _, [bar];  — one arrival on an mbarrier of any CTA of the cluster (bar from
// mapa_shared), with the default .release.cta semantics. Not .release.cluster: sm_90 has no cluster-scope fence, so
// that form compiles to MEMBAR.ALL.GPU before the arrive, in the main loop (it halved a multicast GEMM's speed).
// Releasing a stage to a peer's TMA needs no fence: the wgmma reads are complete once wgmma.wait_group returns.
// ISA: 9.7.13.15.13 "mbarrier.arrive"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-mbarrier-arrive
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// fence.mbarrier_init.release.cluster;  — makes this thread's mbarrier.init visible to the other CTAs of the
// cluster (their copies and arrivals may target these barriers right after the cluster barrier).
// ISA: 9.7.13.4 "Parallel Synchronization and Communication Instructions: membar / fence"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-membar
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;  — every thread of every CTA of
// the cluster meets here (the cluster's __syncthreads).
// ISA: 9.7.13.2 "Parallel Synchronization and Communication Instructions: barrier.cluster"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-barrier-cluster
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

}  // namespace ptx
