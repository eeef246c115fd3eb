"""Float64 pure-PyTorch formulas of mamba-ssm 2.3.2.post1's modules (Mamba, Mamba2,
Mamba2Simple, MHA, GatedMLP, Block, MixerModel / MambaLMHeadModel), written for these tests
from the reference's documented math, to compare portssm's module layer with.  Each takes the
module under test only for its configuration and a dict of float64 parameters (leaf tensors, so
gradients can be compared), never calling the module's forward."""

import math

import torch
import torch.nn.functional as F

from references import conv1d_ref, scan_ref, ssd_ref


def double_params(module):
    """{name: float64 cpu leaf copy requiring grad} of module's parameters."""
    return {n: p.detach().cpu().double().clone().requires_grad_(True)
            for n, p in module.named_parameters()}


def sub(params, prefix):
    """The entries of params under prefix ('a.b.'), with the prefix removed."""
    return {n[len(prefix):]: p for n, p in params.items() if n.startswith(prefix)}


def linear(x, p, name):
    y = x @ p[name + ".weight"].t()
    bias = p.get(name + ".bias")
    return y + bias if bias is not None else y


def conv_silu(x_bdl, p, activation="silu", seq_idx=None):
    """The depthwise causal conv of a mixer (weights conv1d.weight (d, 1, w), conv1d.bias)."""
    out, _ = conv1d_ref(x_bdl, p["conv1d.weight"][:, 0], p.get("conv1d.bias"),
                        seq_idx=seq_idx, activation=activation)
    return out


def mamba1_ref(m, p, x):
    """Mamba(hidden (b, l, d)) in float64."""
    b, L, _ = x.shape
    xz = linear(x, p, "in_proj")
    xs, z = xz.chunk(2, dim=-1)
    xc = conv_silu(xs.transpose(1, 2), p)  # (b, d_inner, l)
    x_dbl = xc.transpose(1, 2) @ p["x_proj.weight"].t()
    dt, B, C = torch.split(x_dbl, [m.dt_rank, m.d_state, m.d_state], dim=-1)
    dt = (dt @ p["dt_proj.weight"].t()).transpose(1, 2)
    A = -torch.exp(p["A_log"])
    y, last = scan_ref(xc, dt, A, B.transpose(1, 2), C.transpose(1, 2), D=p["D"],
                       z=z.transpose(1, 2), delta_bias=p["dt_proj.bias"], delta_softplus=True)
    return linear(y.transpose(1, 2), p, "out_proj")


def gated_rms_norm_ref(x, z, weight, eps, group_size, norm_before_gate):
    """layernorm_gated's RMSNorm: over groups of group_size channels; z gates after the norm
    (norm_before_gate) or before it."""
    if z is not None and not norm_before_gate:
        x = x * F.silu(z)
    shape = x.shape
    g = x.reshape(*shape[:-1], -1, group_size)
    g = g / torch.sqrt(g.pow(2).mean(-1, keepdim=True) + eps)
    y = g.reshape(shape) * weight
    if z is not None and norm_before_gate:
        y = y * F.silu(z)
    return y


def mamba2_ref(m, p, u, seq_idx=None, initial_states=None, return_state=False, norm_group=None):
    """Mamba2 / Mamba2Simple(u (b, l, d)) in float64; norm_group: the gated norm's group size
    when not the module's norm's (Mamba2Simple's fused path normalises per group of B/C)."""
    b, L, _ = u.shape
    d_ssm = getattr(m, "d_ssm", m.d_inner)
    H, P, G, N = m.nheads, m.headdim, m.ngroups, m.d_state
    zxbcdt = linear(u, p, "in_proj")
    d_mlp = (zxbcdt.shape[-1] - 2 * d_ssm - 2 * G * N - H) // 2
    z0, x0, z, xBC, dt = torch.split(zxbcdt, [d_mlp, d_mlp, d_ssm, d_ssm + 2 * G * N, H], dim=-1)
    activation = "silu" if m.activation in ("silu", "swish") else None
    xBC = conv_silu(xBC.transpose(1, 2), p, activation, seq_idx).transpose(1, 2)
    x, B, C = torch.split(xBC, [d_ssm, G * N, G * N], dim=-1)
    A = -torch.exp(p["A_log"])
    D = p["D"].view(H, P) if getattr(m, "D_has_hdim", False) else p["D"]
    rmsnorm = getattr(m, "rmsnorm", True)
    if initial_states is None and getattr(m, "learnable_init_states", False):
        initial_states = p["init_states"].unsqueeze(0).expand(b, -1, -1, -1)
    y, s = ssd_ref(x.reshape(b, L, H, P), dt, A, B.reshape(b, L, G, N), C.reshape(b, L, G, N),
                   D=D, z=None if rmsnorm else z.reshape(b, L, H, P), dt_bias=p["dt_bias"],
                   dt_softplus=True, dt_limit=m.dt_limit, initial_states=initial_states,
                   seq_idx=seq_idx)
    y = y.reshape(b, L, d_ssm)
    if rmsnorm:
        group = m.norm.group_size if m.norm.group_size is not None else d_ssm
        group = norm_group if norm_group is not None else group
        y = gated_rms_norm_ref(y, z, p["norm.weight"], m.norm.eps, group,
                               getattr(m, "norm_before_gate", False))
    if d_mlp > 0:
        y = torch.cat([F.silu(z0) * x0, y], dim=-1)
    out = linear(y, p, "out_proj")
    return (out, s) if return_state else out


