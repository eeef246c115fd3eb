#!/usr/bin/env python3
"""portssm beside the reference packages (causal-conv1d 1.7.0, mamba-ssm 2.3.2.post1) in one
device run, at the shapes and options of portssm_bench: portssm's times are read from the JSON
that `portssm_bench --backend cuda --graph --json FILE` wrote on the same machine; each row whose
op has a reference is timed now the same way from Python, and the reference's outputs are
compared with portssm's drop-ins (portssm.torch) on the same inputs.  Writes a markdown table
(stdout, and --out-md) and the same as JSON (--out-json).

    python3 bench/side_by_side.py --bench-json bench_graph.json [--out-md FILE] [--out-json FILE]
                                  [--reps 100] [--rotate-mb MB] [--filter SUBSTR]

Needs the references on PYTHONPATH (shared/anchors/README.md) and, for the output check,
portssm.torch (PYTHONPATH=python/src PORTSSM_LIBRARY_DIR=<build>/src).  Without torch, a CUDA
device or the references, the table is written from the JSON alone with the reference columns
empty and a header line that says why; a row that fails (out of memory, a capture error, an op
or option the script does not map) says so in its note and the others go on.  SIGTERM (a device
run's `timeout`) ends the timing: the table of the rows measured is written, the others noted.

Method, that of portssm_bench --graph (tools/bench/bench_run.c):
  - K input sets holding the same values at distinct addresses (the addresses defeat the cache),
    K = ceil(rotate bytes / bytes of one set: its inputs and the outputs of one call), at least 2
    and at most 64, fewer where K sets would take more than 40% of the GPU's memory; the rotate
    bytes default to 4 x the device's L2 (--rotate-mb);
  - the first call alone, timed from the host (the Triton ops compile and autotune there: the
    "first call s" column; a kernel an earlier row compiled is not compiled again);
  - one call per set eagerly on a side stream, then one CUDA graph whose body is one call per set
    (each call's outputs kept, so that each writes memory of its own, as the bench's sets do),
    replayed --reps times with CUDA events around each replay: the median replay / K is the time
    per call.  Where capture fails the row is timed eagerly (K calls between two events) and its
    note says so.
  - fwd+bwd rows: the forward, then torch.autograd.grad of the output with the set's dout as the
    output gradient (the backward of sum(out * dout)), for every input the reference's backward
    differentiates;
  - the update ops' states (conv_state, the SSM state) are updated in place by every call, and are
    left to evolve over the replays rather than restored: they stay finite (the conv state holds
    the last inputs; the SSM state decays by exp(A dt) with A < 0 and dt > 0 and gains bounded
    terms), and restoring them would add a copy to the time;
  - output check, on one set: the reference and portssm's drop-in on the same inputs (each side
    on its own clone of the states), ||portssm - reference|| / ||reference|| of the output, the
    updated state and each gradient.

Inputs are drawn as tools/common/opcase.c draws them (same ranges and dtypes; not the same
numbers).
"""

import argparse
import gc
import json
import math
import platform
import signal
import sys
import time
from types import SimpleNamespace

try:
    import torch
except ImportError as _exc:  # the table from the JSON alone
    torch = None
    NO_TORCH = "torch is not importable (%s)" % str(_exc).splitlines()[0]
else:
    NO_TORCH = None

SEED = 1
DEVICE = "cuda"      # the inputs' device (the references run on CUDA only)
CHUNK = 256          # portssm_bench's SSD chunk size (opcase.c)
MEM_FRACTION = 0.4   # of the GPU's memory the sets may take, as portssm_bench's budget
DTYPES = {"bf16": "bfloat16", "f16": "float16", "f32": "float32"}
REF_FUNCTIONS = ("causal_conv1d_fn", "causal_conv1d_update", "selective_scan_fn",
                 "selective_state_update", "mamba_chunk_scan_combined")

