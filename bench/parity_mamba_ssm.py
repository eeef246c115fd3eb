#!/usr/bin/env python3
"""mamba-ssm's own model code against portssm's import surface, on the same checkpoint.

The same code, written against mamba-ssm's public API only (`from mamba_ssm.models...`), runs
twice, each in its own process: once with the reference packages importable (--reference-path,
see shared/anchors/README.md), once with portssm answering to `import mamba_ssm`.  The reference
process builds a MambaLMHeadModel from a config (Mamba-1 and Mamba-2, 130M-size by default) with
a fixed seed and saves it with save_pretrained; the portssm process loads that directory with
from_pretrained and load_state_dict(strict=True).  Both then report, on the same inputs:

  * fp32 logits of a forward pass (compared: relative norm of the difference, at most 1e-4),
  * greedy tokens of generate() (compared: identical),
  * one bf16-autocast training step: loss and the norm of every parameter's gradient
    (compared: the loss and the whole gradient's norm to 1e-2 relative; each side's gradient
    norms against an fp32 step's, per kind of parameter (the same weight of every layer): the
    root mean square of portssm's errors over the layers at most 1e-2 or 1.5 times the
    reference's.  Per kind, not per parameter: gradients such as x_proj's are sums of many
    bf16-rounded terms that largely cancel, and either side's rounding moves one layer's norm by
    about 1% at random; the mean over 24 layers says which side is further from fp32),
  * decode throughput of generate(cg=True) and of generate() at batch 1 and 8 (tokens/s).

A third process runs the reference in full fp32 (TRITON_F32_DEFAULT=ieee: mamba-ssm's Triton
kernels otherwise multiply fp32 operands in TF32, 10-bit mantissas): its fp32 logits and an fp32
training step's gradients are the yardstick both sides are held to.

    python3 bench/parity_mamba_ssm.py --reference-path /tmp/anchors [--size 130m] [--json F]

Exit status 0 when every comparison passes.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

SIZES = {"tiny": dict(d_model=64, n_layer=2, vocab_size=512),
         "130m": dict(d_model=768, n_layer=24, vocab_size=50280)}


def config(layer, size):
    from mamba_ssm.models.config_mamba import MambaConfig

    ssm = {"layer": layer}
    if layer == "Mamba2" and size == "tiny":
        ssm.update(headdim=16, chunk_size=32)
    return MambaConfig(**SIZES[size], ssm_cfg=ssm, rms_norm=True, residual_in_fp32=True,
                       fused_add_norm=True, pad_vocab_size_multiple=8)


def child(args):
    import torch

    if args.side.startswith("reference"):
        sys.path.insert(0, args.reference_path)
    else:
        import portssm

        enable = getattr(portssm, "enable_import_aliases", None)
        if enable:
            enable()
    import mamba_ssm
    from mamba_ssm.models.mixer_seq_simple import MambaLMHeadModel

    where = os.path.dirname(mamba_ssm.__file__)
    if (args.side == "portssm") != ("portssm" in where):
        raise SystemExit("%s side imported mamba_ssm from %s" % (args.side, where))
    out = dict(side=args.side, mamba_ssm=where)
    device = "cuda"
    ckpt = os.path.join(args.scratch, args.layer)
    if args.side == "reference":
        torch.manual_seed(0)
        model = MambaLMHeadModel(config(args.layer, args.size), device=device,
                                 dtype=torch.float32)
        model.save_pretrained(ckpt)
    else:
        model = MambaLMHeadModel.from_pretrained(ckpt, device=device, dtype=torch.float32)
        state = torch.load(os.path.join(ckpt, "pytorch_model.bin"), map_location=device)
        model.load_state_dict(state, strict=True)
    gen = torch.Generator().manual_seed(1)
    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (2, 512), generator=gen).to(device)
    model.eval()
    with torch.no_grad():
        torch.save(model(ids).logits.float().cpu(),
                   os.path.join(args.scratch, "%s-%s-logits.pt" % (args.layer, args.side)))
    if args.side == "reference_fp32":  # the yardstick: fp32 logits and an fp32 step's gradients
        model.train()
        logits = model(ids).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(),
                                                 ids[:, 1:].flatten())
        loss.backward()
        out["grad_norms"] = {n: float(p.grad.float().norm())
                             for n, p in model.named_parameters() if p.grad is not None}
        print("PARITY " + json.dumps(out))
        return
    prompt = ids[:, :64]
    tokens = model.generate(prompt, max_length=64 + 64, cg=False)
    torch.save(tokens.cpu(), os.path.join(args.scratch, "%s-%s-tokens.pt" % (args.layer, args.side)))

    model.train()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(ids).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1).float(),
                                                 ids[:, 1:].flatten())
    loss.backward()
    out["loss"] = float(loss)
    out["grad_norms"] = {n: float(p.grad.float().norm()) for n, p in model.named_parameters()
                         if p.grad is not None}
    model.zero_grad(set_to_none=True)
    model.eval()
    for batch in (1, 8):
        p = torch.randint(0, vocab, (batch, 64), generator=gen).to(device)
        for cg in (True, False) if args.eager_decode else (True,):
            model.generate(p, max_length=64 + 8, cg=cg)  # warm-up (and graph capture)
            best = float("inf")
            for _ in range(3 if cg else 1):  # the best of three: the host is shared
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                model.generate(p, max_length=64 + args.decode_tokens, cg=cg)
                torch.cuda.synchronize()
                best = min(best, time.perf_counter() - t0)
            out["decode_b%d_%s_tok_s" % (batch, "cg" if cg else "eager")] = (
                batch * args.decode_tokens / best)
    if args.profile_decode:
        out["kernels_b1_cg"] = decode_kernels(model, vocab, gen, device, args.profile_decode)
    print("PARITY " + json.dumps(out))


def decode_kernels(model, vocab, gen, device, tokens):
    """{kernel: [launches, µs]} per decoded token of generate(cg=True) at batch 1 (the graph
    replays' kernels, as CUPTI reports them; the prompt's forward pass included, as in the
    timing above)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    p = torch.randint(0, vocab, (1, 64), generator=gen).to(device)
    # graphs captured afresh at batch 1: mamba-ssm's cache of batch 8 (the timing's last) would
    # be reused for a smaller batch, which its decode cannot run
    model._decoding_cache = None
    model.generate(p, max_length=64 + tokens, cg=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model.generate(p, max_length=64 + tokens, cg=True)
        torch.cuda.synchronize()
    table = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            n, us = table.get(ev.name, (0, 0.0))
            table[ev.name] = (n + 1, us + ev.time_range.elapsed_us())
    return {k: [n / tokens, us / tokens] for k, (n, us) in table.items()}


def print_kernels(layer, side, table, top=12):
    total = sum(us for _, us in table.values())
    print("   %s / %s: GPU time per decoded token %.1f µs (generate(cg=True), batch 1), largest:"
          % (layer, side, total))
    for name, (n, us) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]:
        print("      %8.1f µs  %5.1f launches  %s" % (us, n, name[:110]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference-path", default=os.environ.get("PORTSSM_REFERENCE_PATH",
                                                               "/tmp/anchors"))
    ap.add_argument("--size", default="130m", choices=sorted(SIZES))
    ap.add_argument("--layers", default="Mamba1,Mamba2")
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--eager-decode", action="store_true",
                    help="also time generate() without CUDA graphs")
    ap.add_argument("--profile-decode", type=int, default=0, metavar="TOKENS",
                    help="also list the GPU kernels of generate(cg=True) at batch 1 over "
                         "TOKENS tokens, per token, on each side")
    ap.add_argument("--json")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    ap.add_argument("--layer", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        return child(args)

    import torch

    rows, ok = [], True
    with tempfile.TemporaryDirectory() as scratch:
        for layer in args.layers.split(","):
            got = {}
            for side in ("reference", "portssm", "reference_fp32"):
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                if side.startswith("reference"):
                    env["PORTSSM_NO_ALIAS"] = "1"
                if side == "reference_fp32":
                    env["TRITON_F32_DEFAULT"] = "ieee"
                cmd = [sys.executable, os.path.abspath(__file__), "--side", side, "--layer",
                       layer, "--scratch", scratch, "--size", args.size, "--reference-path",
                       args.reference_path, "--decode-tokens", str(args.decode_tokens)]
                cmd += ["--eager-decode"] if args.eager_decode else []
                cmd += ["--profile-decode", str(args.profile_decode)]
                p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
                line = [x for x in p.stdout.splitlines() if x.startswith("PARITY ")]
                if p.returncode or not line:
                    print("%s / %s failed (rc %d):\n%s" % (layer, side, p.returncode,
                                                           (p.stdout + p.stderr)[-4000:]))
                    ok = False
                    break
                got[side] = json.loads(line[-1][len("PARITY "):])
                print("%s / %s: done" % (layer, side), flush=True)  # (progress, if cut short)
            if len(got) < 3:
                continue
            ref, mine, yard = got["reference"], got["portssm"], got["reference_fp32"]
            la, lb, lc = (torch.load(os.path.join(scratch, "%s-%s-logits.pt" % (layer, s)))
                          for s in ("reference", "portssm", "reference_fp32"))
            ta, tb = (torch.load(os.path.join(scratch, "%s-%s-tokens.pt" % (layer, s)))
                      for s in ("reference", "portssm"))
            logits_rel = float((la - lb).norm() / la.norm())
            logits_rel_fp32 = {s: float((l - lc).norm() / lc.norm())
                               for s, l in (("portssm", lb), ("reference", la))}
            loss_rel = abs(ref["loss"] - mine["loss"]) / abs(ref["loss"])

            def total(g):
                return sum(v * v for v in g.values()) ** 0.5

            grad_total_rel = abs(total(ref["grad_norms"]) - total(mine["grad_norms"])) / total(
                ref["grad_norms"])
            grad_rel = max(abs(ref["grad_norms"][n] - mine["grad_norms"].get(n, float("nan")))
                           / max(ref["grad_norms"][n], 1e-12) for n in ref["grad_norms"])
            # each side's bf16 gradient norms against the fp32 step's, per parameter
            err = {s: {n: abs(g["grad_norms"][n] - v) / max(v, 1e-12)
                       for n, v in yard["grad_norms"].items()}
                   for s, g in (("portssm", mine), ("reference", ref))}
            kinds = {}
            for n in err["portssm"]:
                kinds.setdefault(re.sub(r"\.\d+\.", ".*.", n), []).append(n)
            kind_rms = {k: {s: (sum(err[s][n] ** 2 for n in ns) / len(ns)) ** 0.5
                            for s in err} for k, ns in kinds.items()}
            worse = [k for k, e in kind_rms.items()
                     if e["portssm"] > max(1e-2, 1.5 * e["reference"])]
            same = bool(torch.equal(ta, tb))
            passed = (logits_rel_fp32["portssm"] <= 1e-4 and same and loss_rel <= 1e-2 and
                      grad_total_rel <= 1e-2 and not worse)
            ok &= passed
            rows.append(dict(layer=layer, logits_rel=logits_rel, logits_rel_fp32=logits_rel_fp32,
                             tokens_equal=same, loss_rel=loss_rel, grad_total_rel=grad_total_rel,
                             grad_rel_max=grad_rel,
                             grad_err_vs_fp32_max={s: max(e.values()) for s, e in err.items()},
                             grad_err_vs_fp32_rms_per_kind=kind_rms,
                             grads_worse_than_reference=worse, passed=passed,
                             kernels_b1_cg={s: g.get("kernels_b1_cg") for s, g in
                                            (("portssm", mine), ("reference", ref))},
                             reference=ref, portssm=mine, reference_fp32=yard))
    print("| layer | fp32 logits rel.: vs reference / vs fp32 reference (portssm; reference) | "
          "greedy tokens | bf16 loss rel. | grad norm rel.: whole / max per parameter | "
          "max per-parameter error vs fp32 step (portssm; reference) | "
          "decode cg B1 / B8 tok/s (portssm vs reference) | eager B1 / B8 |")
    print("|---|---|---|---:|---|---|---|---|")
    for r in rows:
        p, q = r["portssm"], r["reference"]
        eager = ("%.0f / %.0f vs %.0f / %.0f" % (
            p["decode_b1_eager_tok_s"], p["decode_b8_eager_tok_s"],
            q["decode_b1_eager_tok_s"], q["decode_b8_eager_tok_s"])
                 if "decode_b1_eager_tok_s" in p else "-")
        print("| %s | %.1e / %.1e; %.1e | %s | %.1e | %.1e / %.1e | %.1e; %.1e | "
              "%.0f / %.0f vs %.0f / %.0f | %s |" % (
                  r["layer"], r["logits_rel"], r["logits_rel_fp32"]["portssm"],
                  r["logits_rel_fp32"]["reference"],
                  "same" if r["tokens_equal"] else "DIFFER", r["loss_rel"],
                  r["grad_total_rel"], r["grad_rel_max"],
                  r["grad_err_vs_fp32_max"]["portssm"], r["grad_err_vs_fp32_max"]["reference"],
                  p["decode_b1_cg_tok_s"],
                  p["decode_b8_cg_tok_s"], q["decode_b1_cg_tok_s"], q["decode_b8_cg_tok_s"],
                  eager))
        worst = sorted(r["grad_err_vs_fp32_rms_per_kind"].items(),
                       key=lambda kv: -kv[1]["portssm"])[:4]
        print("   %s: largest gradient-norm errors vs fp32, RMS over the layers (portssm; "
              "reference): %s" % (r["layer"], ", ".join(
                  "%s %.1e; %.1e" % (k, e["portssm"], e["reference"]) for k, e in worst)))
        if r["grads_worse_than_reference"]:
            print("   %s: portssm's bf16 gradients further from fp32 than the reference's: %s"
                  % (r["layer"], ", ".join(r["grads_worse_than_reference"][:8])))
        for side, table in r["kernels_b1_cg"].items():
            if table:
                print_kernels(r["layer"], side, table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print("parity: %s" % ("PASS" if ok and rows else "FAIL"))
    return 0 if ok and rows else 1


if __name__ == "__main__":
    sys.exit(main())
