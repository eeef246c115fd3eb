"""mamba_ssm.models.mixer_seq_simple: MambaLMHeadModel, MixerModel, create_block,
_init_weights on portssm (portssm.torch.models.mixer_seq), and the names the reference's module
imports."""

from portssm.torch.generation import GenerationMixin
from portssm.torch.hub import load_config_hf, load_state_dict_hf
from portssm.torch.models.config import MambaConfig
from portssm.torch.models.mixer_seq import (MambaLMHeadModel, MixerModel, _init_weights,
                                            create_block)
from portssm.torch.modules.block import Block
from portssm.torch.modules.mamba1 import Mamba
from portssm.torch.modules.mamba2 import Mamba2
from portssm.torch.modules.mha import MHA
from portssm.torch.modules.mlp import GatedMLP
from portssm.torch.norms import RMSNorm, layer_norm_fn, rms_norm_fn

__all__ = ["MambaLMHeadModel", "MixerModel", "create_block", "_init_weights", "MambaConfig",
           "Mamba", "Mamba2", "MHA", "GatedMLP", "Block", "GenerationMixin", "load_config_hf",
           "load_state_dict_hf", "RMSNorm", "layer_norm_fn", "rms_norm_fn"]
