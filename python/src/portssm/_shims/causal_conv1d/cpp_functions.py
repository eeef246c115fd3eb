"""causal_conv1d.cpp_functions on portssm: the raw forward, backward and decode step (no
autograd), with causal-conv1d's argument order, on libportssm's ops instead of the
causal_conv1d_cuda extension."""

from portssm.torch.compat import (causal_conv1d_bwd_function, causal_conv1d_fwd_function,
                                  causal_conv1d_update_function)

# causal-conv1d registers its raw ops as torch custom ops in this library; portssm's are
# "portssm::causal_conv1d_fwd" and so on
LIBRARY_NAME = "portssm"

__all__ = ["causal_conv1d_fwd_function", "causal_conv1d_bwd_function",
           "causal_conv1d_update_function", "LIBRARY_NAME"]
