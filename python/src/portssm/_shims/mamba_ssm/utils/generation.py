"""mamba_ssm.utils.generation on portssm (portssm.torch.generation): InferenceParams, decode,
GenerationMixin, sampling, cached CUDA-graph decoding.  GenerateDecoderOnlyOutput and
TextStreamer are transformers' (imported when first asked for, as transformers is optional)."""

from portssm.torch.generation import (DecodingCGCache, GenerationMixin, InferenceParams,
                                      capture_graph, decode, modify_logit_for_repetition_penalty,
                                      modify_logits_for_min_p_filtering,
                                      modify_logits_for_top_k_filtering,
                                      modify_logits_for_top_p_filtering, sample,
                                      update_graph_cache)

__all__ = ["InferenceParams", "modify_logits_for_min_p_filtering",
           "modify_logits_for_top_k_filtering", "modify_logits_for_top_p_filtering",
           "modify_logit_for_repetition_penalty", "sample", "decode", "GenerationMixin",
           "DecodingCGCache", "update_graph_cache", "capture_graph"]


def __getattr__(name):
    if name in ("GenerateDecoderOnlyOutput", "TextStreamer"):
        import transformers.generation

        return getattr(transformers.generation, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
