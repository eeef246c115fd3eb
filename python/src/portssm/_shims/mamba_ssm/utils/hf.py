"""mamba_ssm.utils.hf on portssm (portssm.torch.hub): load_config_hf, load_state_dict_hf for a
local directory or a Hub id (through huggingface_hub and its cache)."""

from portssm.torch.hub import CONFIG_NAME, WEIGHTS_NAME, load_config_hf, load_state_dict_hf

__all__ = ["load_config_hf", "load_state_dict_hf", "CONFIG_NAME", "WEIGHTS_NAME"]
