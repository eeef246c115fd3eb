"""Drop-in for mamba-ssm 2.3.2.post1's selective_state_update
(mamba_ssm.ops.triton.selective_state_update): same name, argument order, defaults and return
value; D=None and dt_bias=None work (they raise in the reference)."""

from __future__ import annotations

from . import _checks, _impl, _registry
from ._runtime import compile_boundary, is_compiling

_FN = "selective_state_update"


@compile_boundary
def selective_state_update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False,
                           state_batch_indices=None):
    """
    state: (batch, dim, dstate) or (batch, nheads, dim, dstate), updated in place
    x: (batch, dim) or (batch, nheads, dim)
    dt: (batch, dim) or (batch, nheads, dim)
    A: (dim, dstate) or (nheads, dim, dstate)
    B: (batch, dstate) or (batch, ngroups, dstate)
    C: (batch, dstate) or (batch, ngroups, dstate)
    D: (dim,) or (nheads, dim)
    z: (batch, dim) or (batch, nheads, dim)
    dt_bias: (dim,) or (nheads, dim)
    state_batch_indices: (batch,) int32, the state row of each sequence
    Return:
        out: (batch, dim) or (batch, nheads, dim)
    A, D and dt_bias are used in float32 (cast when given in float16/bfloat16).  The state may be
    float32, float16 or bfloat16 whatever x's dtype: it is updated in place in its own dtype (no
    float32 copy), computed in float32 and rounded once (to nearest even) when stored.  float64
    is refused, as by every op.
    """
    if is_compiling():
        _checks.floating(_FN, "state", state)
        A, D = _checks.f32(_FN, "A", A), _checks.f32(_FN, "D", D)
        dt_bias = _checks.f32(_FN, "dt_bias", dt_bias)
        return _registry.state_update(state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices,
                                      bool(dt_softplus))
    # eager decode: straight to the implementation, past the dispatcher (which also converts
    # A, D and dt_bias to float32, while packing them)
    return _impl.state_update(state, x, dt, A, B, C, D, z, dt_bias, state_batch_indices,
                              bool(dt_softplus))