# op of the bench JSON -> (case kind, forward + backward?); ops absent here have no reference
# call (the backward alone: the references run it only after their own forward)
OPS = {
    "causal_conv1d_fwd": ("conv", False),
    "causal_conv1d_fwd+bwd": ("conv", True),
    "causal_conv1d_update": ("conv_update", False),
    "selective_scan_fwd": ("scan", False),
    "selective_scan_fwd+bwd": ("scan", True),
    "selective_state_update": ("state_update", False),
    "ssd_chunk_scan_fwd": ("ssd", False),
    "ssd_chunk_scan_fwd+bwd": ("ssd", True),
}
# the option words of the JSON (opcase.c's pssm_opcase_options) each kind maps to its call
MAPPED_OPTIONS = {
    "conv": {"bias", "silu", "weight-f32", "channel-last"},
    "conv_update": {"bias", "silu", "weight-f32"},
    "scan": {"var-BC", "D", "z", "delta_bias", "softplus"},
    "state_update": {"D", "z", "dt_bias", "dt_softplus", "heads", "tied"},
    "ssd": {"D", "z", "dt_bias", "dt_softplus", "D-per-head"},
}


# ---------------------------------------------------------------- the bench JSON

def row_key(row):
    """What --filter matches, as portssm_bench's --filter: "op dtype shape"."""
    return "%s %s %s" % (row["op"], row["dtype"], row["shape"])


def mapping_problem(row):
    """None when the row maps onto a reference call, else why not (needs no torch)."""
    if row["op"] not in OPS:
        return "no reference call for %s" % row["op"]
    kind, _ = OPS[row["op"]]
    extra = set(row.get("options", "").split()) - MAPPED_OPTIONS[kind]
    if extra:
        return "not mapped: option(s) %s" % " ".join(sorted(extra))
    if row["dtype"] not in DTYPES:
        return "not mapped: dtype %s" % row["dtype"]
    return None


# ---------------------------------------------------------------- the two sides

def open_references():
    """(functions, versions, None) or (None, {}, why the reference columns stay empty)."""
    if torch is None:
        return None, {}, NO_TORCH
    if not torch.cuda.is_available():
        return None, {}, "no CUDA device visible to torch %s" % torch.__version__
    try:  # torch first, then the extensions (as the packages themselves do)
        from causal_conv1d import causal_conv1d_fn, causal_conv1d_update
        from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
        from mamba_ssm.ops.triton.selective_state_update import selective_state_update
        from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    except Exception as exc:  # noqa: BLE001 - any import failure means: no reference here
        return None, {}, ("the reference packages are not importable (%s); see "
                          "shared/anchors/README.md" % short(exc))
    fns = SimpleNamespace(causal_conv1d_fn=causal_conv1d_fn,
                          causal_conv1d_update=causal_conv1d_update,
                          selective_scan_fn=selective_scan_fn,
                          selective_state_update=selective_state_update,
                          mamba_chunk_scan_combined=mamba_chunk_scan_combined)
    return fns, package_versions(("causal_conv1d", "mamba_ssm", "triton")), None


def package_versions(names):
    from importlib import metadata
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "?"
    return out


def open_portssm():
    """(portssm.torch's drop-ins, None) or (None, why the error column stays empty)."""
    try:
        import portssm.torch as pt
    except Exception as exc:  # noqa: BLE001 - report and go on without the output check
        return None, "portssm.torch is not importable (%s)" % short(exc)
    return SimpleNamespace(**{name: getattr(pt, name) for name in REF_FUNCTIONS}), None


# ---------------------------------------------------------------- one case per reference op

class Case:
    """One reference call at one bench row.

    make(gen) -> dict of the tensors of one input set (same generator state, same values);
    call(fns, t) -> the op's output, fns being the reference's or portssm's functions;
    grads: the inputs a fwd+bwd row differentiates (output gradient t["dout"]);
    mutated: the inputs the op updates in place."""

    def __init__(self, make, call, grads=(), mutated=()):
        self.make, self.call, self.grads, self.mutated = make, call, tuple(grads), tuple(mutated)


