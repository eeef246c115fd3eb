"""mamba_ssm.modules.mha: MHA on portssm (portssm.torch.modules.mha: torch's
scaled_dot_product_attention, never flash-attn; RotaryEmbedding is portssm's, with
flash-attn's semantics)."""

from portssm.torch.causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from portssm.torch.modules.mha import MHA, _update_kv_cache
from portssm.torch.modules.rotary import RotaryEmbedding

__all__ = ["MHA", "RotaryEmbedding", "causal_conv1d_fn", "causal_conv1d_update"]
