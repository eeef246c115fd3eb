"""mamba_ssm.distributed (tensor-parallel layers): not provided by portssm (importing it raises
ImportError)."""

from mamba_ssm.ops.triton._gaps import missing_module

raise missing_module(__name__, "portssm has no tensor-parallel (mamba_ssm.distributed) layers; "
                     "run the model on one device, or install mamba-ssm itself (a real install "
                     "takes precedence over portssm's alias)")
