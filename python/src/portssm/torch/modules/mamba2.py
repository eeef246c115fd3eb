"""Mamba2 (the Mamba-2 mixer) on portssm's kernels: mamba-ssm 2.3.2.post1's
mamba_ssm.modules.mamba2.Mamba2, with its constructor, parameter names, shapes, initialisation,
inference-cache layout and forward arguments (seqlen, seq_idx, cu_seqlens, inference_params).

Training and plain forward go through mamba_split_conv1d_scan_combined (use_mem_eff_path); a
forward that fills an inference cache (or use_mem_eff_path=False) runs causal_conv1d_fn,
mamba_chunk_scan_combined and the gated RMSNorm one after the other; decoding runs
causal_conv1d_update and selective_state_update.

Where it differs from mamba-ssm: tensor parallelism (process_group) is not supported and says so;
a decode step applies dt_limit as the forward does (mamba-ssm's step ignores it) and works with
D_has_hdim (mamba-ssm's step cannot); packed-sequence prefill (cu_seqlens with inference_params)
needs no causal-conv1d install.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..causal_conv1d import causal_conv1d_fn, causal_conv1d_update
from ..norms import GatedRMSNorm
from ..ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined
from ..state_update import selective_state_update
from ._init import conv_weight, depthwise_conv1d, inverse_softplus_dt
from ..compat import causal_conv1d_varlen_states

try:  # mamba-ssm's Mamba2 is a hub mixin too (from_pretrained / save_pretrained / push_to_hub)
    from huggingface_hub import PyTorchModelHubMixin
    _BASES = (nn.Module, PyTorchModelHubMixin)
except ImportError:  # without huggingface_hub the module works, minus those three methods
    _BASES = (nn.Module,)

_NO_LIMIT = (0.0, float("inf"))


class Mamba2(*_BASES):
    def __init__(
        self,
        d_model,
        d_state=128,
        d_conv=4,
        conv_init=None,
        expand=2,
        headdim=64,
        d_ssm=None,  # SSM on this many channels only; the rest is a gated MLP
        ngroups=1,
        A_init_range=(1, 16),
        D_has_hdim=False,
        rmsnorm=True,
        norm_before_gate=False,
        dt_min=0.001,
        dt_max=0.1,
        dt_init_floor=1e-4,
        dt_limit=(0.0, float("inf")),
        bias=False,
        conv_bias=True,
        # fused kernel and sharding options
        chunk_size=256,
        use_mem_eff_path=True,
        layer_idx=None,
        process_group=None,
        sequence_parallel=True,
        device=None,
        dtype=None,
    ):
        if process_group is not None:
            raise NotImplementedError(
                "Mamba2(process_group=...): tensor-parallel Mamba2 (mamba_ssm.distributed) is not "
                "supported by portssm; build the model without process_group")
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.d_model = d_model
        self.d_state = d_state
        self.d_conv = d_conv
        self.conv_init = conv_init
        self.expand = expand
        self.process_group = None
        self.sequence_parallel = sequence_parallel
        self.world_size = 1
        self.local_rank = 0
        self.d_inner = self.expand * self.d_model
        self.headdim = headdim
        self.d_ssm = self.d_inner if d_ssm is None else d_ssm
        self.ngroups = ngroups
        if self.d_ssm % self.headdim:
            raise ValueError("Mamba2: d_ssm (%d) must be a multiple of headdim (%d)"
                             % (self.d_ssm, self.headdim))
        self.nheads = self.d_ssm // self.headdim
        self.D_has_hdim = D_has_hdim
        self.rmsnorm = rmsnorm
        self.norm_before_gate = norm_before_gate
        self.dt_limit = dt_limit
        self.activation = "silu"
        self.chunk_size = chunk_size
        self.use_mem_eff_path = use_mem_eff_path
        self.layer_idx = layer_idx

        # in_proj's output, in order: [z0, x0 (the MLP part, if d_ssm < d_inner), z, x, B, C, dt]
        d_in_proj = 2 * self.d_inner + 2 * self.ngroups * self.d_state + self.nheads
        self.in_proj = nn.Linear(self.d_model, d_in_proj, bias=bias, **factory_kwargs)

        conv_dim = self.d_ssm + 2 * self.ngroups * self.d_state
        self.conv1d = depthwise_conv1d(conv_dim, d_conv, conv_bias, factory_kwargs)
        if self.conv_init is not None:
            nn.init.uniform_(self.conv1d.weight, -self.conv_init, self.conv_init)
        self.act = nn.SiLU()

        self.dt_bias = nn.Parameter(
            inverse_softplus_dt(self.nheads, dt_min, dt_max, dt_init_floor, factory_kwargs))
        self.dt_bias._no_weight_decay = True

        if not (A_init_range[0] > 0 and A_init_range[1] >= A_init_range[0]):
            raise ValueError("Mamba2: A_init_range must be (lo, hi) with 0 < lo <= hi, got %r"
                             % (A_init_range,))
        A = torch.empty(self.nheads, dtype=torch.float32, device=device).uniform_(*A_init_range)
        self.A_log = nn.Parameter(torch.log(A).to(dtype=dtype))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_ssm if self.D_has_hdim else self.nheads,
                                         device=device))
        self.D._no_weight_decay = True

        if self.rmsnorm:
            self.norm = GatedRMSNorm(self.d_ssm, eps=1e-5, norm_before_gate=self.norm_before_gate,
                                     group_size=self.d_ssm // ngroups, **factory_kwargs)

        self.out_proj = nn.Linear(self.d_inner, self.d_model, bias=bias, **factory_kwargs)

    def _D(self):
        return self.D.view(self.nheads, self.headdim) if self.D_has_hdim else self.D

    def _dt_limit_kwargs(self):
        return {} if tuple(self.dt_limit) == _NO_LIMIT else dict(dt_limit=self.dt_limit)

    def forward(self, u, seqlen=None, seq_idx=None, cu_seqlens=None, inference_params=None):
        """
        u: (batch, seqlen, d_model), or (batch * seqlen, d_model) when seqlen is given.
        seq_idx: (batch, seqlen) int32, the sequence of each token of packed rows.
        cu_seqlens: (n_seq + 1,) int32, with inference_params and batch 1: the packed
            sequences whose final states fill the cache (one row per sequence).
        Returns the shape of u.
        """
        seqlen_og = seqlen
        if seqlen is None:
            batch, seqlen, _ = u.shape
        else:
            batch = u.shape[0] // seqlen

        conv_state, ssm_state = None, None
        if inference_params is not None:
            inference_batch = cu_seqlens.shape[0] - 1 if cu_seqlens is not None else batch
            conv_state, ssm_state = self._get_states_from_cache(inference_params,
                                                                inference_batch)
            if inference_params.seqlen_offset > 0:
                out, _, _ = self.step(u, conv_state, ssm_state)
                return out

        zxbcdt = self.in_proj(u)
        if seqlen_og is not None:
            zxbcdt = zxbcdt.view(batch, seqlen, -1)
        # A in float32 even for a 16-bit model (exp of a 16-bit A_log could overflow to -inf)
        A = -torch.exp(self.A_log.float())
        if self.use_mem_eff_path and inference_params is None:
            out = mamba_split_conv1d_scan_combined(
                zxbcdt, conv_weight(self.conv1d), self.conv1d.bias, self.dt_bias, A,
                D=self._D(), chunk_size=self.chunk_size, seq_idx=seq_idx,
                activation=self.activation,
                rmsnorm_weight=self.norm.weight if self.rmsnorm else None,
                rmsnorm_eps=self.norm.eps if self.rmsnorm else 1e-6,
                outproj_weight=self.out_proj.weight, outproj_bias=self.out_proj.bias,
                headdim=None if self.D_has_hdim else self.headdim, ngroups=self.ngroups,
                norm_before_gate=self.norm_before_gate, **self._dt_limit_kwargs())
            if seqlen_og is not None:
                out = out.reshape(batch * seqlen, -1)
            return out

        d_xbc = self.d_ssm + 2 * self.ngroups * self.d_state
        d_mlp = (zxbcdt.shape[-1] - 2 * self.d_ssm - 2 * self.ngroups * self.d_state
                 - self.nheads) // 2
        z0, x0, z, xBC, dt = torch.split(
            zxbcdt, [d_mlp, d_mlp, self.d_ssm, d_xbc, self.nheads], dim=-1)
        if conv_state is not None:
            if cu_seqlens is None:
                # the last d_conv inputs, zero-padded in front when the prompt is shorter
                xBC_t = xBC.transpose(1, 2)
                conv_state.copy_(F.pad(xBC_t, (self.d_conv - xBC_t.shape[-1], 0)))
            else:
                if batch != 1:
                    raise ValueError("Mamba2: packed prefill (cu_seqlens with inference_params) "
                                     "takes batch 1, got batch %d" % batch)
                conv_state.copy_(causal_conv1d_varlen_states(
                    xBC.squeeze(0), cu_seqlens, state_len=conv_state.shape[-1]))
        xBC = causal_conv1d_fn(xBC.transpose(1, 2), conv_weight(self.conv1d),
                               bias=self.conv1d.bias, activation=self.activation,
                               seq_idx=seq_idx).transpose(1, 2)
        x, B, C = torch.split(
            xBC, [self.d_ssm, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1)
        y = mamba_chunk_scan_combined(
            x.reshape(batch, seqlen, self.nheads, self.headdim), dt, A,
            B.reshape(batch, seqlen, self.ngroups, self.d_state),
            C.reshape(batch, seqlen, self.ngroups, self.d_state),
            chunk_size=self.chunk_size, D=self._D(),
            z=None if self.rmsnorm else z.reshape(batch, seqlen, self.nheads, self.headdim),
            dt_bias=self.dt_bias, dt_softplus=True, seq_idx=seq_idx, cu_seqlens=cu_seqlens,
            **self._dt_limit_kwargs(),
            return_final_states=ssm_state is not None,
            return_varlen_states=cu_seqlens is not None and inference_params is not None)
        if ssm_state is not None:
            y, last_state, *rest = y
            ssm_state.copy_(last_state if cu_seqlens is None else rest[0])
        y = y.reshape(batch, seqlen, self.d_ssm)
        if self.rmsnorm:
            y = self.norm(y, z)
        if d_mlp > 0:
            y = torch.cat([F.silu(z0) * x0, y], dim=-1)
        if seqlen_og is not None:
            y = y.reshape(batch * seqlen, -1)
        return self.out_proj(y)

    def step(self, hidden_states, conv_state, ssm_state):
        """One token: hidden_states (B, 1, D); conv_state (B, conv_dim, d_conv) and ssm_state
        (B, nheads, headdim, d_state) are updated in place.  Returns (out (B, 1, D),
        conv_state, ssm_state)."""
        if hidden_states.shape[1] != 1:
            raise ValueError("Mamba2.step decodes one token at a time: hidden_states must be "
                             "(batch, 1, d_model), got %s" % (tuple(hidden_states.shape),))
        batch = hidden_states.shape[0]
        zxbcdt = self.in_proj(hidden_states.squeeze(1))
        d_xbc = self.d_ssm + 2 * self.ngroups * self.d_state
        d_mlp = (zxbcdt.shape[-1] - 2 * self.d_ssm - 2 * self.ngroups * self.d_state
                 - self.nheads) // 2
        z0, x0, z, xBC, dt = torch.split(
            zxbcdt, [d_mlp, d_mlp, self.d_ssm, d_xbc, self.nheads], dim=-1)
        xBC = causal_conv1d_update(xBC, conv_state, conv_weight(self.conv1d), self.conv1d.bias,
                                   self.activation)
        x, B, C = torch.split(
            xBC, [self.d_ssm, self.ngroups * self.d_state, self.ngroups * self.d_state], dim=-1)

        H, P, N = self.nheads, self.headdim, self.d_state
        # A, dt and dt_bias are per head: tied over (headdim, d_state) by stride-0 views, which
        # selective_state_update reads without copies
        A = (-torch.exp(self.A_log.float())).view(H, 1, 1).expand(H, P, N)
        D = self.D.view(H, P) if self.D_has_hdim else self.D.view(H, 1).expand(H, P)
        dt_softplus = True
        dt_bias = self.dt_bias.view(H, 1).expand(H, P)
        if tuple(self.dt_limit) != _NO_LIMIT:
            # the forward clamps softplus(dt + dt_bias) into dt_limit; so does the step
            dt = F.softplus(dt.float() + self.dt_bias.float()).clamp(*self.dt_limit).to(x.dtype)
            dt_softplus, dt_bias = False, None
        dt = dt.view(batch, H, 1).expand(batch, H, P)
        y = selective_state_update(
            ssm_state, x.reshape(batch, H, P), dt, A,
            B.reshape(batch, self.ngroups, N), C.reshape(batch, self.ngroups, N), D,
            z=None if self.rmsnorm else z.reshape(batch, H, P), dt_bias=dt_bias,
            dt_softplus=dt_softplus)
        y = y.reshape(batch, self.d_ssm)
        if self.rmsnorm:
            y = self.norm(y, z)
        if d_mlp > 0:
            y = torch.cat([F.silu(z0) * x0, y], dim=-1)
        out = self.out_proj(y)
        return out.unsqueeze(1), conv_state, ssm_state

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None, **kwargs):
        device = self.out_proj.weight.device
        conv_dtype = self.conv1d.weight.dtype if dtype is None else dtype
        # (B, conv_dim, d_conv) with the channels contiguous, as mamba-ssm lays it out
        conv_state = torch.zeros(batch_size, self.d_conv, self.conv1d.weight.shape[0],
                                 device=device, dtype=conv_dtype).transpose(1, 2)
        ssm_dtype = self.in_proj.weight.dtype if dtype is None else dtype
        ssm_state = torch.zeros(batch_size, self.nheads, self.headdim, self.d_state,
                                device=device, dtype=ssm_dtype)
        return conv_state, ssm_state

    def _get_states_from_cache(self, inference_params, batch_size, initialize_states=False):
        if self.layer_idx is None:
            raise ValueError("Mamba2: decoding with inference_params needs layer_idx (the key "
                             "of this layer's states) given to the constructor")
        cache = inference_params.key_value_memory_dict
        if self.layer_idx not in cache:
            conv_state = torch.zeros(batch_size, self.d_conv, self.conv1d.weight.shape[0],
                                     device=self.conv1d.weight.device,
                                     dtype=self.conv1d.weight.dtype).transpose(1, 2)
            ssm_state = torch.zeros(batch_size, self.nheads, self.headdim, self.d_state,
                                    device=self.in_proj.weight.device,
                                    dtype=self.in_proj.weight.dtype)
            cache[self.layer_idx] = (conv_state, ssm_state)
        else:
            conv_state, ssm_state = cache[self.layer_idx]
            if initialize_states:
                conv_state.zero_()
                ssm_state.zero_()
        return conv_state, ssm_state
