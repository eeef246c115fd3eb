"""mamba-ssm 2.3.2.post1's mamba_ssm.models.mixer_seq_simple on portssm: create_block,
_init_weights, MixerModel (embedding, blocks, final norm) and MambaLMHeadModel (with
generate, from_pretrained, save_pretrained), the same arguments, module tree, parameter names
and initialisation, so that the reference's checkpoints load with strict=True."""

from __future__ import annotations

import copy
import json
import math
import os
from collections import namedtuple
from functools import partial

import torch
import torch.nn as nn

from ..generation import GenerationMixin
from ..hub import load_config_hf, load_state_dict_hf
from ..modules.block import Block
from ..modules.mamba1 import Mamba
from ..modules.mamba2 import Mamba2
from ..modules.mha import MHA
from ..modules.mlp import GatedMLP
from ..norms import RMSNorm, layer_norm_fn
from .config import MambaConfig

CausalLMOutput = namedtuple("CausalLMOutput", ["logits"])

_SSM_LAYERS = {"Mamba1": Mamba, "Mamba2": Mamba2}


def create_block(
    d_model,
    d_intermediate,
    ssm_cfg=None,
    attn_layer_idx=None,
    attn_cfg=None,
    norm_epsilon=1e-5,
    rms_norm=False,
    residual_in_fp32=False,
    fused_add_norm=False,
    layer_idx=None,
    device=None,
    dtype=None,
):
    """Block layer_idx of a MixerModel: MHA if layer_idx is in attn_layer_idx, else the SSM
    mixer ssm_cfg["layer"] names ("Mamba1", the default, or "Mamba2"); a GatedMLP after it
    when d_intermediate > 0."""
    ssm_cfg = {} if ssm_cfg is None else ssm_cfg
    attn_layer_idx = [] if attn_layer_idx is None else attn_layer_idx
    attn_cfg = {} if attn_cfg is None else attn_cfg
    factory_kwargs = {"device": device, "dtype": dtype}
    if layer_idx not in attn_layer_idx:
        ssm_cfg = copy.deepcopy(ssm_cfg)  # the caller's config keeps its "layer" key
        ssm_layer = ssm_cfg.pop("layer", "Mamba1")
        if ssm_layer not in _SSM_LAYERS:
            raise ValueError(f"Invalid ssm_layer: {ssm_layer}, only support Mamba1 and Mamba2")
        mixer_cls = partial(_SSM_LAYERS[ssm_layer], layer_idx=layer_idx, **ssm_cfg,
                            **factory_kwargs)
    else:
        mixer_cls = partial(MHA, layer_idx=layer_idx, **attn_cfg, **factory_kwargs)
    norm_cls = partial(nn.LayerNorm if not rms_norm else RMSNorm, eps=norm_epsilon,
                       **factory_kwargs)
    if d_intermediate == 0:
        mlp_cls = nn.Identity
    else:
        mlp_cls = partial(GatedMLP, hidden_features=d_intermediate, out_features=d_model,
                          **factory_kwargs)
    block = Block(d_model, mixer_cls, mlp_cls, norm_cls=norm_cls,
                  fused_add_norm=fused_add_norm, residual_in_fp32=residual_in_fp32)
    block.layer_idx = layer_idx
    return block


def _init_weights(
    module,
    n_layer,
    initializer_range=0.02,  # the embedding's std
    rescale_prenorm_residual=True,
    n_residuals_per_layer=1,  # 2 with an MLP per block
):
    """GPT-2's scheme as mamba-ssm applies it: Linear biases zeroed (except those marked
    _no_reinit, the dt biases), embeddings N(0, initializer_range), and each residual
    branch's last projection (out_proj, fc2) drawn again from kaiming-uniform and scaled by
    1/sqrt(n_residuals_per_layer * n_layer)."""
    if isinstance(module, nn.Linear):
        if module.bias is not None and not getattr(module.bias, "_no_reinit", False):
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=initializer_range)

    if rescale_prenorm_residual:
        for name, p in module.named_parameters():
            if name in ("out_proj.weight", "fc2.weight"):
                # drawn again rather than scaled in place: this runs once per enclosing module
                nn.init.kaiming_uniform_(p, a=math.sqrt(5))
                with torch.no_grad():
                    p /= math.sqrt(n_residuals_per_layer * n_layer)


