"""mamba_ssm.modules.mamba3: not provided (portssm has no Mamba-3 kernels yet); importing it
raises the ImportError of portssm.torch.modules.mamba3, which names the gap."""

import portssm.torch.modules.mamba3  # noqa: F401  (raises ImportError)
