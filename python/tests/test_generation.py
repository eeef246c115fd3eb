"""portssm.torch.generation (mamba-ssm 2.3.2.post1's mamba_ssm.utils.generation): decode and
MambaLMHeadModel.generate, greedy against the full forward, cg=True (CUDA graphs on cuda; on
cpu the cached states with eager steps) against cg=False, the sampling options, teacher
outputs, eos, streamer, scores."""

import pytest
import torch

from portssm.torch.generation import (DecodingCGCache, InferenceParams, decode,
                                      modify_logit_for_repetition_penalty,
                                      modify_logits_for_min_p_filtering,
                                      modify_logits_for_top_k_filtering,
                                      modify_logits_for_top_p_filtering, sample)
from portssm.torch.models import MambaConfig, MambaLMHeadModel

MODELS = {
    "mamba1": dict(d_model=32, n_layer=2, vocab_size=64, ssm_cfg=dict(d_state=8)),
    "mamba2": dict(d_model=32, n_layer=2, vocab_size=64,
                   ssm_cfg=dict(layer="Mamba2", d_state=8, headdim=16, chunk_size=8)),
    "hybrid": dict(d_model=32, n_layer=3, vocab_size=64, d_intermediate=48,
                   ssm_cfg=dict(layer="Mamba2", d_state=8, headdim=16),
                   attn_layer_idx=[1],
                   attn_cfg=dict(num_heads=4, causal=True, rotary_emb_dim=4, d_conv=3)),
}


def _model(name, device):
    model = MambaLMHeadModel(MambaConfig(**MODELS[name]), device=device)
    with torch.no_grad():  # sharper logits than the tiny init's: fewer near-ties
        model.backbone.embedding.weight.mul_(40)
    return model.eval()


def _check_greedy(model, prompt, out):
    """Each generated token is the argmax (up to float32 ties) of the full forward's logits at
    the position before it, and the scores are those logits."""
    seq = out.sequences
    n0 = prompt.shape[1]
    with torch.no_grad():
        logits = model(seq[:, :-1]).logits[:, n0 - 1:]
    scores = torch.stack(out.scores, dim=1)
    torch.testing.assert_close(scores, logits, rtol=1e-4, atol=1e-4)
    chosen = logits.gather(-1, seq[:, n0:].unsqueeze(-1)).squeeze(-1)
    assert (chosen >= logits.max(-1).values - 1e-4).all()


@pytest.mark.parametrize("name", list(MODELS))
def test_greedy_matches_full_forward(device, name):
    model = _model(name, device)
    prompt = torch.randint(0, 64, (3, 5), device=device)
    out = model.generate(prompt, max_length=17, return_dict_in_generate=True,
                         output_scores=True)
    assert out.sequences.shape == (3, 17) and len(out.scores) == 12
    assert torch.equal(out.sequences[:, :5], prompt)
    _check_greedy(model, prompt, out)


@pytest.mark.parametrize("name", list(MODELS))
def test_cg_decoding_matches_eager(device, name):
    """cg=True: on cuda, steps replayed from CUDA graphs; on cpu, the same cache with eager
    steps.  The tokens are those of cg=False; the cache stays on the model and is reused."""
    model = _model(name, device)
    prompt = torch.randint(0, 64, (2, 6), device=device)
    eager = model.generate(prompt, max_length=20, return_dict_in_generate=True,
                           output_scores=True)
    cg = model.generate(prompt, max_length=20, cg=True, return_dict_in_generate=True,
                        output_scores=True)
    assert torch.equal(cg.sequences, eager.sequences)
    torch.testing.assert_close(torch.stack(cg.scores), torch.stack(eager.scores), rtol=1e-4,
                               atol=1e-4)
    cache = model._decoding_cache
    assert isinstance(cache, DecodingCGCache) and cache.graphed == (device == "cuda")
    states = cache.inference_params.key_value_memory_dict
    again = model.generate(prompt[:, :4], max_length=15, cg=True)  # shorter: the same cache
    assert model._decoding_cache is cache and cache.inference_params.key_value_memory_dict is states
    assert torch.equal(again, model.generate(prompt[:, :4], max_length=15))
    model.generate(prompt, max_length=24, cg=True)  # longer: a new cache
    assert model._decoding_cache.max_seqlen == 24


def test_sampling_options(device):
    model = _model("mamba1", device)
    prompt = torch.randint(0, 64, (4, 3), device=device)
    for kwargs in (dict(top_k=5), dict(top_k=0, top_p=0.5), dict(top_k=10, top_p=0.7),
                   dict(top_k=0, min_p=0.2), dict(top_k=0, temperature=0.7, min_p=0.1)):
        out = model.generate(prompt, max_length=12, return_dict_in_generate=True,
                             output_scores=True, **kwargs)
        for i, scores in enumerate(out.scores):
            token = out.sequences[:, 3 + i]
            kept = scores.clone() / kwargs.get("temperature", 1.0)
            if kwargs.get("top_k", 1) > 0:
                modify_logits_for_top_k_filtering(kept, kwargs["top_k"])
            modify_logits_for_min_p_filtering(kept, kwargs.get("min_p", 0.0))
            modify_logits_for_top_p_filtering(kept, kwargs.get("top_p", 0.0))
            allowed = torch.isfinite(kept.gather(1, token.unsqueeze(1)))
            assert allowed.all(), (kwargs, i)


