#!/usr/bin/env python3
"""Host overhead of the decode ops from Python, eager, batch 1: 2000 back-to-back calls after a
warm-up, wall time per call with the host included (the GPU work of each is a few us, so the
figure is what the Python path costs); the best of --repeats such runs.  portssm's drop-ins on
each of their host paths and, when importable, the references (causal-conv1d's
causal_conv1d_update, mamba-ssm's Triton selective_state_update; see shared/anchors/README.md for
how they are put on PYTHONPATH).  Prints a markdown table.

    python3 bench/python_overhead.py [--device cpu|cuda] [--shapes bench|tiny]
                                     [--calls 2000] [--repeats 5]

portssm's paths (rows; those this installation lacks are left out):
  default      what a plain call takes (the first of the next three that is there)
  C+DLPack     the compiled module portssm._fastcall, tensors read through DLPack's C exchange
               API (torch >= 2.10)
  C getters    the compiled module, tensors read through data_ptr()/shape/stride()/... getters
  Python       the pure-Python packing (what PORTSSM_NO_EXTENSION=1 gives)
Columns: "op" calls the real op; "host only" replaces the op by a C function that does nothing
(libc's pthread_equal), which leaves the host side alone (for the decode ops on cpu, where the op
itself is not a few us, that is the column to read).

--shapes bench: Mamba-1 D5120 N16, Mamba-2 H80 P64 N128, conv D5120 W4, bf16 (the default on
cuda); tiny: the same forms at D8 / H2 P4 N8 (the default on cpu, where the op's own work at
the bench shapes would hide the host's).
"""

import argparse
import ctypes
import sys
import time

import torch


def _decode_cases(device, D, N, H, P, N2, Dc):
    bf16, f32 = torch.bfloat16, torch.float32

    def m1():
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
        G = 1
        return dict(state=torch.randn(1, H, P, N2, device=device, dtype=f32),
                    x=torch.randn(1, H, P, device=device, dtype=bf16),
                    dt=torch.rand(1, H, device=device, dtype=bf16)[..., None].expand(-1, -1, P),
                    A=(-torch.rand(H, device=device, dtype=f32))[:, None, None].expand(-1, P, N2),
                    B=torch.randn(1, G, N2, device=device, dtype=bf16),
                    C=torch.randn(1, G, N2, device=device, dtype=bf16),
                    D=torch.randn(H, device=device, dtype=f32)[:, None].expand(-1, P),
                    z=None,
                    dt_bias=torch.randn(H, device=device, dtype=f32)[:, None].expand(-1, P),
                    dt_softplus=True)

    def conv():
        W = 4
        return dict(x=torch.randn(1, Dc, device=device, dtype=bf16),
                    conv_state=torch.randn(1, Dc, W - 1, device=device, dtype=bf16),
                    weight=torch.randn(Dc, W, device=device, dtype=bf16),
                    bias=torch.randn(Dc, device=device, dtype=bf16), activation="silu")

    return [("selective_state_update", "Mamba-1 D%d N%d bf16" % (D, N), m1),
            ("selective_state_update", "Mamba-2 H%d P%d N%d bf16" % (H, P, N2), m2),
            ("causal_conv1d_update", "D%d W4 bf16" % Dc, conv)]


def cases(device, shapes="bench"):
    if shapes == "tiny":
        return _decode_cases(device, D=8, N=16, H=2, P=4, N2=8, Dc=8)
    return _decode_cases(device, D=5120, N=16, H=80, P=64, N2=128, Dc=5120)


def references():
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
    return ref


def time_calls(fn, kwargs, calls, device, repeats=1):
    for _ in range(50):  # warm-up (Triton compiles on its first call)
        fn(**kwargs)
    best = float("inf")
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(**kwargs)
        if device == "cuda":
            torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    return best


def no_op_address():
    fn = ctypes.CDLL(None).pthread_equal
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p]
    assert fn(1, 2) == 0  # two different "threads": returns 0, PORTSSM_OK
    return ctypes.cast(fn, ctypes.c_void_p).value


def portssm_paths():
    """[(label, set-up function)]: each puts the decode plans on one host path; the default
    first."""
    from portssm import _call
    from portssm.torch import _runtime

    default_api = _runtime.EXCHANGE_API

    def on(path, api):
        def setup(address):
            _runtime.use_exchange_api(api)
            _runtime.bind_all(address, path)
        return setup

    paths = [("default", on(None, default_api))]
    if _call.FASTCALL is not None:
        if _runtime.use_exchange_api(True):
            paths.append(("C+DLPack", on("fast", True)))
        paths.append(("C getters", on("fast", False)))
    paths.append(("Python", on("python", False)))
    _runtime.use_exchange_api(default_api)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", choices=("bench", "tiny"), default=None)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    shapes = args.shapes or ("tiny" if args.device == "cpu" else "bench")

    import portssm.torch as pt
    from portssm import _call
    from portssm.torch import _runtime

    fns = {"selective_state_update": pt.selective_state_update,
           "causal_conv1d_update": pt.causal_conv1d_update}
    ref = references()
    paths = portssm_paths()
    print("torch %s, Python %s, device %s%s" % (
        torch.__version__, sys.version.split()[0], args.device,
        " (%s)" % torch.cuda.get_device_name() if args.device == "cuda" else ""))
    print("portssm %s; portssm._fastcall %s; DLPack C exchange API %s" % (
        _call.library_path(), _call.FASTCALL_STATUS,
        "in use" if _runtime.EXCHANGE_API else "not in use"))
    print("%d calls after 50 warm-up calls, best of %d; us per call\n" % (args.calls,
                                                                        args.repeats))
    print("| op | shape | path | op us/call | host only us/call |")
    print("|---|---|---|---|---|")
    stub = no_op_address()
    try:
        for op, label, make in cases(args.device, shapes):
            for name, setup in paths:
                row = []
                for address in (None, stub):
                    setup(address)
                    row.append("%.1f" % time_calls(fns[op], make(), args.calls, args.device,
                                                   args.repeats))
                print("| %s | %s | portssm %s | %s |" % (op, label, name, " | ".join(row)))
            if op in ref:
                us = time_calls(ref[op], make(), args.calls, args.device, args.repeats)
                print("| %s | %s | reference | %.1f | n/a |" % (op, label, us))
    finally:
        paths[0][1](None)


if __name__ == "__main__":
    main()
