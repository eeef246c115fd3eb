"""Cached decoding for decode(cg=True) (mamba-ssm 2.3.2.post1's DecodingCGCache,
update_graph_cache, capture_graph): the model's inference cache allocated once and kept on the
model (model._decoding_cache) across generate calls, and one decode step per (batch,
decoding_seqlen) captured as a CUDA graph and replayed, so that a step costs one graph launch.

On a device without CUDA graphs (cpu), cg=True keeps the same cache and runs each step eagerly
on it: the tokens are those of cg=False, the cost that of eager decoding (there is no graph to
gain there).  DecodingCGCache.graphed says which it is.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .params import InferenceParams


@dataclass
class DecodingCGCache:
    max_batch_size: int = 0
    max_seqlen: int = 0
    device = None
    dtype = None
    callables: dict = field(default_factory=dict)
    mempool = None
    inference_params: Optional[InferenceParams] = None
    run: Optional[Callable] = None
    graphed: bool = False  # steps replay CUDA graphs (False: eager steps, on cpu)


@torch.inference_mode()
def update_graph_cache(model, cache, batch_size, seqlen_og, max_seqlen, decoding_seqlens=(1,),
                       dtype=None, n_warmups=2):
    """cache (a DecodingCGCache, or None for a new one) made ready to decode batch_size
    sequences of prompt length seqlen_og up to max_seqlen: its inference cache reallocated if
    the device, dtype or a size grew, a step captured per decoding seqlen not captured yet.
    Returns the cache; cache.run(input_ids, position_ids, seqlen) runs one step."""
    if cache is None:
        cache = DecodingCGCache()
    param_example = next(iter(model.parameters()))
    device = param_example.device
    if dtype is None:
        dtype = param_example.dtype
    if ((device, dtype) != (cache.device, cache.dtype) or batch_size > cache.max_batch_size
            or max_seqlen > cache.max_seqlen):
        cache.callables = {}
        cache.mempool = None
        cache.inference_params = None
        gc.collect()
        cache.device, cache.dtype = device, dtype
        cache.max_batch_size, cache.max_seqlen = batch_size, max_seqlen
        if not hasattr(model, "allocate_inference_cache"):
            raise TypeError("cached (cg=True) decoding needs a model with "
                            "allocate_inference_cache(batch_size, max_seqlen, dtype)")
        inf_cache = model.allocate_inference_cache(batch_size, max_seqlen, dtype)
        lengths_per_sample = torch.full((batch_size,), seqlen_og, dtype=torch.int32,
                                        device=device)
        cache.inference_params = InferenceParams(
            max_seqlen=max_seqlen, max_batch_size=batch_size, seqlen_offset=seqlen_og,
            key_value_memory_dict=inf_cache, lengths_per_sample=lengths_per_sample)
        cache.graphed = device.type == "cuda"
        cache.mempool = torch.cuda.graphs.graph_pool_handle() if cache.graphed else None
    for decoding_seqlen in decoding_seqlens:
        if (batch_size, decoding_seqlen) not in cache.callables:
            make = capture_graph if cache.graphed else _eager_step
            cache.callables[batch_size, decoding_seqlen] = make(
                model, cache.inference_params, batch_size, max_seqlen,
                decoding_seqlen=decoding_seqlen, mempool=cache.mempool, n_warmups=n_warmups)

    def dispatch(input_ids, position_ids, seqlen):
        batch_size, decoding_seqlen = input_ids.shape[:2]
        return cache.callables[batch_size, decoding_seqlen](input_ids, position_ids, seqlen)

    cache.run = dispatch
    cache.inference_params.seqlen_offset = 0  # decode sets it; 0 until then
    return cache


def capture_graph(model, inference_params, batch_size, max_seqlen, decoding_seqlen=1,
                  mempool=None, n_warmups=2):
    """One decode step of decoding_seqlen tokens captured as a CUDA graph on static input
    buffers; returns run(input_ids, position_ids, seqlen) -> logits (a copy)."""
    device = next(iter(model.parameters())).device
    input_ids = torch.full((batch_size, decoding_seqlen), 0, dtype=torch.long, device=device)
    position_ids = torch.full((batch_size, decoding_seqlen), 0, dtype=torch.long, device=device)
    seqlen_offset_og = inference_params.seqlen_offset
    # any offset > 0 makes the layers take their decode path; the per-step offsets come from
    # lengths_per_sample, which run() sets before each replay
    inference_params.seqlen_offset = max_seqlen - decoding_seqlen
    inference_params.lengths_per_sample[:] = inference_params.seqlen_offset

    # warm-up on a side stream (first-call allocations and library set-up outside capture)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n_warmups):
            logits = model(input_ids, position_ids=position_ids,
                           inference_params=inference_params,
                           num_last_tokens=decoding_seqlen).logits
        s.synchronize()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.barrier()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=mempool):
        logits = model(input_ids, position_ids=position_ids, inference_params=inference_params,
                       num_last_tokens=decoding_seqlen).logits

    def run(new_input_ids, new_position_ids, seqlen):
        inference_params.lengths_per_sample[:] = seqlen
        input_ids.copy_(new_input_ids)
        position_ids.copy_(new_position_ids)
        graph.replay()
        return logits.clone()

    inference_params.seqlen_offset = seqlen_offset_og
    return run


def _eager_step(model, inference_params, batch_size, max_seqlen, decoding_seqlen=1,
                mempool=None, n_warmups=2):
    """capture_graph's counterpart where there are no CUDA graphs: run() calls the model on the
    cached inference params (the same states and offsets a replay would use)."""

    def run(new_input_ids, new_position_ids, seqlen):
        inference_params.lengths_per_sample[:] = seqlen
        return model(new_input_ids, position_ids=new_position_ids,
                     inference_params=inference_params,
                     num_last_tokens=decoding_seqlen).logits

    return run