def uniform(gen, shape, lo, hi, dtype):
    t = torch.rand(shape, device=DEVICE, generator=gen, dtype=torch.float32)
    return (t * (hi - lo) + lo).to(dtype)


def dt_range(opts, softplus_word):
    """opcase.c's DT_LO/DT_HI: with softplus, dt + bias spans about (-4, 0.5)."""
    return (-2.0, 1.0) if softplus_word in opts else (0.01, 0.6)


def dt_bias_range(opts, softplus_word):
    """opcase.c's DTB_LO/DTB_HI."""
    return (-2.0, -0.5) if softplus_word in opts else (0.0, 0.1)


def grads_of(names, bwd, present):
    return [n for n in names if n in present] if bwd else []


def conv_case(d, opts, dtype, bwd):
    """causal_conv1d_fn(x (B,D,L), weight (D,W), bias (D), activation): the bench's weight and
    bias have x's dtype unless weight-f32."""
    B, D, L, W = d["B"], d["D"], d["L"], d["W"]
    wdt = torch.float32 if "weight-f32" in opts else dtype

    def act(gen):  # (B, D, L), stride 1 along D when channel-last (as the bench's tensors)
        if "channel-last" in opts:
            return uniform(gen, (B, L, D), -1, 1, dtype).transpose(1, 2)
        return uniform(gen, (B, D, L), -1, 1, dtype)

    def make(gen):
        t = {"x": act(gen), "weight": uniform(gen, (D, W), -0.5, 0.5, wdt)}
        if "bias" in opts:
            t["bias"] = uniform(gen, (D,), -0.5, 0.5, wdt)
        if bwd:
            t["dout"] = act(gen)
        return t

    def call(fns, t):
        return fns.causal_conv1d_fn(t["x"], t["weight"], t.get("bias"),
                                    activation="silu" if "silu" in opts else None)

    present = {"x", "weight"} | ({"bias"} if "bias" in opts else set())
    return Case(make, call, grads_of(("x", "weight", "bias"), bwd, present))


def conv_update_case(d, opts, dtype, _bwd=False):
    """causal_conv1d_update(x (B,D) or (B,D,T), conv_state (B,D,S), weight, bias, activation);
    S = W - 1 unless the row names it."""
    B, D, W = d["B"], d["D"], d["W"]
    T, S = d.get("T", 1), d.get("S", W - 1)
    wdt = torch.float32 if "weight-f32" in opts else dtype
    xshape = (B, D) if T == 1 else (B, D, T)

    def make(gen):
        t = {"x": uniform(gen, xshape, -1, 1, dtype),
             "conv_state": uniform(gen, (B, D, S), -1, 1, dtype),
             "weight": uniform(gen, (D, W), -0.5, 0.5, wdt)}
        if "bias" in opts:
            t["bias"] = uniform(gen, (D,), -0.5, 0.5, wdt)
        return t

    def call(fns, t):
        return fns.causal_conv1d_update(t["x"], t["conv_state"], t["weight"], t.get("bias"),
                                        activation="silu" if "silu" in opts else None)

    return Case(make, call, mutated=("conv_state",))


