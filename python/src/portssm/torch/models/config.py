"""MambaConfig: mamba-ssm 2.3.2.post1's mamba_ssm.models.config_mamba.MambaConfig, the same
fields and defaults (a config.json written by either package loads in the other)."""

from dataclasses import dataclass, field


@dataclass
class MambaConfig:
    d_model: int = 2560
    d_intermediate: int = 0  # GatedMLP width per block; 0: no MLP
    n_layer: int = 64
    vocab_size: int = 50277
    ssm_cfg: dict = field(default_factory=dict)  # Mamba / Mamba2 arguments; "layer": "Mamba2"
    attn_layer_idx: list = field(default_factory=list)  # these layers are MHA
    attn_cfg: dict = field(default_factory=dict)  # MHA arguments
    rms_norm: bool = True
    residual_in_fp32: bool = True
    fused_add_norm: bool = True
    pad_vocab_size_multiple: int = 8
    tie_embeddings: bool = True