def mlp_ref(p, x):
    y, gate = linear(x, p, "fc1").chunk(2, dim=-1)
    return linear(y * F.silu(gate), p, "fc2")


def rotary_ref(x, positions, dim, base, interleaved):
    """x (b, l, h, d) rotated on its first dim channels at positions (b or 1, l), as complex
    multiplication: channel pairs (i, i + dim/2), or (2i, 2i + 1) when interleaved, times
    exp(1j * position * base^(-2i/dim))."""
    half = dim // 2
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angle = positions.double().unsqueeze(-1) * inv_freq  # (b, l, half)
    rot = torch.polar(torch.ones_like(angle), angle).unsqueeze(2)  # (b, l, 1, half)
    xr = x[..., :dim]
    if interleaved:
        c = torch.complex(xr[..., 0::2], xr[..., 1::2]) * rot
        out = torch.stack([c.real, c.imag], dim=-1).flatten(-2)
    else:
        c = torch.complex(xr[..., :half], xr[..., half:]) * rot
        out = torch.cat([c.real, c.imag], dim=-1)
    return torch.cat([out, x[..., dim:]], dim=-1)


def mha_ref(m, p, x):
    """MHA(x (b, l, d)) without cache, float64, explicit softmax attention."""
    b, L, _ = x.shape
    h, hkv, hd = m.num_heads, m.num_heads_kv, m.head_dim
    qkv = linear(x, p, "in_proj")
    if m.mlp_dim > 0:
        qkv, x_mlp = qkv.split([qkv.shape[-1] - m.mlp_dim, m.mlp_dim], dim=-1)
        up, gate = x_mlp.chunk(2, dim=-1)
        x_mlp = up * F.silu(gate)
    if m.d_conv > 0:
        qkv = conv_silu(qkv.transpose(1, 2), p, activation=None).transpose(1, 2)
    q, k, v = qkv.split([h * hd, hkv * hd, hkv * hd], dim=-1)
    q, k, v = q.view(b, L, h, hd), k.view(b, L, hkv, hd), v.view(b, L, hkv, hd)
    if m.rotary_emb_dim > 0:
        pos = torch.arange(L).unsqueeze(0)
        q = rotary_ref(q, pos, m.rotary_emb_dim, m.rotary_emb.base, m.rotary_emb.interleaved)
        k = rotary_ref(k, pos, m.rotary_emb_dim, m.rotary_emb.base, m.rotary_emb.interleaved)
    k = k.repeat_interleave(h // hkv, dim=2)
    v = v.repeat_interleave(h // hkv, dim=2)
    scale = m.softmax_scale if m.softmax_scale is not None else 1.0 / math.sqrt(hd)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if m.causal:
        mask = torch.ones(L, L, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    ctx = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(-1), v).reshape(b, L, h * hd)
    if m.mlp_dim > 0:
        ctx = torch.cat([ctx, x_mlp], dim=-1)
    return linear(ctx, p, "out_proj")


def norm_ref(norm_module, p, prefix, x):
    """nn.LayerNorm or the RMSNorm of a block, float64."""
    w = p[prefix + ".weight"]
    bias = p.get(prefix + ".bias")
    if isinstance(norm_module, torch.nn.LayerNorm):
        return F.layer_norm(x, x.shape[-1:], w, bias, norm_module.eps)
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + norm_module.eps) * w
    return y + bias if bias is not None else y


def mixer_ref(mixer, p, x):
    from portssm.torch.modules import MHA, Mamba, Mamba2

    if isinstance(mixer, Mamba):
        return mamba1_ref(mixer, p, x)
    if isinstance(mixer, Mamba2):
        return mamba2_ref(mixer, p, x)
    if isinstance(mixer, MHA):
        return mha_ref(mixer, p, x)
    raise TypeError(type(mixer))


def block_ref(block, p, hidden, residual):
    """Block: (out, residual) in float64 (residual_in_fp32 changes nothing in float64)."""
    residual = hidden + residual if residual is not None else hidden
    hidden = mixer_ref(block.mixer, sub(p, "mixer."), norm_ref(block.norm, p, "norm", residual))
    if block.mlp is not None:
        residual = hidden + residual
        hidden = mlp_ref(sub(p, "mlp."), norm_ref(block.norm2, p, "norm2", residual))
    return hidden, residual


def lm_ref(model, p, input_ids):
    """MambaLMHeadModel(input_ids).logits in float64 (tied embeddings: the embedding's
    parameter also serves as lm_head's)."""
    bb = model.backbone
    hidden = p["backbone.embedding.weight"][input_ids]
    residual = None
    for i, layer in enumerate(bb.layers):
        hidden, residual = block_ref(layer, sub(p, "backbone.layers.%d." % i), hidden, residual)
    hidden = norm_ref(bb.norm_f, p, "backbone.norm_f", hidden + residual)
    head = p.get("lm_head.weight", p["backbone.embedding.weight"])
    return hidden @ head.t()