def scan_case(d, opts, dtype, bwd):
    """selective_scan_fn(u, delta (B,D,L), A (D,N) f32, B, C: (B,G,N,L) with var-BC else (D,N)
    f32, D (D) f32, z (B,D,L), delta_bias (D) f32, delta_softplus)."""
    B, D, L, N, G = d["B"], d["D"], d["L"], d["N"], d.get("G", 1)
    f32, var = torch.float32, "var-BC" in opts

    def make(gen):
        t = {"u": uniform(gen, (B, D, L), -1, 1, dtype),
             "delta": uniform(gen, (B, D, L), *dt_range(opts, "softplus"), dtype),
             "A": uniform(gen, (D, N), -4, -0.5, f32)}
        for name in ("B", "C"):
            t[name] = (uniform(gen, (B, G, N, L), -1, 1, dtype) if var
                       else uniform(gen, (D, N), -1, 1, f32))
        if "D" in opts:
            t["D"] = uniform(gen, (D,), -1, 1, f32)
        if "z" in opts:
            t["z"] = uniform(gen, (B, D, L), -1, 1, dtype)
        if "delta_bias" in opts:
            t["delta_bias"] = uniform(gen, (D,), *dt_bias_range(opts, "softplus"), f32)
        if bwd:
            t["dout"] = uniform(gen, (B, D, L), -1, 1, dtype)
        return t

    def call(fns, t):
        return fns.selective_scan_fn(t["u"], t["delta"], t["A"], t["B"], t["C"], D=t.get("D"),
                                     z=t.get("z"), delta_bias=t.get("delta_bias"),
                                     delta_softplus="softplus" in opts)

    present = {"u", "delta", "A", "B", "C"} | (opts & {"D", "z", "delta_bias"})
    return Case(make, call,
                grads_of(("u", "delta", "A", "B", "C", "D", "z", "delta_bias"), bwd, present))


def state_update_mamba1_case(d, opts, dtype):
    """selective_state_update(state (B,D,N) f32, x, dt (B,D), A (D,N) f32, B, C (B,N), D (D),
    z (B,D), dt_bias (D), dt_softplus)."""
    B, D, N, f32 = d["B"], d["D"], d["N"], torch.float32

    def make(gen):
        t = {"state": uniform(gen, (B, D, N), -1, 1, f32),
             "x": uniform(gen, (B, D), -1, 1, dtype),
             "dt": uniform(gen, (B, D), *dt_range(opts, "dt_softplus"), dtype),
             "A": uniform(gen, (D, N), -4, -0.5, f32),
             "B": uniform(gen, (B, N), -1, 1, dtype),
             "C": uniform(gen, (B, N), -1, 1, dtype)}
        if "D" in opts:
            t["D"] = uniform(gen, (D,), -1, 1, f32)
        if "z" in opts:
            t["z"] = uniform(gen, (B, D), -1, 1, dtype)
        if "dt_bias" in opts:
            t["dt_bias"] = uniform(gen, (D,), *dt_bias_range(opts, "dt_softplus"), f32)
        return t

    return Case(make, state_update_call(opts), mutated=("state",))


def state_update_heads_case(d, opts, dtype):
    """selective_state_update in the heads form: state (B,H,P,N) f32, x, dt, z (B,H,P), A (H,P,N),
    B, C (B,G,N), D and dt_bias (H,P).  tied: dt, A, D and dt_bias hold one value per head
    (per batch row and head for dt), expanded with stride 0 over P (and N), as Mamba-2's step."""
    B, H, P, N, G = d["B"], d["H"], d["P"], d["N"], d.get("G", 1)
    f32, tied = torch.float32, "tied" in opts

    def per_head(gen, lo, hi, dt_, lead=(), tail=()):
        """lead + (H, P) + tail values: when tied, lead + (H,) of them expanded over P and tail."""
        if not tied:
            return uniform(gen, lead + (H, P) + tail, lo, hi, dt_)
        base = uniform(gen, lead + (H,), lo, hi, dt_)
        return base[(...,) + (None,) * (1 + len(tail))].expand(lead + (H, P) + tail)

    def make(gen):
        t = {"state": uniform(gen, (B, H, P, N), -1, 1, f32),
             "x": uniform(gen, (B, H, P), -1, 1, dtype),
             "dt": per_head(gen, *dt_range(opts, "dt_softplus"), dtype, lead=(B,)),
             "A": per_head(gen, -4, -0.5, f32, tail=(N,)),
             "B": uniform(gen, (B, G, N), -1, 1, dtype),
             "C": uniform(gen, (B, G, N), -1, 1, dtype)}
        if "D" in opts:
            t["D"] = per_head(gen, -1, 1, f32)
        if "z" in opts:
            t["z"] = uniform(gen, (B, H, P), -1, 1, dtype)
        if "dt_bias" in opts:
            t["dt_bias"] = per_head(gen, *dt_bias_range(opts, "dt_softplus"), f32)
        return t

    return Case(make, state_update_call(opts), mutated=("state",))


