"""Next-token choice for mamba-ssm 2.3.2.post1's decode (mamba_ssm.utils.generation): greedy,
top-k, top-p (nucleus), min-p, temperature and the repetition penalty, on (batch, vocab) logits.

Where it differs from mamba-ssm: min-p keeps the tokens whose probability is at least min_p
times the row's largest (after temperature, as transformers' MinPLogitsWarper), for any batch
and together with top-k and top-p; mamba-ssm compares raw logits with min_p times the first
logit of the batch (`.item()`, so batch 1 only) and ignores min_p when top_k > 0 or top_p."""

from __future__ import annotations

import math

import torch


def modify_logits_for_min_p_filtering(logits, min_p):
    """Sets to -inf, in place, the logits whose probability is below min_p times the largest
    probability of their row.  min_p outside (0, 1) changes nothing."""
    if min_p <= 0.0 or min_p >= 1.0:
        return
    # p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)
    threshold = logits.max(dim=-1, keepdim=True).values + math.log(min_p)
    logits.masked_fill_(logits < threshold, float("-inf"))


def modify_logits_for_top_k_filtering(logits, top_k):
    """Sets to -inf, in place, the logits below the k-th largest of their row."""
    kth = torch.topk(logits, top_k)[0][..., -1, None]
    logits.masked_fill_(logits < kth, float("-inf"))


def modify_logits_for_top_p_filtering(logits, top_p):
    """Sets to -inf, in place, the logits outside the smallest set of most probable tokens whose
    probabilities sum to more than top_p (nucleus).  top_p outside (0, 1) changes nothing."""
    if top_p <= 0.0 or top_p >= 1.0:
        return
    sorted_logits, sorted_indices = torch.sort(logits, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    # ascending order: a token goes when all the less probable ones together (itself
    # included) stay within 1 - top_p; the most probable token always stays
    remove_sorted = cumulative <= (1 - top_p)
    remove = remove_sorted.scatter(1, sorted_indices, remove_sorted)
    logits.masked_fill_(remove, float("-inf"))


def modify_logit_for_repetition_penalty(logits, prev_output_tokens, repetition_penalty=1.0):
    """The repetition penalty of https://arxiv.org/abs/1909.05858, in place: the logit of each
    token in prev_output_tokens (batch, seq_len) is divided by the penalty when positive,
    multiplied when negative.  Returns logits."""
    if repetition_penalty == 1.0:
        return logits
    score = torch.gather(logits, 1, prev_output_tokens)
    score = torch.where(score < 0, score * repetition_penalty, score / repetition_penalty)
    logits.scatter_(1, prev_output_tokens, score)
    return logits


def sample(logits, top_k=1, top_p=0.0, min_p=0.0, temperature=1.0):
    """Token ids (batch,) from logits (batch, vocab): greedy when top_k == 1; otherwise sampled
    after, in order, top-k (top_k > 0; 0 keeps every token), temperature, min-p and top-p."""
    if top_k == 1:  # greedy
        return logits.argmax(dim=-1)
    if top_p > 0.0 and top_p > 1.0:
        raise ValueError("top_p must be in (0, 1], got %r" % (top_p,))
    if top_k > 0:
        top_k = min(top_k, logits.size(-1))
        logits_top, indices = torch.topk(logits, top_k, dim=-1)
        if temperature != 1.0:
            logits_top /= temperature
    else:
        # a copy: the filters below work in place
        logits_top = logits / temperature if temperature != 1.0 else logits.clone()
        indices = None
    modify_logits_for_min_p_filtering(logits_top, min_p)
    modify_logits_for_top_p_filtering(logits_top, top_p)
    choice = torch.multinomial(torch.softmax(logits_top, dim=-1), num_samples=1).squeeze(dim=-1)
    if indices is None:
        return choice
    return indices[torch.arange(indices.shape[0], device=indices.device), choice]
