"""custom_fwd, custom_bwd and custom_amp_decorator as mamba-ssm 2.3.2.post1's
mamba_ssm.utils.torch exports them: torch.amp's decorators bound to device_type="cuda" where
torch has them (torch >= 2.4), else torch.cuda.amp's, so that code written against either torch
decorates its autograd Functions the same way."""

from __future__ import annotations

import torch

if hasattr(torch.amp, "custom_fwd"):
    from torch.amp import custom_bwd as _custom_bwd
    from torch.amp import custom_fwd as _custom_fwd
    _TORCH_AMP = True
else:  # torch < 2.4
    from torch.cuda.amp import custom_bwd as _custom_bwd
    from torch.cuda.amp import custom_fwd as _custom_fwd
    _TORCH_AMP = False


def custom_amp_decorator(dec, cuda_amp_deprecated):
    """dec with device_type="cuda" added to its arguments when cuda_amp_deprecated (torch.amp's
    decorators need it; torch.cuda.amp's take none)."""

    def decorator(*args, **kwargs):
        if cuda_amp_deprecated:
            kwargs["device_type"] = "cuda"
        return dec(*args, **kwargs)

    decorator.__doc__ = dec.__doc__
    return decorator


custom_fwd = custom_amp_decorator(_custom_fwd, _TORCH_AMP)
custom_bwd = custom_amp_decorator(_custom_bwd, _TORCH_AMP)
