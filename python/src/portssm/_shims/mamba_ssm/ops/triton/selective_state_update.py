"""mamba_ssm.ops.triton.selective_state_update on portssm."""

from portssm.torch.reference import selective_state_update_ref
from portssm.torch.state_update import selective_state_update

__all__ = ["selective_state_update", "selective_state_update_ref"]
