#!/usr/bin/env python3
"""End to end: Hugging Face transformers' MambaForCausalLM and Mamba2ForCausalLM built from
configs (no download), the same weights in every mode, each mode in its own process:

  portssm     transformers' kernel path on portssm (import aliasing where the package has it,
              else portssm.torch.patch_transformers())
  reference   mamba-ssm + causal-conv1d, importable from --reference-path (shared/anchors)
  torch       transformers' own torch code (neither package importable)

Per model and mode: training step time (autocast, without and with an AdamW step), the forward
alone (eval, no grad: a prefill of the training batch), tokens/s,
peak memory, first-step time, greedy decode tokens/s at batch 1 and 8 with fp32 and bf16
weights, and the agreement between modes (loss, gradient norm, fp32 logits, greedy tokens)
against the first mode that ran.  Prints a markdown table; --json writes every figure.

    python3 bench/e2e.py --size 130m --device cuda --modes portssm,reference
    python3 bench/e2e.py --size tiny --device cpu --modes portssm,torch      (CI)
    python3 bench/e2e.py --size small --device cpu --modes portssm,torch --threads 2 \
        --batch 2 --seqlen 512 --no-decode          (the cpu rows of RESULTS.md)
    python3 bench/e2e.py --size 130m --batch 1 --seqlen 131072 --no-decode   (long context)

--threads N sets torch's threads and PORTSSM_NUM_THREADS alike.  On cpu the portssm mode goes
through patch_transformers(): transformers sends cpu tensors past imported kernel packages.

--saved-tensors prints, per mode, the tensors that layer 0's mixer keeps for the backward
(shape, dtype, bytes), which is where a training step's memory goes.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIZES = {
    # d_model, layers, vocab; Mamba-1 state 16, Mamba-2 state 128 / head 64 / chunk 256
    "tiny": dict(d_model=64, n_layer=2, vocab=256),
    # issue 45's CPU comparison: hidden 256, 4 layers (a small vocabulary, so that the LM head
    # does not hide the mixers)
    "small": dict(d_model=256, n_layer=4, vocab=1024),
    "130m": dict(d_model=768, n_layer=24, vocab=50280),
    "1.4b": dict(d_model=2048, n_layer=48, vocab=50280),
}


def make_config(model, size):
    import transformers

    s = SIZES[size]
    if model == "mamba":
        return transformers.MambaConfig(vocab_size=s["vocab"], hidden_size=s["d_model"],
                                        num_hidden_layers=s["n_layer"], state_size=16, expand=2,
                                        conv_kernel=4, use_cache=True)
    head = 64 if size != "tiny" else 16  # "small": 8 heads of 64, state 128, like 130m
    return transformers.Mamba2Config(vocab_size=s["vocab"], hidden_size=s["d_model"],
                                     num_hidden_layers=s["n_layer"],
                                     state_size=128 if size != "tiny" else 16, head_dim=head,
                                     num_heads=2 * s["d_model"] // head, n_groups=1, expand=2,
                                     conv_kernel=4, chunk_size=256 if size != "tiny" else 32,
                                     use_cache=True)


def build_model(model, size):
    import transformers

    cfg = make_config(model, size)
    cls = transformers.MambaForCausalLM if model == "mamba" else transformers.Mamba2ForCausalLM
    return cls(cfg)


# ---------------------------------------------------------------- the child: one mode

def select_kernels(mode, reference_path, device="cuda"):
    """Makes transformers see exactly this mode's kernels; returns how the path was checked."""
    if mode == "reference":
        sys.path.insert(0, reference_path)
        import torch  # noqa: F401  (the extensions need torch first)
        import causal_conv1d
        import mamba_ssm

        for mod in (causal_conv1d, mamba_ssm):
            if "portssm" in (getattr(mod, "__file__", "") or ""):
                raise SystemExit("reference mode: %s resolved to portssm" % mod.__name__)
        return "mamba_ssm from %s" % os.path.dirname(mamba_ssm.__file__)
    if mode == "torch":
        for name in ("mamba_ssm", "causal_conv1d"):
            try:
                __import__(name)
            except ImportError:
                continue
            raise SystemExit("torch mode: %s is importable (set PORTSSM_NO_ALIAS=1)" % name)
        return "neither package importable"
    import portssm

    # transformers sends non-cuda tensors of an imported package's kernels to its torch code
    # (its list of the packages' devices), so on cpu only the patch reaches portssm
    enable = getattr(portssm, "enable_import_aliases", None) if device == "cuda" else None
    if enable is not None:
        enable()
        import mamba_ssm

        if "portssm" not in (mamba_ssm.__file__ or ""):
            raise SystemExit("portssm mode: mamba_ssm resolved to %s" % mamba_ssm.__file__)
        return "import aliases (mamba_ssm -> %s)" % os.path.dirname(mamba_ssm.__file__)
    import portssm.torch as pt

    pt.patch_transformers()
    return "patch_transformers()"


def sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def portssm_calls(fn):
    """Runs fn() and counts the calls of portssm.torch's drop-ins made meanwhile (a profile
    hook, so that nothing is patched): how a mode shows that its kernel path really ran."""
    import portssm.torch as pt

    here = os.path.dirname(pt.__file__) + os.sep
    count = [0]

    def hook(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(here):
            count[0] += 1

    sys.setprofile(hook)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count[0]


def saved_tensors_of_layer0(model, ids, autocast):
    """The tensors layer 0's mixer saves for the backward (deduplicated by storage)."""
    import torch

    seen, rows = set(), []

    def pack(t):
        key = (t.untyped_storage().data_ptr(), t.dtype)
        if key not in seen:
            seen.add(key)
            rows.append(dict(shape=list(t.shape), dtype=str(t.dtype).replace("torch.", ""),
                             bytes=t.untyped_storage().nbytes()))
        return t

    mixer = model.backbone.layers[0].mixer
    hidden = model.backbone.embeddings(ids).detach().requires_grad_()
    with autocast():
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = mixer(hidden)
    out.float().sum().backward()
    return rows


def step_kernels(step, device, steps):
    """{name: [launches, µs]} per training step, over `steps` profiled steps (after the timed
    ones: warm).  On cuda the GPU kernels (CUPTI: libportssm's launches are seen like torch's);
    elsewhere the CPU time of each operator, self time only (no double counting)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    gpu = device == "cuda"
    acts = [ProfilerActivity.CUDA] if gpu else [ProfilerActivity.CPU]
    with profile(activities=acts) as prof:
        for _ in range(steps):
            step()
        sync(device)
    table = {}
    for ev in prof.events():
        if gpu and ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = ev.time_range.elapsed_us() if gpu else ev.self_cpu_time_total
        n, t = table.get(ev.name, (0, 0.0))
        table[ev.name] = (n + 1, t + us)
    return {k: [n / steps, t / steps] for k, (n, t) in table.items() if t > 0}


def print_kernels(results, top):
    """Per model, the largest entries of each mode's step, the modes side by side."""
    for model in dict.fromkeys(r["model"] for r in results):
        rows = [r for r in results if r["model"] == model and r.get("step_kernels")]
        if not rows:
            continue
        print("\n%s: one training step's %s, µs per step (launches), largest first" % (
            model, "GPU kernels" if rows[0]["device"] == "cuda" else "operators (CPU self time)"))
        for r in rows:
            table = r["step_kernels"]
            print("   %s: %.1f µs in all" % (r["mode"], sum(t for _, t in table.values())))
            for name, (n, t) in sorted(table.items(), key=lambda kv: -kv[1][1])[:top]:
                print("      %9.1f  (%5.1f)  %s" % (t, n, name[:100]))


def run_mode(args):
    import torch

    device = args.device
    if args.threads:  # torch's and portssm's (PORTSSM_NUM_THREADS, set by the parent) alike
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
    how = select_kernels(args.mode, args.reference_path, device)
    result = dict(mode=args.mode, kernels=how, model=args.model, size=args.size, device=device,
                  threads=torch.get_num_threads(),
                  portssm_threads=os.environ.get("PORTSSM_NUM_THREADS"))
    torch.manual_seed(0)
    model = build_model(args.model, args.size)
    model.load_state_dict(torch.load(args.weights, map_location="cpu"))
    model.to(device)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (args.batch, args.seqlen), generator=gen).to(device)
    amp = args.autocast if args.autocast != "none" else None

    def autocast():
        if amp is None:
            return torch.autocast(device_type=device, enabled=False)
        return torch.autocast(device_type=device, dtype=getattr(torch, amp))

    # numerics: fp32 logits (eval) and one training step's loss and gradient norm
    model.eval()
    probe = ids[: min(2, args.batch), : min(args.seqlen, 256)]
    with torch.no_grad():
        logits = model(probe).logits.float().cpu()
        if args.mode != "reference":  # (the reference imports no portssm)
            result["portssm_calls"] = portssm_calls(lambda: model(probe))
            if (result["portssm_calls"] > 0) != (args.mode == "portssm"):
                raise SystemExit("%s mode: %d calls reached portssm's drop-ins"
                                 % (args.mode, result["portssm_calls"]))
    torch.save(logits, os.path.join(args.scratch, "logits-%s.pt" % args.mode))
    model.train()

    def step(opt=None):
        model.zero_grad(set_to_none=True)
        with autocast():
            loss = model(ids, labels=ids).loss
        loss.backward()
        if opt is not None:
            opt.step()
        return loss

    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    loss = step()
    sync(device)
    result["first_step_s"] = time.perf_counter() - t0
    grads = [p.grad.float().norm() for p in model.parameters() if p.grad is not None]
    result["loss"] = float(loss)
    result["grad_norm"] = float(torch.stack(grads).norm())
    for _ in range(args.warmup):
        step()
    sync(device)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        sync(device)
        times.append(time.perf_counter() - t0)
    result["train_ms"] = 1e3 * statistics.median(times)
    result["train_tok_s"] = args.batch * args.seqlen / statistics.median(times)
    if device == "cuda":
        result["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
    # forward alone (eval, no grad, no cache): a prefill of the same batch
    model.eval()
    with torch.no_grad():
        model(ids, use_cache=False)
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            model(ids, use_cache=False)
            sync(device)
            times.append(time.perf_counter() - t0)
    result["fwd_ms"] = 1e3 * statistics.median(times)
    model.train()
    if args.adamw:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        step(opt)
        sync(device)
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step(opt)
            sync(device)
            times.append(time.perf_counter() - t0)
        result["train_adamw_ms"] = 1e3 * statistics.median(times)
        if device == "cuda":
            result["peak_adamw_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
        model.load_state_dict(torch.load(args.weights, map_location=device))
    if args.saved_tensors:
        result["saved_layer0"] = saved_tensors_of_layer0(model, ids, autocast)
    if args.profile:
        result["step_kernels"] = step_kernels(step, device, args.profile)
    model.zero_grad(set_to_none=True)

    if args.decode_tokens > 0:
        model.eval()
        for wdtype in ("float32", "bfloat16"):
            model.to(getattr(torch, wdtype))
            for batch in (1, 8):
                prompt = torch.randint(0, vocab, (batch, 64), generator=gen).to(device)
                kw = dict(max_new_tokens=args.decode_tokens, min_new_tokens=args.decode_tokens,
                          do_sample=False, use_cache=True, pad_token_id=0)
                with torch.no_grad():
                    model.generate(prompt, **dict(kw, max_new_tokens=4, min_new_tokens=4))
                    sync(device)
                    t0 = time.perf_counter()
                    out = model.generate(prompt, **kw)
                    sync(device)
                dt = time.perf_counter() - t0
                key = "decode_%s_b%d" % ("fp32" if wdtype == "float32" else "bf16", batch)
                result[key + "_tok_s"] = batch * args.decode_tokens / dt
                if wdtype == "float32" and batch == 1:
                    torch.save(out[:, 64:].cpu(), os.path.join(args.scratch,
                                                               "tokens-%s.pt" % args.mode))
    print("E2E-RESULT " + json.dumps(result))


# ---------------------------------------------------------------- the parent

def compare(scratch, first, mode):
    import torch

    a = torch.load(os.path.join(scratch, "logits-%s.pt" % first))
    b = torch.load(os.path.join(scratch, "logits-%s.pt" % mode))
    rel = float((a - b).norm() / a.norm())
    same = None
    ta, tb = (os.path.join(scratch, "tokens-%s.pt" % m) for m in (first, mode))
    if os.path.exists(ta) and os.path.exists(tb):
        same = bool(torch.equal(torch.load(ta), torch.load(tb)))
    return rel, same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="both", choices=["mamba", "mamba2", "both"])
    ap.add_argument("--size", default="130m", choices=sorted(SIZES))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--modes", default="portssm,reference")
    ap.add_argument("--reference-path", default=os.environ.get("PORTSSM_REFERENCE_PATH",
                                                               "/tmp/anchors"))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--autocast", default=None, help="bfloat16 (cuda default) or none")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads(N) and PORTSSM_NUM_THREADS=N in every mode "
                         "(0: each library's default)")
    ap.add_argument("--adamw", action="store_true", help="also time steps with AdamW")
    ap.add_argument("--decode-tokens", type=int, default=256)
    ap.add_argument("--no-decode", dest="decode_tokens", action="store_const", const=0)
    ap.add_argument("--saved-tensors", action="store_true")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="also profile STEPS training steps per mode and list the largest GPU "
                         "kernels (cpu: operators) of each, the modes side by side")
    ap.add_argument("--json", help="write every figure here")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 unless every mode agrees with the first: fp32 logits to 1e-4 "
                         "relative, loss and gradient norm to 1e-2 (autocast) or 1e-4, the "
                         "same greedy tokens (CI)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per mode")
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--weights", help=argparse.SUPPRESS)
    ap.add_argument("--scratch", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.autocast is None:
        args.autocast = "bfloat16" if args.device == "cuda" else "none"
    if args.mode:
        return run_mode(args)

    import torch

    models = ["mamba", "mamba2"] if args.model == "both" else [args.model]
    results = []
    for model in models:
        with tempfile.TemporaryDirectory() as scratch:
            torch.manual_seed(0)
            weights = os.path.join(scratch, "weights.pt")
            torch.save(build_model(model, args.size).state_dict(), weights)
            first = None
            for mode in args.modes.split(","):
                env = dict(os.environ, PYTHONUNBUFFERED="1")
                if mode != "portssm":
                    env["PORTSSM_NO_ALIAS"] = "1"
                if args.threads:
                    env["PORTSSM_NUM_THREADS"] = str(args.threads)
                cmd = [sys.executable, os.path.abspath(__file__), "--mode", mode,
                       "--weights", weights, "--scratch", scratch, "--model", model]
                for k in ("size", "device", "reference_path", "batch", "seqlen", "autocast",
                          "warmup", "steps", "decode_tokens", "threads"):
                    cmd += ["--" + k.replace("_", "-"), str(getattr(args, k))]
                cmd += ["--adamw"] if args.adamw else []
                cmd += ["--saved-tensors"] if args.saved_tensors else []
                cmd += ["--profile", str(args.profile)]
                print("== %s / %s" % (model, mode), flush=True)
                t_mode = time.perf_counter()
                try:
                    p = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                       timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    print("   timed out after %d s" % args.timeout)
                    continue
                line = [x for x in p.stdout.splitlines() if x.startswith("E2E-RESULT ")]
                if p.returncode != 0 or not line:
                    print("   failed (rc %d):\n%s" % (p.returncode, (p.stdout + p.stderr)[-3000:]))
                    results.append(dict(model=model, mode=mode, failed=True))
                    continue
                r = json.loads(line[-1][len("E2E-RESULT "):])
                r["wall_s"] = time.perf_counter() - t_mode
                if first is None:
                    first = mode
                    r["vs"] = None
                else:
                    r["vs"] = first
                    r["logits_rel"], r["tokens_equal"] = compare(scratch, first, mode)
                    f = next(x for x in results if x.get("mode") == first and x["model"] == model)
                    r["loss_rel"] = abs(r["loss"] - f["loss"]) / abs(f["loss"])
                    r["grad_norm_rel"] = abs(r["grad_norm"] - f["grad_norm"]) / f["grad_norm"]
                print("   " + r["kernels"], flush=True)
                results.append(r)
                # each mode's figures as soon as it ends (and in the JSON): a run cut at a
                # time limit keeps the modes that finished
                print("   train %s ms, peak %s GiB, first step %s s, %s s in all" % (
                    _fmt(r, "train_ms"), _fmt(r, "peak_gib", "%.2f"),
                    _fmt(r, "first_step_s", "%.2f"), _fmt(r, "wall_s", "%.0f")), flush=True)
                write_json(args, results)
    print_table(results, args)
    print_kernels([r for r in results if not r.get("failed")], top=25)
    write_json(args, results)
    bad = [r for r in results if r.get("failed")]
    if args.check:
        tol = 1e-2 if args.autocast != "none" else 1e-4
        bad += [r for r in results if not r.get("failed") and r["vs"] is not None and (
            r["logits_rel"] > 1e-4 or r["loss_rel"] > tol or r["grad_norm_rel"] > tol or
            r.get("tokens_equal") is False)]
    for r in bad:
        print("FAILED: %s / %s%s" % (r["model"], r["mode"],
                                     "" if r.get("failed") else " disagrees with " + r["vs"]))
    return 1 if bad else 0


def write_json(args, results):
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(args=vars(args), results=results), f, indent=1)


