"""Mamba3 (mamba-ssm's mamba_ssm.modules.mamba3) is not implemented by portssm yet: its scans
(SISO and MIMO chunked scans with rotary state, their decode step) are not in libportssm.  This
module is where the mixer will live once they are; until then importing it raises ImportError
naming the gap, so that code written for Mamba-3 fails at once rather than running something
else."""

raise ImportError(
    "Mamba3 (mamba_ssm.modules.mamba3) is not implemented by portssm yet: libportssm has no "
    "Mamba-3 scan kernels. Use Mamba or Mamba2 (portssm.torch.modules), or install mamba-ssm "
    "itself for Mamba-3 (a real mamba-ssm install takes precedence over portssm's alias).")
