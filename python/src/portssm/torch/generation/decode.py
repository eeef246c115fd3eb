"""decode and GenerationMixin: mamba-ssm 2.3.2.post1's generation loop (mamba_ssm.utils.generation)
with the same arguments and results: the prompt in one forward that fills the caches, then one
token per step through the layers' decode paths (or cached CUDA graphs with cg=True, see
graphs.py), sampling as sampling.py, stopping at eos_token_id or max_length.

Where it differs from mamba-ssm: it runs on cpu too (mamba-ssm creates CUDA events
unconditionally); enable_timing times with the host clock off CUDA; transformers is optional
(its GenerateDecoderOnlyOutput is returned where it is installed, a dataclass of the same
fields otherwise)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional, Tuple

import torch

from .graphs import update_graph_cache
from .params import InferenceParams
from .sampling import modify_logit_for_repetition_penalty, sample


@dataclass
class _DecoderOnlyOutput:
    """transformers' GenerateDecoderOnlyOutput's fields, where transformers is not installed."""
    sequences: torch.LongTensor = None
    scores: Optional[Tuple[torch.FloatTensor]] = None
    logits: Optional[Tuple[torch.FloatTensor]] = None
    attentions: Optional[tuple] = None
    hidden_states: Optional[tuple] = None
    past_key_values: Optional[tuple] = None


def output_class():
    """transformers.generation.GenerateDecoderOnlyOutput, or a dataclass of its fields."""
    try:
        from transformers.generation import GenerateDecoderOnlyOutput
    except ImportError:
        return _DecoderOnlyOutput
    return GenerateDecoderOnlyOutput


class _Timer:
    """Wall time of the decode: CUDA events on a CUDA device (as mamba-ssm), the host clock
    elsewhere."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)
            self.start.record()
        else:
            self.t0 = time.perf_counter()

    def elapsed_ms(self):
        if self.cuda:
            self.end.record()
            torch.cuda.synchronize()
            return self.start.elapsed_time(self.end)
        return (time.perf_counter() - self.t0) * 1e3


@torch.inference_mode()
def decode(
    input_ids,
    model,
    max_length,
    top_k=1,
    top_p=0.0,
    min_p=0.0,
    temperature=1.0,
    repetition_penalty=1.0,
    eos_token_id=None,
    teacher_outputs=None,
    vocab_size=None,
    cg=False,
    enable_timing=False,
    output_scores=False,
    streamer=None,
):
    """Greedy decoding, or sampling with top-k / top-p / min-p / temperature (top_k = 0: no
    top-k limit; with top-k and top-p, top-k first).  All sequences of the batch have the
    prompt's length.

    input_ids: (batch, seq_len); max_length: the length of the returned sequences (fewer if
    every sequence ended with eos_token_id).  teacher_outputs (batch, L): tokens taken instead
    of sampled ones up to L (for tests).  vocab_size: logits past it are dropped (a padded
    vocabulary).  cg: cached decoding (CUDA graphs on cuda; see graphs.py).  streamer: an
    object with put(tokens) and end() (transformers' TextStreamer).
    Returns GenerateDecoderOnlyOutput(sequences (batch, <= max_length), scores: a tuple of
    (batch, vocab) logits per generated token if output_scores).
    """
    if streamer is not None:
        streamer.put(input_ids.cpu())

    batch_size, seqlen_og = input_ids.shape
    teacher_output_len = teacher_outputs.shape[1] if teacher_outputs is not None else 0
    if cg:
        if not hasattr(model, "_decoding_cache"):
            model._decoding_cache = None
        model._decoding_cache = update_graph_cache(model, model._decoding_cache, batch_size,
                                                   seqlen_og, max_length)
        inference_params = model._decoding_cache.inference_params
        inference_params.reset(max_length, batch_size)
    else:
        inference_params = InferenceParams(max_seqlen=max_length, max_batch_size=batch_size)

    def get_logits(input_ids, inference_params):
        decoding = inference_params.seqlen_offset > 0
        if decoding:
            position_ids = torch.full((batch_size, 1), inference_params.seqlen_offset,
                                      dtype=torch.long, device=input_ids.device)
        else:
            position_ids = None
        if not cg or not decoding:
            logits = model(input_ids, position_ids=position_ids,
                           inference_params=inference_params,
                           num_last_tokens=1).logits.squeeze(dim=1)
        else:
            logits = model._decoding_cache.run(input_ids, position_ids,
                                               inference_params.seqlen_offset).squeeze(dim=1)
        return logits[..., :vocab_size] if vocab_size is not None else logits

    def sample_tokens(logits, inference_params):
        if teacher_outputs is None or teacher_output_len <= inference_params.seqlen_offset:
            token = sample(logits, top_k=top_k, top_p=top_p, min_p=min_p,
                           temperature=temperature)
        else:
            token = teacher_outputs[:, inference_params.seqlen_offset]
        return token.unsqueeze(1)

    def should_stop(current_token, inference_params):
        if inference_params.seqlen_offset == 0:
            return False
        if eos_token_id is not None and (current_token == eos_token_id).all():
            return True
        return inference_params.seqlen_offset >= max_length - 1

    timer = _Timer(input_ids.device) if enable_timing else None
    scores, sequences = [], [input_ids]
    sequences_cat = input_ids
    while not should_stop(sequences[-1], inference_params):
        logits = get_logits(sequences[-1], inference_params)
        if output_scores:
            scores.append(logits.clone())
        inference_params.seqlen_offset += sequences[-1].shape[1]
        if repetition_penalty != 1.0:
            logits = modify_logit_for_repetition_penalty(logits, sequences_cat,
                                                         repetition_penalty)
        sampled_tokens = sample_tokens(logits, inference_params)
        if repetition_penalty != 1.0:
            sequences_cat = torch.cat([sequences_cat, sampled_tokens], dim=1)
        sequences.append(sampled_tokens)
        if streamer is not None:
            streamer.put(sampled_tokens.cpu())
    if streamer is not None:
        streamer.end()
    if timer is not None:
        print(f"Prompt processing + decoding time: {timer.elapsed_ms():.0f}ms")
    return output_class()(sequences=torch.cat(sequences, dim=1), scores=tuple(scores))


class GenerationMixin:
    def allocate_inference_cache(self, batch_size, max_seqlen, dtype=None, **kwargs):
        raise NotImplementedError

    def generate(
        self,
        input_ids,
        max_length,
        top_k=1,
        top_p=0.0,
        min_p=0.0,
        temperature=1.0,
        return_dict_in_generate=False,
        output_scores=False,
        **kwargs,
    ):
        """decode(input_ids, self, max_length, ...): the sequences (batch, <= max_length), or the
        whole output with return_dict_in_generate (scores only with output_scores)."""
        output = decode(input_ids, self, max_length, top_k=top_k, top_p=top_p, min_p=min_p,
                        temperature=temperature, output_scores=output_scores, **kwargs)
        if not output_scores:
            output.scores = None
        return output if return_dict_in_generate else output.sequences
