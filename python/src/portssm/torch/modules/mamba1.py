"""Mamba (the Mamba-1 mixer) on portssm's kernels: mamba-ssm 2.3.2.post1's
mamba_ssm.modules.mamba_simple.Mamba, with its constructor, parameter names, shapes,
initialisation and inference-cache layout, so that its checkpoints load with strict=True.

Training and plain forward go through mamba_inner_fn (conv, projections, scan in one autograd
graph); a forward that fills an inference cache runs the same kernels unfused to return the
states; decoding runs causal_conv1d_update and selective_state_update.  Unlike mamba-ssm, no path
depends on which kernel packages are installed: portssm always has them.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from ..selective_scan import mamba_inner_fn, selective_scan_fn
from ..state_update import selective_state_update
from ._init import conv_weight, depthwise_conv1d, inverse_softplus_dt


class Mamba(nn.Module):
    def __init__(
        self,
        d_model,
        d_state=16,
        d_conv=4,
        expand=2,
        dt_rank="auto",
        dt_min=0.001,
        dt_max=0.1,
        dt_init="random",
        dt_scale=1.0,
        dt_init_floor=1e-4,
        conv_bias=True,
        bias=False,
        use_fast_path=True,  # mamba_inner_fn for training / plain forward
        layer_idx=None,
        device=None,
        dtype=None,
    ):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.d_model = d_model
        self.d_state = d_state
        self.d_conv = d_conv
        self.expand = expand
        self.d_inner = int(self.expand * self.d_model)
        self.dt_rank = math.ceil(self.d_model / 16) if dt_rank == "auto" else dt_rank
        self.use_fast_path = use_fast_path
        self.layer_idx = layer_idx

        self.in_proj = nn.Linear(self.d_model, self.d_inner * 2, bias=bias, **factory_kwargs)
        self.conv1d = depthwise_conv1d(self.d_inner, d_conv, conv_bias, factory_kwargs)
        self.activation = "silu"
        self.act = nn.SiLU()
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + self.d_state * 2, bias=False,
                                **factory_kwargs)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True, **factory_kwargs)

        # dt projection scaled to keep the variance of its input at initialisation
        dt_init_std = self.dt_rank ** -0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, dt_init_std)
        elif dt_init == "random":
            nn.init.uniform_(self.dt_proj.weight, -dt_init_std, dt_init_std)
        else:
            raise NotImplementedError("dt_init must be 'constant' or 'random', got %r" % (dt_init,))
        with torch.no_grad():
            self.dt_proj.bias.copy_(
                inverse_softplus_dt(self.d_inner, dt_min, dt_max, dt_init_floor, factory_kwargs))
        # _init_weights zeroes Linear biases; this one keeps its dt initialisation
        self.dt_proj.bias._no_reinit = True

        # S4D-real initialisation: A[d, n] = -(n + 1), stored as log, in float32
        A = torch.arange(1, self.d_state + 1, dtype=torch.float32, device=device)
        self.A_log = nn.Parameter(torch.log(A).repeat(self.d_inner, 1).contiguous())
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_inner, device=device))  # float32
        self.D._no_weight_decay = True

        self.out_proj = nn.Linear(self.d_inner, self.d_model, bias=bias, **factory_kwargs)

    def forward(self, hidden_states, inference_params=None):
        """hidden_states: (B, L, D); returns the same shape.  With inference_params, a first
        call (seqlen_offset == 0) fills this layer's states; later calls decode one token."""
        batch, seqlen, _ = hidden_states.shape

        conv_state, ssm_state = None, None
        if inference_params is not None:
            conv_state, ssm_state = self._get_states_from_cache(inference_params, batch)
            if inference_params.seqlen_offset > 0:
                out, _, _ = self.step(hidden_states, conv_state, ssm_state)
                return out

        # in_proj and the (B, L, D) -> (B, D, L) transpose in one matmul: the kernels read
        # L contiguous
        xz = (self.in_proj.weight @ hidden_states.reshape(batch * seqlen, -1).t())
        xz = xz.view(-1, batch, seqlen).transpose(0, 1)
        if self.in_proj.bias is not None:
            xz = xz + self.in_proj.bias.to(dtype=xz.dtype).unsqueeze(-1)

        A = -torch.exp(self.A_log.float())  # (d_inner, d_state)
        if self.use_fast_path and inference_params is None:
            return mamba_inner_fn(
                xz, self.conv1d.weight, self.conv1d.bias, self.x_proj.weight,
                self.dt_proj.weight, self.out_proj.weight, self.out_proj.bias, A,
                None, None,  # B and C from x_proj
                self.D.float(), delta_bias=self.dt_proj.bias.float(), delta_softplus=True)

        x, z = xz.chunk(2, dim=1)
        if conv_state is not None:
            # the last d_conv inputs, zero-padded in front when the prompt is shorter
            conv_state.copy_(F.pad(x, (self.d_conv - x.shape[-1], 0)))
        x = causal_conv1d_fn(x=x, weight=conv_weight(self.conv1d), bias=self.conv1d.bias,
                             activation=self.activation)
        x_dbl = self.x_proj(x.transpose(1, 2).reshape(batch * seqlen, -1))  # (B*L, r + 2N)
        dt, B, C = torch.split(x_dbl, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = (self.dt_proj.weight @ dt.t()).view(-1, batch, seqlen).transpose(0, 1)  # (B, D, L)
        B = B.view(batch, seqlen, self.d_state).transpose(1, 2).contiguous()  # (B, N, L)
        C = C.view(batch, seqlen, self.d_state).transpose(1, 2).contiguous()
        y = selective_scan_fn(x, dt, A, B, C, self.D.float(), z=z,
                              delta_bias=self.dt_proj.bias.float(), delta_softplus=True,
                              return_last_state=ssm_state is not None)
        if ssm_state is not None:
            y, last_state = y
            ssm_state.copy_(last_state)
        return self.out_proj(y.transpose(1, 2))

    def step(self, hidden_states, conv_state, ssm_state):
        """One token: hidden_states (B, 1, D); conv_state (B, d_inner, d_conv) and ssm_state
        (B, d_inner, d_state) are updated in place.  Returns (out (B, 1, D), conv_state,
        ssm_state)."""
        if hidden_states.shape[1] != 1:
            raise ValueError("Mamba.step decodes one token at a time: hidden_states must be "
                             "(batch, 1, d_model), got %s" % (tuple(hidden_states.shape),))
        xz = self.in_proj(hidden_states.squeeze(1))  # (B, 2 d_inner)
        x, z = xz.chunk(2, dim=-1)
        x = causal_conv1d_update(x, conv_state, conv_weight(self.conv1d), self.conv1d.bias,
                                 self.activation)
        x_db = self.x_proj(x)
        dt, B, C = torch.split(x_db, [self.dt_rank, self.d_state, self.d_state], dim=-1)
        dt = F.linear(dt, self.dt_proj.weight)  # the bias goes in through dt_bias
        A = -torch.exp(self.A_log.float())
        y = selective_state_update(ssm_state, x, dt, A, B, C, self.D, z=z,
                                   dt_bias=self.dt_proj.bias, dt_softplus=True)
        out = self.out_proj(y)
        return out.unsqueeze(1), conv_state, ssm_state

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None, **kwargs):
        device = self.out_proj.weight.device
        conv_dtype = self.conv1d.weight.dtype if dtype is None else dtype
        conv_state = torch.zeros(batch_size, self.d_model * self.expand, self.d_conv,
                                 device=device, dtype=conv_dtype)
        ssm_dtype = self.dt_proj.weight.dtype if dtype is None else dtype
        ssm_state = torch.zeros(batch_size, self.d_model * self.expand, self.d_state,
                                device=device, dtype=ssm_dtype)
        return conv_state, ssm_state

    def _get_states_from_cache(self, inference_params, batch_size, initialize_states=False):
        if self.layer_idx is None:
            raise ValueError("Mamba: decoding with inference_params needs layer_idx (the key "
                             "of this layer's states) given to the constructor")
        cache = inference_params.key_value_memory_dict
        if self.layer_idx not in cache:
            conv_state = torch.zeros(batch_size, self.d_model * self.expand, self.d_conv,
                                     device=self.conv1d.weight.device,
                                     dtype=self.conv1d.weight.dtype)
            ssm_state = torch.zeros(batch_size, self.d_model * self.expand, self.d_state,
                                    device=self.dt_proj.weight.device,
                                    dtype=self.dt_proj.weight.dtype)
            cache[self.layer_idx] = (conv_state, ssm_state)
        else:
            conv_state, ssm_state = cache[self.layer_idx]
            if initialize_states:
                conv_state.zero_()
                ssm_state.zero_()
        return conv_state, ssm_state
