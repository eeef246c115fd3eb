#!/usr/bin/env python3
"""portssm's mamba_chunk_scan_combined beside mamba-ssm's (Triton) in one run, from Python, at the
SSD shapes of shared/ANCHORS.md (z, D, dt_bias, dt_softplus): the outputs compared (out, final
states and, for fwd+bwd, every gradient, as ||a - b|| / ||b|| with the reference as b), then the
median time of each with CUDA events (forward and forward + backward, eager with the host
included, the two implementations timed in turn within every rep; the forward also as a
CUDA-graph replay, the GPU's time alone), and the reference's
first call (its Triton compile).
Without mamba-ssm on PYTHONPATH (see shared/anchors/README.md) portssm alone is timed.

    python3 bench/python_ssd_compare.py [--reps 20] [--shapes B4,L2048,H80 B4,L2048,H24]
"""

import argparse
import time

import torch


def inputs(batch, L, H, P=64, G=1, N=128, dtype=torch.bfloat16, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    r = lambda *s, lo=-1.0, hi=1.0: (torch.rand(*s, device="cuda", generator=g) * (hi - lo)
                                     + lo)
    return dict(x=r(batch, L, H, P).to(dtype), dt=r(batch, L, H, lo=-3.0, hi=0.0).to(dtype),
                A=-r(H, lo=0.5, hi=4.0), B=r(batch, L, G, N).to(dtype),
                C=r(batch, L, G, N).to(dtype), D=r(H), dt_bias=r(H, lo=-1.0, hi=0.0),
                z=r(batch, L, H, P).to(dtype))


def call(fn, a, grad_out=None):
    leaves = {k: v.detach().requires_grad_(grad_out is not None) for k, v in a.items()}
    out, final = fn(leaves["x"], leaves["dt"], leaves["A"], leaves["B"], leaves["C"], 256,
                    D=leaves["D"], z=leaves["z"], dt_bias=leaves["dt_bias"], dt_softplus=True,
                    return_final_states=True)
    if grad_out is None:
        return [out, final]
    (out * grad_out).sum().backward()
    return [out, final] + [leaves[k].grad for k in a]


def interleaved_ms(fns, reps):
    """{name: median ms of one call} of each of fns, timed in turn within every rep, so that a
    drift of the machine (its host or clocks: run 93 saw 20% between two passes) weighs on all
    of them alike."""
    for fn in fns.values():
        for _ in range(3):
            fn()
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times[name].append(s.elapsed_time(e))
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def median_ms(fn, reps):
    return interleaved_ms({"": fn}, reps)[""]


def graph_ms(fn, reps):
    """The median time of one replay of fn captured in a CUDA graph (after eager warm-up)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return median_ms(graph.replay, reps)


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--shapes", nargs="*", default=["B4,L2048,H80", "B4,L2048,H24",
                                                    "B1,L8192,H80"])
    args = ap.parse_args()
    import portssm.torch as pt

    impls = {"portssm": pt.mamba_chunk_scan_combined}
    try:
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined as ref
        impls["mamba-ssm"] = ref
    except Exception as exc:  # noqa: BLE001 - any import failure means: no reference here
        print("mamba-ssm not importable: %s" % exc)
    print("torch %s, %s; P64 N128 G1 bf16, dt_softplus, D, dt_bias, chunk 256; %d reps"
          % (torch.__version__, torch.cuda.get_device_name(), args.reps))
    names = ["out", "final"] + ["d" + k for k in ("x", "dt", "A", "B", "C", "D", "dt_bias", "z")]
    rows = []
    for spec in args.shapes:
        dims = {k[0]: int(k[1:]) for k in spec.split(",")}
        a = inputs(dims["B"], dims["L"], dims["H"])
        gout = torch.randn_like(a["x"])
        if "mamba-ssm" in impls:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            call(impls["mamba-ssm"], a, gout)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            got = call(impls["portssm"], a, gout)
            want = call(impls["mamba-ssm"], a, gout)
            errs = ", ".join("%s %.1e" % (n, rel(g, w)) for n, g, w in zip(names, got, want))
            print("%s: portssm vs mamba-ssm (first call of mamba-ssm %.1f s): %s"
                  % (spec, first, errs))
        fwd = interleaved_ms({name: (lambda fn=fn: call(fn, a)) for name, fn in impls.items()},
                             args.reps)
        both = interleaved_ms({name: (lambda fn=fn: call(fn, a, gout))
                               for name, fn in impls.items()}, args.reps)
        for name, fn in impls.items():
            with torch.no_grad():
                replay = graph_ms(lambda: call(fn, a), args.reps)
            rows.append((spec, name, replay * 1e3, fwd[name] * 1e3, both[name] * 1e3))
    print("\n| shape | impl | fwd us (graph) | fwd us (eager) | fwd+bwd us (eager) |"
          "\n|---|---|---:|---:|---:|")
    for spec, name, replay, fwd, both in rows:
        print("| %s | %s | %.1f | %.1f | %.1f |" % (spec, name, replay, fwd, both))


if __name__ == "__main__":
    main()
