// ptx/griddepcontrol.cuh — programmatic dependent launch: a kernel launched after another on the same stream with
// cudaLaunchAttributeProgrammaticStreamSerialization may start while the first is still running, and waits for it
// where it reads the first one's results (sm_90).
//
// One __device__ __forceinline__ wrapper per PTX instruction, with its exact PTX string and its PTX ISA section
// (https://docs.nvidia.com/cuda/parallel-thread-execution/).
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "ptx/griddepcontrol.cuh needs sm_90 or newer (programmatic dependent launch)"
#endif

namespace ptx {

// griddepcontrol.launch_dependents;  — this CTA is far enough that the grid launched after it (with the attribute
// above) may be scheduled; that grid starts once every CTA of this one has said so or exited. Only a scheduling
// hint: what the dependent reads is guarded by its griddepcontrol.wait.
// ISA: 9.7.13.13 "Parallel Synchronization and Communication Instructions: griddepcontrol"
// https://docs.nvidia.com/cuda/parallel-thread-execution/#parallel-synchronization-and-communication-instructions-griddepcontrol
__device__ __forceinline__ void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// griddepcontrol.wait;  — blocks until every grid this one depends on has completed and its memory operations are
// visible. Returns at once in a grid launched without the attribute (its prerequisites finished before it began).
__device__ __forceinline__ void griddepcontrol_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

}  // namespace ptx