def state_update_call(opts):
    def call(fns, t):
        return fns.selective_state_update(t["state"], t["x"], t["dt"], t["A"], t["B"], t["C"],
                                          D=t.get("D"), z=t.get("z"), dt_bias=t.get("dt_bias"),
                                          dt_softplus="dt_softplus" in opts)
    return call


def ssd_case(d, opts, dtype, bwd):
    """mamba_chunk_scan_combined(x (B,L,H,P), dt (B,L,H), A (H) f32, B, C (B,L,G,N), chunk 256,
    D: (H) with D-per-head else (H,P), f32; z (B,L,H,P); dt_bias (H) f32; dt_softplus).  dt has
    x's dtype, as in the bench."""
    B, L, H, P, N, G = d["B"], d["L"], d["H"], d["P"], d["N"], d.get("G", 1)
    f32 = torch.float32

    def make(gen):
        t = {"x": uniform(gen, (B, L, H, P), -1, 1, dtype),
             "dt": uniform(gen, (B, L, H), *dt_range(opts, "dt_softplus"), dtype),
             "A": uniform(gen, (H,), -4, -0.5, f32),
             "B": uniform(gen, (B, L, G, N), -1, 1, dtype),
             "C": uniform(gen, (B, L, G, N), -1, 1, dtype)}
        if "D" in opts:
            t["D"] = uniform(gen, (H,) if "D-per-head" in opts else (H, P), -1, 1, f32)
        if "z" in opts:
            t["z"] = uniform(gen, (B, L, H, P), -1, 1, dtype)
        if "dt_bias" in opts:
            t["dt_bias"] = uniform(gen, (H,), *dt_bias_range(opts, "dt_softplus"), f32)
        if bwd:
            t["dout"] = uniform(gen, (B, L, H, P), -1, 1, dtype)
        return t

    def call(fns, t):
        return fns.mamba_chunk_scan_combined(t["x"], t["dt"], t["A"], t["B"], t["C"], CHUNK,
                                             D=t.get("D"), z=t.get("z"),
                                             dt_bias=t.get("dt_bias"),
                                             dt_softplus="dt_softplus" in opts)

    present = {"x", "dt", "A", "B", "C"} | (opts & {"D", "z", "dt_bias"})
    return Case(make, call,
                grads_of(("x", "dt", "A", "B", "C", "D", "z", "dt_bias"), bwd, present))


def build_case(row):
    """The Case of a row that mapping_problem() accepted."""
    kind, bwd = OPS[row["op"]]
    opts = set(row.get("options", "").split())
    dtype = getattr(torch, DTYPES[row["dtype"]])
    d = row["dims"]
    if kind == "state_update":
        if "heads" in opts:
            return state_update_heads_case(d, opts, dtype)
        return state_update_mamba1_case(d, opts, dtype)
    builder = {"conv": conv_case, "conv_update": conv_update_case, "scan": scan_case,
               "ssd": ssd_case}[kind]
    return builder(d, opts, dtype, bwd)


# ---------------------------------------------------------------- running and timing

def run_once(case, fns, t):
    """One call (fwd+bwd rows: forward then backward); returns every tensor it produced."""
    if not case.grads:
        with torch.no_grad():
            return [case.call(fns, t)]
    out = case.call(fns, t)
    return [out] + list(torch.autograd.grad(out, [t[k] for k in case.grads], t["dout"]))


def make_set(case, gen):
    t = case.make(gen.manual_seed(SEED))
    for name in case.grads:
        t[name].requires_grad_()
    return t