def _fmt(r, k, spec="%.1f"):
    return spec % r[k] if r.get(k) is not None else "-"


def print_table(results, args):
    fmt = _fmt

    print("\n%s size, batch %d x %d tokens, autocast %s, %s, threads %s\n"
          % (args.size, args.batch, args.seqlen, args.autocast, args.device,
             args.threads or "default"))
    print("| model | mode | train ms | fwd ms | +AdamW ms | tok/s | peak GiB | first step s | "
          "decode fp32 B1/B8 tok/s | decode bf16 B1/B8 | loss / grad / logits rel. | tokens |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for r in results:
        if r.get("failed"):
            print("| %s | %s | failed ||||||||||" % (r["model"], r["mode"]))
            continue
        agree = "(baseline)" if r["vs"] is None else "%.1e / %.1e / %.1e vs %s" % (
            r["loss_rel"], r["grad_norm_rel"], r["logits_rel"], r["vs"])
        tokens = "-" if r.get("tokens_equal") is None else (
            "same" if r["tokens_equal"] else "DIFFER")
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s | %s | %s |" % (
            r["model"], r["mode"], fmt(r, "train_ms"), fmt(r, "fwd_ms"), fmt(r, "train_adamw_ms"),
            fmt(r, "train_tok_s", "%.0f"), fmt(r, "peak_gib", "%.2f"),
            fmt(r, "first_step_s", "%.2f"), fmt(r, "decode_fp32_b1_tok_s", "%.0f"),
            fmt(r, "decode_fp32_b8_tok_s", "%.0f"), fmt(r, "decode_bf16_b1_tok_s", "%.0f"),
            fmt(r, "decode_bf16_b8_tok_s", "%.0f"), agree, tokens))
    for r in results:
        if r.get("saved_layer0"):
            total = sum(t["bytes"] for t in r["saved_layer0"])
            print("\n%s / %s: layer 0 saves %d tensors, %.1f MiB" % (
                r["model"], r["mode"], len(r["saved_layer0"]), total / 2 ** 20))
            for t in sorted(r["saved_layer0"], key=lambda t: -t["bytes"]):
                print("   %-24s %-9s %8.2f MiB" % (t["shape"], t["dtype"], t["bytes"] / 2 ** 20))


if __name__ == "__main__":
    sys.exit(main())
