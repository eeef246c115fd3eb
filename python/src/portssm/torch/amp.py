"""custom_fwd and custom_bwd as mamba-ssm 2.3.2.post1's mamba_ssm.utils.torch exports them:
torch.amp's decorators bound to device_type="cuda" where torch has them (torch >= 2.4), else
torch.cuda.amp's, so that code written against either torch decorates its autograd Functions
the same way."""

from __future__ import annotations

import torch

if hasattr(torch.amp, "custom_fwd"):
    from torch.amp import custom_bwd as _custom_bwd
    from torch.amp import custom_fwd as _custom_fwd
    _CUDA_DEFAULT = True
else:  # torch < 2.4
    from torch.cuda.amp import custom_bwd as _custom_bwd
    from torch.cuda.amp import custom_fwd as _custom_fwd
    _CUDA_DEFAULT = False


def _bound_to_cuda(decorator):
    def bound(*args, **kwargs):
        if _CUDA_DEFAULT:
            kwargs["device_type"] = "cuda"
        return decorator(*args, **kwargs)
    bound.__doc__ = decorator.__doc__
    return bound


custom_fwd = _bound_to_cuda(_custom_fwd)
custom_bwd = _bound_to_cuda(_custom_bwd)