class MixerModel(nn.Module):
    def __init__(
        self,
        d_model: int,
        n_layer: int,
        d_intermediate: int,
        vocab_size: int,
        ssm_cfg=None,
        attn_layer_idx=None,
        attn_cfg=None,
        norm_epsilon: float = 1e-5,
        rms_norm: bool = False,
        initializer_cfg=None,
        fused_add_norm=False,
        residual_in_fp32=False,
        device=None,
        dtype=None,
    ) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.residual_in_fp32 = residual_in_fp32
        self.embedding = nn.Embedding(vocab_size, d_model, **factory_kwargs)
        # Each block is Add -> Norm -> Mixer (see Block): the add fuses into the norm
        self.fused_add_norm = fused_add_norm
        self.layers = nn.ModuleList([
            create_block(d_model, d_intermediate=d_intermediate, ssm_cfg=ssm_cfg,
                         attn_layer_idx=attn_layer_idx, attn_cfg=attn_cfg,
                         norm_epsilon=norm_epsilon, rms_norm=rms_norm,
                         residual_in_fp32=residual_in_fp32, fused_add_norm=fused_add_norm,
                         layer_idx=i, **factory_kwargs)
            for i in range(n_layer)
        ])
        self.norm_f = (nn.LayerNorm if not rms_norm else RMSNorm)(d_model, eps=norm_epsilon,
                                                                  **factory_kwargs)
        self.apply(partial(_init_weights, n_layer=n_layer,
                           **(initializer_cfg if initializer_cfg is not None else {}),
                           n_residuals_per_layer=1 if d_intermediate == 0 else 2))

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None, **kwargs):
        return {i: layer.allocate_inference_cache(batch_size, max_seqlen, dtype=dtype, **kwargs)
                for i, layer in enumerate(self.layers)}

    def forward(self, input_ids, inference_params=None, **mixer_kwargs):
        hidden_states = self.embedding(input_ids)
        residual = None
        for layer in self.layers:
            hidden_states, residual = layer(hidden_states, residual,
                                            inference_params=inference_params, **mixer_kwargs)
        if not self.fused_add_norm:
            residual = (hidden_states + residual) if residual is not None else hidden_states
            return self.norm_f(residual.to(dtype=self.norm_f.weight.dtype))
        # prenorm=False: the residual is not needed after the last norm
        return layer_norm_fn(hidden_states, self.norm_f.weight, self.norm_f.bias,
                             eps=self.norm_f.eps, residual=residual, prenorm=False,
                             residual_in_fp32=self.residual_in_fp32,
                             is_rms_norm=isinstance(self.norm_f, RMSNorm))


class MambaLMHeadModel(nn.Module, GenerationMixin):
    def __init__(self, config: MambaConfig, initializer_cfg=None, device=None,
                 dtype=None) -> None:
        self.config = config
        vocab_size = config.vocab_size
        pad = config.pad_vocab_size_multiple
        factory_kwargs = {"device": device, "dtype": dtype}

        super().__init__()
        if vocab_size % pad != 0:
            vocab_size += pad - (vocab_size % pad)
        self.backbone = MixerModel(
            d_model=config.d_model,
            n_layer=config.n_layer,
            d_intermediate=config.d_intermediate,
            vocab_size=vocab_size,
            ssm_cfg=config.ssm_cfg,
            attn_layer_idx=config.attn_layer_idx,
            attn_cfg=config.attn_cfg,
            rms_norm=config.rms_norm,
            initializer_cfg=initializer_cfg,
            fused_add_norm=config.fused_add_norm,
            residual_in_fp32=config.residual_in_fp32,
            **factory_kwargs,
        )
        self.lm_head = nn.Linear(config.d_model, vocab_size, bias=False, **factory_kwargs)
        self.apply(partial(_init_weights, n_layer=config.n_layer,
                           **(initializer_cfg if initializer_cfg is not None else {})))
        self.tie_weights()

    def tie_weights(self):
        if self.config.tie_embeddings:
            self.lm_head.weight = self.backbone.embedding.weight

    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None, **kwargs):
        return self.backbone.allocate_inference_cache(batch_size, max_seqlen, dtype=dtype,
                                                      **kwargs)

    def forward(self, input_ids, position_ids=None, inference_params=None, num_last_tokens=0,
                **mixer_kwargs):
        """input_ids (batch, seqlen) -> CausalLMOutput(logits (batch, seqlen, padded vocab)).
        position_ids is accepted for transformers-style callers and not used;
        num_last_tokens > 0 keeps the logits of the last n tokens only."""
        hidden_states = self.backbone(input_ids, inference_params=inference_params,
                                      **mixer_kwargs)
        if num_last_tokens > 0:
            hidden_states = hidden_states[:, -num_last_tokens:]
        return CausalLMOutput(logits=self.lm_head(hidden_states))

    @classmethod
    def from_pretrained(cls, pretrained_model_name, device=None, dtype=None, **kwargs):
        """A model from a directory with config.json and pytorch_model.bin (as save_pretrained
        writes, or model.safetensors), or from a Hugging Face Hub id (the local HF cache first;
        see portssm.torch.hub).  The weights load with strict=True (with tied embeddings a file
        without lm_head.weight, as safetensors stores them, takes the embedding's)."""
        config = MambaConfig(**load_config_hf(pretrained_model_name))
        model = cls(config, device=device, dtype=dtype, **kwargs)
        state_dict = load_state_dict_hf(pretrained_model_name, device=device, dtype=dtype)
        if (config.tie_embeddings and "lm_head.weight" not in state_dict
                and "backbone.embedding.weight" in state_dict):
            # safetensors files store a tied tensor once (pytorch_model.bin has both names)
            state_dict["lm_head.weight"] = state_dict["backbone.embedding.weight"]
        model.load_state_dict(state_dict)
        return model

    def save_pretrained(self, save_directory):
        """Writes pytorch_model.bin (the state_dict) and config.json (the MambaConfig's
        fields) into save_directory, which is created if needed."""
        os.makedirs(save_directory, exist_ok=True)
        torch.save(self.state_dict(), os.path.join(save_directory, "pytorch_model.bin"))
        with open(os.path.join(save_directory, "config.json"), "w") as f:
            json.dump(self.config.__dict__, f, indent=4)
