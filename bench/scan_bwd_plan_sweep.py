#!/usr/bin/env python3
"""Which plan of the selective scan's backward wins at which size: fwd+bwd through the Python
drop-in (portssm.torch.selective_scan_fn, autograd), timed by CUDA events, for several
batch x dim at L2048 N16 (the bench's options: variable B/C, D, z, delta_bias, softplus), with
the tuning knob PORTSSM_TUNE_SCAN_BWD_LANES_PER_SM set to each value given (needs a build with
PORTSSM_TUNING=ON; the library reads the knob at every plan, so one process visits them all).
The values alternate inside each round, so that clock drift falls on all of them alike; the
figure is the median over rounds of each round's median.

    python3 bench/scan_bwd_plan_sweep.py [--values 0,1000000] [--shapes 1x4096,2x4096,...]
                                         [--dtypes bf16,f32] [--rounds 5] [--reps 10]

A value of 0 never splits a channel's states (8 a lane); a huge one always does (4 a lane).
Prints a markdown table: one row per shape and dtype, one column per value (us, fwd+bwd).
"""

import argparse
import os
import statistics

import torch

from portssm.torch import selective_scan_fn

KNOB = "PORTSSM_TUNE_SCAN_BWD_LANES_PER_SM"


def make_inputs(batch, dim, seqlen, dstate, dtype):
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(batch * 7919 + dim)

    def rnd(*shape, dt=dtype, scale=1.0):
        return (torch.randn(*shape, device=dev, generator=g) * scale).to(dt).requires_grad_()

    u = rnd(batch, dim, seqlen)
    delta = rnd(batch, dim, seqlen, scale=0.5)
    A = (-torch.rand(dim, dstate, device=dev, generator=g) - 0.5).requires_grad_()
    B = rnd(batch, dstate, seqlen)
    C = rnd(batch, dstate, seqlen)
    D = torch.randn(dim, device=dev, generator=g).requires_grad_()
    z = rnd(batch, dim, seqlen)
    bias = (torch.randn(dim, device=dev, generator=g) * 0.1).requires_grad_()
    dout = torch.randn(batch, dim, seqlen, device=dev, generator=g).to(dtype)
    return (u, delta, A, B, C, D, z, bias), dout


def fwd_bwd(args, dout):
    u, delta, A, B, C, D, z, bias = args
    out = selective_scan_fn(u, delta, A, B, C, D, z, bias, delta_softplus=True)
    out.backward(dout)


def time_once(args, dout, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        fwd_bwd(args, dout)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--values", default="0,1000000")
    ap.add_argument("--shapes", default="1x1536,1x4096,2x4096,4x2048,4x4096,8x4096")
    ap.add_argument("--dtypes", default="bf16,f32")
    ap.add_argument("--seqlen", type=int, default=2048)
    ap.add_argument("--dstate", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("scan_bwd_plan_sweep: needs a CUDA device")
    values = a.values.split(",")
    dtypes = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
    print(f"device: {torch.cuda.get_device_name()}, "
          f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs; "
          f"fwd+bwd us, L{a.seqlen} N{a.dstate}, median of {a.rounds} rounds x {a.reps}")
    print("| B x D | dtype | " + " | ".join(f"{KNOB[13:]}={v}" for v in values) + " |")
    print("|---|---|" + "---:|" * len(values))
    for shape in a.shapes.split(","):
        batch, dim = (int(s) for s in shape.split("x"))
        for dname in a.dtypes.split(","):
            args, dout = make_inputs(batch, dim, a.seqlen, a.dstate, dtypes[dname])
            per_value = {v: [] for v in values}
            for _ in range(a.rounds):
                for v in values:
                    os.environ[KNOB] = v
                    fwd_bwd(args, dout)  # warm-up under this plan
                    per_value[v].append(time_once(args, dout, a.reps))
            cells = " | ".join(f"{statistics.median(per_value[v]):.1f}" for v in values)
            print(f"| {batch} x {dim} | {dname} | {cells} |", flush=True)
            del args, dout
    os.environ.pop(KNOB, None)


if __name__ == "__main__":
    main()