def storage_bytes(tensors):
    """Bytes of the distinct storages behind the tensors (an expanded tensor counts once)."""
    seen = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


def count_sets(per_set, rotate_bytes):
    """(input sets the rotation wants, sets the memory budget allows)."""
    want = min(64, max(2, math.ceil(rotate_bytes / per_set)))
    budget = MEM_FRACTION * torch.cuda.get_device_properties(0).total_memory
    return want, int(budget // per_set)


def median(values):
    v, n = sorted(values), len(values)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def sample_us(launch, reps, calls):
    """Median over reps of the device time between events around launch(), per call."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(reps)]
    for start, end in events:
        start.record()
        launch()
        end.record()
    torch.cuda.synchronize()
    return median([1e3 * s.elapsed_time(e) / calls for s, e in events])


def graph_us(case, fns, sets, reps):
    """One CUDA graph of one call per set (after a warm-up on a side stream), replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for t in sets:
            run_once(case, fns, t)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        kept = [run_once(case, fns, t) for t in sets]  # each call's outputs: memory of its own
    # the update ops' states are not restored: they evolve from replay to replay, and stay
    # finite (conv: the last inputs; SSM: decayed by exp(A dt) < 1 plus bounded terms)
    for _ in range(3):
        graph.replay()
    us = sample_us(graph.replay, reps, len(sets))
    del kept, graph
    return us


def eager_us(case, fns, sets, reps):
    def launch():
        for t in sets:
            run_once(case, fns, t)
    launch()
    return sample_us(launch, reps, len(sets))


def rel_err(a, b):
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def named_results(case, fns, t):
    """name -> tensor: the output, each gradient, the updated states (each side on its own
    clone of the states)."""
    own = {k: v.clone() if k in case.mutated else v for k, v in t.items()}
    produced = run_once(case, fns, own)
    out = dict(zip(["out"] + ["d" + k for k in case.grads], produced))
    out.update({k: own[k] for k in case.mutated})
    return out


def compare(case, ref, pssm, t):
    want = named_results(case, ref, t)
    got = named_results(case, pssm, t)
    return {k: rel_err(got[k], want[k]) for k in want}


def free_memory():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def short(exc):
    text = str(exc).strip().splitlines()
    return "%s: %s" % (type(exc).__name__, text[0][:160] if text else "")


def measure(entry, row, ref, pssm, pssm_why, reps, rotate_bytes):
    """Fills entry's reference columns for one row; errors go to its note."""
    notes = []
    case = build_case(row)
    gen = torch.Generator(device=DEVICE)
    sets = [make_set(case, gen)]
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    produced = run_once(case, ref, sets[0])
    torch.cuda.synchronize()
    entry["ref_first_call_s"] = time.perf_counter() - t0
    per_set = storage_bytes(list(sets[0].values()) + produced)
    del produced
    want, fit = count_sets(per_set, rotate_bytes)
    try:
        while len(sets) < min(want, fit):
            sets.append(make_set(case, gen))
    except torch.cuda.OutOfMemoryError:
        free_memory()
    if len(sets) < want:  # as portssm_bench: rotate over fewer sets
        notes.append("%d input set%s, not %d (memory)"
                     % (len(sets), "" if len(sets) == 1 else "s", want))
    entry["sets"] = len(sets)
    try:
        entry["ref_us"] = graph_us(case, ref, sets, reps)
        entry["timing"] = "graph"
    except Exception as exc:  # noqa: BLE001 - capture failed: eager timing, said in the note
        free_memory()
        entry["ref_us"] = eager_us(case, ref, sets, reps)
        entry["timing"] = "eager"
        notes.append("eager timing (graph capture failed: %s)" % short(exc))
    if pssm is None:
        notes.append("no output check: %s" % pssm_why)
    else:
        try:
            entry["rel_err"] = compare(case, ref, pssm, sets[0])
        except Exception as exc:  # noqa: BLE001 - the timing stands; the check failed
            notes.append("output check failed: %s" % short(exc))
    entry["note"] = "; ".join(notes)


# ---------------------------------------------------------------- the table

def base_entry(row):
    """A table row from the JSON alone."""
    med, exp_us = row.get("median_us"), row.get("exp_bound_us")
    pct_exp = (100.0 * exp_us / med if row["op"].startswith("selective_scan") and exp_us and med
               else None)
    return {"op": row["op"], "dtype": row["dtype"], "shape": row["shape"],
            "options": row.get("options", ""), "portssm_status": row.get("status"),
            "portssm_us": med, "pct_copy": row.get("pct_copy"), "pct_exp_floor": pct_exp,
            "anchors_ref_us": row.get("ref_us"), "ref_us": None, "ratio": None,
            "ref_first_call_s": None, "sets": None, "timing": None, "rel_err": None,
            "note": mapping_problem(row) or ""}


def fmt(v, spec):
    return "" if v is None else spec % v


def portssm_cell(e):
    if e["portssm_us"] is not None:
        return "%.2f" % e["portssm_us"]
    return e["portssm_status"] or ""


def err_cell(errs):
    if not errs:
        return ""
    return ", ".join("%s %.1e" % (k, v) for k, v in errs.items())


def markdown(header, entries):
    lines = ["## portssm beside causal-conv1d / mamba-ssm", ""] + ["- " + h for h in header]
    lines += ["", "| op | dtype | shape | portssm µs | reference µs | ratio (ref / portssm) "
              "| portssm % copy | portssm % exp floor | reference first call s "
              "| rel. error vs reference | note |",
              "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for e in entries:
        cells = [e["op"], e["dtype"], e["shape"], portssm_cell(e), fmt(e["ref_us"], "%.2f"),
                 fmt(e["ratio"], "%.2f"), fmt(e["pct_copy"], "%.1f"),
                 fmt(e["pct_exp_floor"], "%.1f"), fmt(e["ref_first_call_s"], "%.3g"),
                 err_cell(e["rel_err"]), e["note"].replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "options (both sides):"]
    seen = set()
    for e in entries:
        if (e["op"], e["options"]) not in seen:
            seen.add((e["op"], e["options"]))
            lines.append("- %s: %s" % (e["op"], e["options"] or "none"))
    return "\n".join(lines) + "\n"


def torch_version():
    if torch is None:
        return "(none)"
    git = (getattr(torch.version, "git_version", None) or "?")[:7]
    cuda = " CUDA %s" % torch.version.cuda if torch.version.cuda else ""
    return "%s (git %s)%s" % (torch.__version__, git, cuda)


def header_lines(bench, versions, why, pssm_why, rotate_bytes, reps):
    dev = bench.get("device", "?")
    if why is None:
        dev = "%s (torch sees %s, %d SMs)" % (dev, torch.cuda.get_device_name(),
                                              torch.cuda.get_device_properties(0)
                                              .multi_processor_count)
    lines = ["device: %s, %s" % (dev, bench.get("arch", "?")),
             "portssm %s: `%s` (%s); copy bandwidth of that run %s GB/s"
             % (bench.get("portssm_version", "?"), bench.get("command", "?"),
                bench.get("timing", "?"), fmt(bench.get("copy_gbps"), "%.0f") or "?"),
             "Python %s, torch %s" % (platform.python_version(), torch_version())]
    if why is not None:
        lines.append("reference columns empty: %s" % why)
        return lines
    lines.append("references: causal-conv1d %s, mamba-ssm %s, Triton %s"
                 % (versions["causal_conv1d"], versions["mamba_ssm"], versions["triton"]))
    lines.append("reference timing: CUDA-graph replay of one call per input set, K sets "
                 "rotated (K = ceil(%.0f MB / one set), 2..64), median of %d replays / K; "
                 "fwd+bwd = forward + autograd backward with dout; update ops' states evolve "
                 "over the replays" % (rotate_bytes / 1e6, reps))
    lines.append("first call: the reference's first eager call of the row, host-timed "
                 "(Triton compile + autotune; kernels an earlier row compiled not again)")
    lines.append("rel. error: ||portssm - reference|| / ||reference|| on one input set, per "
                 "output / updated state / gradient"
                 + ("" if pssm_why is None else " (not checked: %s)" % pssm_why))
    return lines


def default_rotate_bytes(have_cuda):
    if have_cuda:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0)
        if l2:
            return 4.0 * l2
    return 200e6


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-json", required=True,
                    help="portssm_bench --graph --json output of the same device run")
    ap.add_argument("--out-md", help="write the markdown table here too")
    ap.add_argument("--out-json", help="write the table as JSON here")
    ap.add_argument("--reps", type=int, default=100, help="graph replays per row")
    ap.add_argument("--rotate-mb", type=float, default=None,
                    help="input sets rotate until they exceed this (default 4 x L2, else 200)")
    ap.add_argument("--filter", default=None, help='only rows whose "op dtype shape" has this')
    args = ap.parse_args()
    if args.reps < 1:
        ap.error("--reps must be at least 1")
    return args


