"""mamba_ssm.modules on portssm's module layer (portssm.torch.modules): the submodules
mamba_simple, mamba2, mamba2_simple, block, mlp, mha; mamba3 raises ImportError (no Mamba-3
kernels in portssm yet)."""
