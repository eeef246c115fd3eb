"""mamba_ssm.models.config_mamba: MambaConfig (portssm.torch.models.config)."""

from portssm.torch.models.config import MambaConfig

__all__ = ["MambaConfig"]
