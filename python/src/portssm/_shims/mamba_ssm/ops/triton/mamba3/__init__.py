"""Mamba-3 kernels: not provided by portssm (importing this raises ImportError)."""

from mamba_ssm import MAMBA3_GAP
from mamba_ssm.ops.triton._gaps import missing_module

raise missing_module(__name__, MAMBA3_GAP)
