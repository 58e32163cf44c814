"""`Linear`: a drop-in `nn.Linear` (fp16 or bf16) on ptx_kernels.hgemm, and `route_linears`, which swaps every
`nn.Linear` of a model for one: `hgemm_common.linear.HGEMMLinear` with package="ptx"."""
from hgemm_common.linear import for_package

from . import ops  # noqa: F401  registers torch.ops.tensorcore_hgemm.ptx_hgemm

Linear, route_linears = for_package("ptx", __name__)