def test_sample_filters():
    logits = torch.tensor([[4.0, 3.0, 2.0, 1.0, 0.0], [0.0, 1.0, 5.0, 2.0, 2.5]])
    k = logits.clone()
    modify_logits_for_top_k_filtering(k, 2)
    assert torch.isfinite(k).sum(1).tolist() == [2, 2] and torch.isfinite(k[1, [2, 4]]).all()
    p = logits.clone()
    modify_logits_for_top_p_filtering(p, 0.7)  # row 0: 0.64 + 0.24 > 0.7 after two tokens
    assert torch.isfinite(p[0]).tolist() == [True, True, False, False, False]
    m = logits.clone()
    modify_logits_for_min_p_filtering(m, 0.3)  # keep p >= 0.3 p_max: logit >= max + log 0.3
    assert torch.isfinite(m).tolist() == [[True, True, False, False, False],
                                          [False, False, True, False, False]]
    unchanged = logits.clone()
    modify_logits_for_top_p_filtering(unchanged, 1.0)
    modify_logits_for_min_p_filtering(unchanged, 0.0)
    assert torch.equal(unchanged, logits)
    assert sample(logits).tolist() == [0, 2]
    assert sample(logits, top_k=0, temperature=1e-3).tolist() == [0, 2]
    torch.manual_seed(0)
    draws = torch.stack([sample(logits, top_k=2) for _ in range(200)])
    assert set(draws[:, 0].tolist()) == {0, 1} and set(draws[:, 1].tolist()) == {2, 4}
    with pytest.raises(ValueError, match="top_p"):
        sample(logits, top_k=0, top_p=1.5)


def test_repetition_penalty(device):
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    out = modify_logit_for_repetition_penalty(logits.clone(), torch.tensor([[0, 1]]), 2.0)
    assert out.tolist() == [[1.0, -2.0, 0.5, 3.0]]
    model = _model("mamba2", device)
    prompt = torch.randint(0, 64, (2, 4), device=device)
    out = model.generate(prompt, max_length=14, repetition_penalty=1.5,
                         return_dict_in_generate=True, output_scores=True)
    seq = out.sequences
    for i, scores in enumerate(out.scores):  # scores are before the penalty
        penalised = modify_logit_for_repetition_penalty(scores.clone(), seq[:, :4 + i], 1.5)
        chosen = penalised.gather(1, seq[:, 4 + i:5 + i]).squeeze(1)
        assert (chosen >= penalised.max(-1).values - 1e-4).all()


def test_teacher_outputs_eos_vocab_size_and_streamer(device):
    model = _model("mamba1", device)
    prompt = torch.randint(0, 64, (2, 3), device=device)
    teacher = torch.randint(0, 64, (2, 8), device=device)
    out = decode(prompt, model, 12, teacher_outputs=teacher)
    assert torch.equal(out.sequences[:, 3:8], teacher[:, 3:8])
    first = model.generate(prompt[:1], max_length=10)[0, 3].item()
    stopped = model.generate(prompt[:1], max_length=10, eos_token_id=first)
    assert stopped.shape == (1, 4)
    small = model.generate(prompt, max_length=10, vocab_size=7, top_k=0,
                           return_dict_in_generate=True, output_scores=True)
    assert (small.sequences[:, 3:] < 7).all() and small.scores[0].shape == (2, 7)

    class Recorder:
        def __init__(self):
            self.calls = []

        def put(self, tokens):
            assert tokens.device.type == "cpu"
            self.calls.append(tokens.clone())

        def end(self):
            self.calls.append("end")

    rec = Recorder()
    seq = model.generate(prompt, max_length=8, streamer=rec)
    assert rec.calls[-1] == "end" and len(rec.calls) == 1 + 5 + 1
    assert torch.equal(torch.cat(rec.calls[:-1], dim=1), seq.cpu())
    assert model.generate(prompt, max_length=8, output_scores=False,
                          return_dict_in_generate=True).scores is None


def test_enable_timing_prints(device, capsys):
    model = _model("mamba1", device)
    model.generate(torch.randint(0, 64, (1, 3), device=device), max_length=6,
                   enable_timing=True)
    assert "Prompt processing + decoding time:" in capsys.readouterr().out


def test_inference_params_reset():
    lengths = torch.full((2,), 7, dtype=torch.int32)
    p = InferenceParams(max_seqlen=10, max_batch_size=2, seqlen_offset=7,
                        lengths_per_sample=lengths)
    p.reset(20, 3)
    assert (p.max_seqlen, p.max_batch_size, p.seqlen_offset) == (20, 3, 0)
    assert not lengths.any()


def test_generate_output_type():
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    model = _model("mamba1", "cpu")
    out = model.generate(torch.randint(0, 64, (1, 2)), max_length=4,
                         return_dict_in_generate=True)
    assert isinstance(out, transformers.generation.GenerateDecoderOnlyOutput)
