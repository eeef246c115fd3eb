"""causal_conv1d.causal_conv1d_varlen on portssm."""

from portssm.torch.compat import causal_conv1d_varlen_states
from portssm.torch.reference import causal_conv1d_varlen_states_ref

__all__ = ["causal_conv1d_varlen_states", "causal_conv1d_varlen_states_ref"]