class TimeLimit(Exception):
    """SIGTERM came (the device run's limit): what is measured is written."""


NOT_MEASURED = "not measured: the run's time limit came first"


def main():
    args = parse_args()
    with open(args.bench_json) as f:
        bench = json.load(f)
    rows = [r for r in bench.get("results", [])
            if args.filter is None or args.filter in row_key(r)]
    ref, versions, why = open_references()
    pssm, pssm_why = open_portssm() if ref is not None else (None, None)
    rotate_bytes = (args.rotate_mb * 1e6 if args.rotate_mb
                    else default_rotate_bytes(ref is not None))
    entries = [base_entry(row) for row in rows]
    # A device run's time limit (timeout's SIGTERM) ends the timing, not the table: the row being
    # timed stops where it is, the rows not reached say so, and the table is still written.
    stop = []

    def time_limit(*_):
        if not stop:
            stop.append(1)
            raise TimeLimit(NOT_MEASURED)

    signal.signal(signal.SIGTERM, time_limit)
    for i, (row, entry) in enumerate(zip(rows, entries)):
        if stop:
            entry["note"] = entry["note"] or NOT_MEASURED
            continue
        if ref is None or entry["note"]:
            continue
        try:
            print("side_by_side: [%d/%d] %s ..." % (i + 1, len(rows), row_key(row)), end=" ",
                  file=sys.stderr, flush=True)
            try:
                measure(entry, row, ref, pssm, pssm_why, args.reps, rotate_bytes)
            except TimeLimit:
                raise
            except Exception as exc:  # noqa: BLE001 - this row fails, the others go on
                entry["note"] = short(exc)
            free_memory()
            if entry["ref_us"] and entry["portssm_us"]:
                entry["ratio"] = entry["ref_us"] / entry["portssm_us"]
            print(fmt(entry["ref_us"], "%.2f us") or entry["note"], file=sys.stderr, flush=True)
        except TimeLimit:
            entry["note"], entry["ratio"] = NOT_MEASURED, None
            print(NOT_MEASURED, file=sys.stderr, flush=True)
    header = header_lines(bench, versions, why, pssm_why, rotate_bytes, args.reps)
    text = markdown(header, entries)
    sys.stdout.write(text)
    if args.out_md:
        with open(args.out_md, "w") as f:
            f.write(text)
    if args.out_json:
        with open(args.out_json, "w") as f:
            json.dump({"tool": "side_by_side", "bench_json": args.bench_json, "header": header,
                       "reference_versions": versions, "reference_missing": why,
                       "rotate_bytes": rotate_bytes, "reps": args.reps, "rows": entries},
                      f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
