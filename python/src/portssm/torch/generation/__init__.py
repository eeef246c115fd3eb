"""mamba-ssm 2.3.2.post1's generation utilities (mamba_ssm.utils.generation) on portssm:

    InferenceParams                      params.py    the decoding state passed through a model
    decode, GenerationMixin              decode.py    the prompt, then one token per step
    sample, modify_logits_for_*          sampling.py  greedy / top-k / top-p / min-p /
                                                      temperature / repetition penalty
    DecodingCGCache, update_graph_cache,  graphs.py    cg=True: the cache kept on the model,
    capture_graph                                     steps replayed as CUDA graphs on cuda
"""

from .decode import GenerationMixin, decode
from .graphs import DecodingCGCache, capture_graph, update_graph_cache
from .params import InferenceParams
from .sampling import (modify_logit_for_repetition_penalty, modify_logits_for_min_p_filtering,
                       modify_logits_for_top_k_filtering, modify_logits_for_top_p_filtering,
                       sample)

__all__ = ["InferenceParams", "decode", "GenerationMixin", "DecodingCGCache",
           "update_graph_cache", "capture_graph", "sample", "modify_logits_for_min_p_filtering",
           "modify_logits_for_top_k_filtering", "modify_logits_for_top_p_filtering",
           "modify_logit_for_repetition_penalty"]
