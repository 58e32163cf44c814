// wmma_multistage's fp16 tile with one buffer of operand fragments (FRAG_BUFS = 1: the shipped tile before
// FRAGS_A2B1), beside the shipped one in wmma_multistage.cu. Compiled by the CPU tests, which compare how far
// ahead of its MMAs each main loop loads their operands (toolchain.operand_lead). The tile sweep times both
// (docs/design/wmma.md). Not a kernel anyone runs from here.
#include "sm80/wmma_multistage.cu"

using OneBuffer = wmma_multistage::Tile<256, 256, 32, 4, 2, 4, 1, 1, false, true>;

cudaError_t launch_one_buffer(const GemmArgs& p, cudaStream_t stream) {
  return wmma_multistage::launch<OneBuffer, Acc::F16, false>(p, stream, nullptr);
}
