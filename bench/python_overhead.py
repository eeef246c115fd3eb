#!/usr/bin/env python3
"""Host overhead of the decode ops from Python, eager, batch 1: 2000 back-to-back calls after a
warm-up, wall time per call with the host included (the GPU work of each is a few us, so the
figure is what the Python path costs).  portssm's drop-ins and, when importable, the references
(causal-conv1d's causal_conv1d_update, mamba-ssm's Triton selective_state_update; see
shared/anchors/README.md for how they are put on PYTHONPATH).  Prints a markdown table.

    python3 bench/python_overhead.py [--calls 2000] [--device cuda]
"""

import argparse
import time

import torch


def cases(device):
    bf16, f32 = torch.bfloat16, torch.float32

    def m1():
        D, N = 5120, 16
        return dict(state=torch.randn(1, D, N, device=device, dtype=f32),
                    x=torch.randn(1, D, device=device, dtype=bf16),
                    dt=torch.rand(1, D, device=device, dtype=bf16),
                    A=-torch.rand(D, N, device=device, dtype=f32),
                    B=torch.randn(1, N, device=device, dtype=bf16),
                    C=torch.randn(1, N, device=device, dtype=bf16),
                    D=torch.randn(D, device=device, dtype=f32),
                    z=torch.randn(1, D, device=device, dtype=bf16),
                    dt_bias=torch.randn(D, device=device, dtype=f32), dt_softplus=True)

    def m2():
        H, P, N, G = 80, 64, 128, 1
        return dict(state=torch.randn(1, H, P, N, device=device, dtype=f32),
                    x=torch.randn(1, H, P, device=device, dtype=bf16),
                    dt=torch.rand(1, H, device=device, dtype=bf16)[..., None].expand(-1, -1, P),
                    A=(-torch.rand(H, device=device, dtype=f32))[:, None, None].expand(-1, P, N),
                    B=torch.randn(1, G, N, device=device, dtype=bf16),
                    C=torch.randn(1, G, N, device=device, dtype=bf16),
                    D=torch.randn(H, device=device, dtype=f32)[:, None].expand(-1, P),
                    z=None,
                    dt_bias=torch.randn(H, device=device, dtype=f32)[:, None].expand(-1, P),
                    dt_softplus=True)

    def conv():
        D, W = 5120, 4
        return dict(x=torch.randn(1, D, device=device, dtype=bf16),
                    conv_state=torch.randn(1, D, W - 1, device=device, dtype=bf16),
                    weight=torch.randn(D, W, device=device, dtype=bf16),
                    bias=torch.randn(D, device=device, dtype=bf16), activation="silu")

    return [("selective_state_update", "Mamba-1 D5120 N16 bf16", m1),
            ("selective_state_update", "Mamba-2 H80 P64 N128 bf16", m2),
            ("causal_conv1d_update", "D5120 W4 bf16", conv)]


def implementations():
    import portssm.torch as pt

    impls = {"portssm": {"selective_state_update": pt.selective_state_update,
                         "causal_conv1d_update": pt.causal_conv1d_update}}
    ref = {}
    try:
        from causal_conv1d import causal_conv1d_update
        ref["causal_conv1d_update"] = causal_conv1d_update
    except Exception as exc:  # noqa: BLE001 - report and go on
        print("causal-conv1d not importable: %s" % exc)
    try:
        from mamba_ssm.ops.triton.selective_state_update import selective_state_update
        ref["selective_state_update"] = selective_state_update
    except Exception as exc:  # noqa: BLE001
        print("mamba-ssm not importable: %s" % exc)
    if ref:
        impls["reference"] = ref
    return impls


def time_calls(fn, kwargs, calls, device):
    for _ in range(50):  # warm-up (Triton compiles on its first call)
        fn(**kwargs)
    if device == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(**kwargs)
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    impls = implementations()
    print("torch %s, device %s%s, %d calls after 50 warm-up calls\n" % (
        torch.__version__, args.device,
        " (%s)" % torch.cuda.get_device_name() if args.device == "cuda" else "", args.calls))
    names = list(impls)
    print("| op | shape | " + " | ".join("%s us/call" % n for n in names) + " |")
    print("|---|---|" + "---|" * len(names))
    for op, label, make in cases(args.device):
        row = []
        for name in names:
            fn = impls[name].get(op)
            if fn is None:
                row.append("n/a")
                continue
            row.append("%.1f" % time_calls(fn, make(), args.calls, args.device))
        print("| %s | %s | %s |" % (op, label, " | ".join(row)))


if __name__ == "__main__":
    main()
