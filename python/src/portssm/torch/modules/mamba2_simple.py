"""Mamba2Simple: mamba-ssm 2.3.2.post1's mamba_ssm.modules.mamba2_simple.Mamba2Simple (the
training-only Mamba-2 mixer with optional learnable initial states) on portssm's kernels, with
its constructor, parameter names, shapes and initialisation.

As in mamba-ssm, with ngroups > 1 the fused path (use_mem_eff_path) normalises y per group of
d_inner / ngroups channels (mamba_split_conv1d_scan_combined's gated norm) and the unfused path
over all d_inner channels (self.norm, group_size None): the two paths differ there.

Where it differs from mamba-ssm: with use_mem_eff_path=False the conv also restarts at seq_idx
boundaries (mamba-ssm's unfused path lets the conv read across them, unlike its fused path), so
both paths give the same result.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..causal_conv1d import causal_conv1d_fn
from ..norms import GatedRMSNorm
from ..ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined
from ._init import conv_weight, depthwise_conv1d, inverse_softplus_dt

_NO_LIMIT = (0.0, float("inf"))


class Mamba2Simple(nn.Module):
    def __init__(
        self,
        d_model,
        d_state=64,
        d_conv=4,
        conv_init=None,
        expand=2,
        headdim=128,
        ngroups=1,
        A_init_range=(1, 16),
        dt_min=0.001,
        dt_max=0.1,
        dt_init_floor=1e-4,
        dt_limit=(0.0, float("inf")),
        learnable_init_states=False,
        activation="swish",
        bias=False,
        conv_bias=True,
        # fused kernel options
        chunk_size=256,
        use_mem_eff_path=True,
        layer_idx=None,
        device=None,
        dtype=None,
    ):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.d_model = d_model
        self.d_state = d_state
        self.d_conv = d_conv
        self.conv_init = conv_init
        self.expand = expand
        self.d_inner = self.expand * self.d_model
        self.headdim = headdim
        self.ngroups = ngroups
        if self.d_inner % self.headdim:
            raise ValueError("Mamba2Simple: d_inner (%d) must be a multiple of headdim (%d)"
                             % (self.d_inner, self.headdim))
        self.nheads = self.d_inner // self.headdim
        self.dt_limit = dt_limit
        self.learnable_init_states = learnable_init_states
        if activation not in (None, "silu", "swish"):
            raise ValueError("Mamba2Simple: activation must be None, 'silu' or 'swish', got %r"
                             % (activation,))
        self.activation = activation
        self.chunk_size = chunk_size
        self.use_mem_eff_path = use_mem_eff_path
        self.layer_idx = layer_idx

        # in_proj's output, in order: [z, x, B, C, dt]
        d_in_proj = 2 * self.d_inner + 2 * self.ngroups * self.d_state + self.nheads
        self.in_proj = nn.Linear(self.d_model, d_in_proj, bias=bias, **factory_kwargs)

        conv_dim = self.d_inner + 2 * self.ngroups * self.d_state
        self.conv1d = depthwise_conv1d(conv_dim, d_conv, conv_bias, factory_kwargs)
        if self.conv_init is not None:
            nn.init.uniform_(self.conv1d.weight, -self.conv_init, self.conv_init)

        if self.learnable_init_states:
            self.init_states = nn.Parameter(
                torch.zeros(self.nheads, self.headdim, self.d_state, **factory_kwargs))
            self.init_states._no_weight_decay = True

        self.act = nn.SiLU()

        self.dt_bias = nn.Parameter(
            inverse_softplus_dt(self.nheads, dt_min, dt_max, dt_init_floor, factory_kwargs))
        self.dt_bias._no_weight_decay = True

        if not (A_init_range[0] > 0 and A_init_range[1] >= A_init_range[0]):
            raise ValueError("Mamba2Simple: A_init_range must be (lo, hi) with 0 < lo <= hi, "
                             "got %r" % (A_init_range,))
        A = torch.empty(self.nheads, dtype=torch.float32, device=device).uniform_(*A_init_range)
        self.A_log = nn.Parameter(torch.log(A).to(dtype=dtype))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.nheads, device=device))
        self.D._no_weight_decay = True

        # gated RMSNorm right before out_proj
        self.norm = GatedRMSNorm(self.d_inner, eps=1e-5, norm_before_gate=False,
                                 **factory_kwargs)
        self.out_proj = nn.Linear(self.d_inner, self.d_model, bias=bias, **factory_kwargs)

    def forward(self, u, seq_idx=None):
        """u: (B, L, D); seq_idx: (B, L) int32 for packed rows.  Returns the shape of u."""
        batch, seqlen, _ = u.shape
        zxbcdt = self.in_proj(u)
        A = -torch.exp(self.A_log)
        initial_states = (self.init_states.unsqueeze(0).expand(batch, -1, -1, -1)
                          if self.learnable_init_states else None)
        limit = {} if tuple(self.dt_limit) == _NO_LIMIT else dict(dt_limit=self.dt_limit)

        if self.use_mem_eff_path:
            return mamba_split_conv1d_scan_combined(
                zxbcdt, conv_weight(self.conv1d), self.conv1d.bias, self.dt_bias, A, D=self.D,
                chunk_size=self.chunk_size, seq_idx=seq_idx, activation=self.activation,
                rmsnorm_weight=self.norm.weight, rmsnorm_eps=self.norm.eps,
                outproj_weight=self.out_proj.weight, outproj_bias=self.out_proj.bias,
                headdim=self.headdim, ngroups=self.ngroups, norm_before_gate=False,
                initial_states=initial_states, **limit)

        z, xBC, dt = torch.split(
            zxbcdt, [self.d_inner, self.d_inner + 2 * self.ngroups * self.d_state, self.nheads],
            dim=-1)
        dt = F.softplus(dt + self.dt_bias)  # (B, L, nheads)
        xBC = causal_conv1d_fn(x=xBC.transpose(1, 2), weight=conv_weight(self.conv1d),
                               bias=self.conv1d.bias, activation=self.activation,
                               seq_idx=seq_idx).transpose(1, 2)
        # x, B, C are V, K, Q of the SSM/attention duality
        x, B, C = torch.split(
            xBC, [self.d_inner, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1)
        y = mamba_chunk_scan_combined(
            x.reshape(batch, seqlen, self.nheads, self.headdim), dt, A,
            B.reshape(batch, seqlen, self.ngroups, self.d_state),
            C.reshape(batch, seqlen, self.ngroups, self.d_state),
            chunk_size=self.chunk_size, D=self.D, z=None, seq_idx=seq_idx,
            initial_states=initial_states, **limit)
        y = self.norm(y.reshape(batch, seqlen, self.d_inner), z)
        return self.out_proj(y)
