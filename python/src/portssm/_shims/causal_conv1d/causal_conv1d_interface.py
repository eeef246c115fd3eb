"""causal_conv1d.causal_conv1d_interface on portssm."""

from portssm.torch.causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from portssm.torch.compat import (CausalConv1dFn, causal_conv1d_bwd_function,
                                  causal_conv1d_fwd_function, causal_conv1d_update_function)
from portssm.torch.reference import causal_conv1d_ref, causal_conv1d_update_ref

__all__ = ["CausalConv1dFn", "causal_conv1d_fn", "causal_conv1d_ref", "causal_conv1d_update",
           "causal_conv1d_update_ref", "causal_conv1d_fwd_function",
           "causal_conv1d_bwd_function", "causal_conv1d_update_function"]
