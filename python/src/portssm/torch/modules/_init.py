"""Initialisation shared by the Mamba mixers (mamba-ssm 2.3.2.post1's scheme, the same random
draws in the same order, so that one seed gives one model on either package)."""

from __future__ import annotations

import math

import torch


def inverse_softplus_dt(n, dt_min, dt_max, dt_init_floor, factory_kwargs):
    """n values whose softplus is log-uniform in [dt_min, dt_max] (floored at dt_init_floor):
    the bias that makes a fresh mixer's step sizes start in that range."""
    dt = torch.exp(torch.rand(n, **factory_kwargs) * (math.log(dt_max) - math.log(dt_min))
                   + math.log(dt_min))
    dt = torch.clamp(dt, min=dt_init_floor)
    # softplus^-1(dt) = dt + log(1 - exp(-dt)), written with expm1 for small dt
    return dt + torch.log(-torch.expm1(-dt))


def depthwise_conv1d(channels, width, bias, factory_kwargs):
    """The mixers' depthwise causal conv as an nn.Conv1d (weight (channels, 1, width), the
    layout of mamba-ssm's checkpoints); forward never calls it, the weights go to portssm's
    causal_conv1d ops."""
    return torch.nn.Conv1d(in_channels=channels, out_channels=channels, bias=bias,
                           kernel_size=width, groups=channels, padding=width - 1,
                           **factory_kwargs)


def conv_weight(conv1d):
    """(channels, width) view of a depthwise nn.Conv1d's weight, as causal_conv1d_fn takes it."""
    return conv1d.weight.squeeze(1)
