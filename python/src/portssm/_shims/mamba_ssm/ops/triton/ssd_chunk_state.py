"""mamba_ssm.ops.triton.ssd_chunk_state: not provided by portssm (importing it raises ImportError)."""

from mamba_ssm.ops.triton._gaps import TRITON_BLOCKS_GAP, missing_module

raise missing_module(__name__, TRITON_BLOCKS_GAP)
