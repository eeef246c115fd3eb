"""Bad arguments to the torch drop-ins and portssm.ops that the Python layer meets before the
library does: a tensor of the wrong rank (the drop-ins read shapes to allocate outputs), an
output buffer of the wrong shape/dtype/device, a dtype no op takes (float64, int64, int32 in a
float argument) and read-only NumPy arrays.  Each raises the class of portssm.errors for its
kind of mistake (InvalidArgumentError for a shape, rank, device or read-only output; DtypeError
for a dtype, whoever finds it), naming the argument, what it takes and what it got, and writes
nothing."""

import numpy as np
import pytest
import torch

import portssm.ops as ops
import portssm.torch as pt
from portssm.errors import DtypeError, InvalidArgumentError
from references import conv1d_ref, state_update_ref


def rand(*shape, lo=-1.0, hi=1.0, dtype=torch.float32):
    return (torch.rand(*shape) * (hi - lo) + lo).to(dtype)


# ---------------------------------------------------------------- the drop-ins' arguments

def _ssd_args(Bt=2, L=8, H=4, P=3, G=2, N=5):
    return dict(x=rand(Bt, L, H, P), dt=rand(Bt, L, H, lo=0.1, hi=0.5), A=rand(H, lo=-1, hi=-0.1),
                B=rand(Bt, L, G, N), C=rand(Bt, L, G, N), chunk_size=4, D=rand(H, P),
                z=rand(Bt, L, H, P), dt_bias=rand(H), initial_states=rand(Bt, H, P, N),
                seq_idx=torch.zeros(Bt, L, dtype=torch.int32))


def _split_args(Bt=2, L=8, H=4, P=3, G=2, N=5, W=4):
    dim = H * P
    conv_dim = dim + 2 * G * N
    return dict(zxbcdt=rand(Bt, L, 2 * dim + 2 * G * N + H), conv1d_weight=rand(conv_dim, W),
                conv1d_bias=rand(conv_dim), dt_bias=rand(H), A=rand(H, lo=-1, hi=-0.1),
                D=rand(H, P), chunk_size=4, initial_states=rand(Bt, H, P, N),
                seq_idx=torch.zeros(Bt, L, dtype=torch.int32), rmsnorm_weight=rand(dim),
                outproj_weight=rand(7, dim), outproj_bias=rand(7), ngroups=G)


def _scan_args(Bt=2, D=4, L=8, N=3):
    return dict(u=rand(Bt, D, L), delta=rand(Bt, D, L, lo=0.1, hi=0.5),
                A=rand(D, N, lo=-1, hi=-0.1), B=rand(Bt, N, L), C=rand(Bt, N, L), D=rand(D),
                z=rand(Bt, D, L), delta_bias=rand(D))


def _inner_args(Bt=2, dim=4, L=8, N=3, rank=2, W=4, d_model=6):
    return dict(xz=rand(Bt, 2 * dim, L), conv1d_weight=rand(dim, W), conv1d_bias=rand(dim),
                x_proj_weight=rand(rank + 2 * N, dim), delta_proj_weight=rand(dim, rank),
                out_proj_weight=rand(d_model, dim), out_proj_bias=rand(d_model),
                A=rand(dim, N, lo=-1, hi=-0.1), D=rand(dim), delta_bias=rand(dim))


def _conv_args(Bt=2, D=4, L=8, W=4):
    return dict(x=rand(Bt, D, L), weight=rand(D, W), bias=rand(D),
                initial_states=rand(Bt, D, W - 1))


# (function, its arguments, {argument: the form its message must give})
CASES = {
    "mamba_chunk_scan_combined": (pt.mamba_chunk_scan_combined, _ssd_args, {
        "x": "(batch, seqlen, nheads, headdim)", "dt": "(batch, seqlen, nheads)",
        "A": "(nheads,)", "B": "(batch, seqlen, ngroups, dstate)",
        "C": "(batch, seqlen, ngroups, dstate)", "D": "(nheads, headdim) or (nheads,)",
        "z": "(batch, seqlen, nheads, headdim)", "dt_bias": "(nheads,)",
        "initial_states": "(batch, nheads, headdim, dstate)", "seq_idx": "(batch, seqlen)"}),
    "mamba_split_conv1d_scan_combined": (pt.mamba_split_conv1d_scan_combined, _split_args, {
        "zxbcdt": "(batch, seqlen, 2*d_nonssm", "conv1d_weight": "(dim + 2*ngroups*dstate, width)",
        "conv1d_bias": "(dim + 2*ngroups*dstate,)", "dt_bias": "(nheads,)", "A": "(nheads,)",
        "D": "(nheads, headdim) or (nheads,)",
        "initial_states": "(batch, nheads, headdim, dstate)", "seq_idx": "(batch, seqlen)",
        "rmsnorm_weight": "(dim,)", "outproj_weight": "(out_dim, d_nonssm + dim)",
        "outproj_bias": "(out_dim,)"}),
    "selective_scan_fn": (pt.selective_scan_fn, _scan_args, {
        "u": "(batch, dim, seqlen)", "delta": "(batch, dim, seqlen)", "A": "(dim, dstate)",
        "D": "(dim,)", "z": "(batch, dim, seqlen)", "delta_bias": "(dim,)"}),
    "mamba_inner_fn": (pt.mamba_inner_fn, _inner_args, {
        "xz": "(batch, 2*dim, seqlen)", "conv1d_weight": "(dim, width)", "conv1d_bias": "(dim,)",
        "x_proj_weight": "(dt_rank + 2*dstate, dim)", "delta_proj_weight": "(dim, dt_rank)",
        "out_proj_weight": "(d_model, dim)", "out_proj_bias": "(d_model,)",
        "A": "(dim, dstate)", "D": "(dim,)", "delta_bias": "(dim,)"}),
    "causal_conv1d_fn": (pt.causal_conv1d_fn, _conv_args, {
        "x": "(batch, dim, seqlen)", "weight": "(dim, width)", "bias": "(dim,)",
        "initial_states": "(batch, dim, width - 1)"}),
}
RANK_CASES = [(fn, arg) for fn, (_, _, forms) in CASES.items() for arg in forms]


@pytest.mark.parametrize("fn_name, arg", RANK_CASES)
@pytest.mark.parametrize("rank", [0, 5])
def test_wrong_rank_names_argument_form_and_shape(fn_name, arg, rank):
    """Ranks no argument takes: 0 and 5 (the 3-D x of issue 45 below)."""
    fn, make, forms = CASES[fn_name]
    kwargs = make()
    good = kwargs[arg]
    bad = good.reshape(-1)[0] if rank == 0 else good.reshape((1,) * (5 - good.dim()) + good.shape)
    kwargs[arg] = bad
    with pytest.raises(InvalidArgumentError) as info:
        fn(**kwargs)
    msg = str(info.value)
    assert msg.startswith(fn_name + ": '%s' " % arg), msg
    assert forms[arg] in msg, msg
    assert "got shape %s" % (tuple(bad.shape),) in msg, msg


def test_chunk_scan_3d_x_is_not_an_unpack_error():
    """The case of issue 45: a 3-D x."""
    kwargs = _ssd_args()
    kwargs["x"] = kwargs["x"][:, :, 0]
    with pytest.raises(InvalidArgumentError, match=r"'x' must be \(batch, seqlen, nheads, "
                       r"headdim\), got shape \(2, 8, 3\)"):
        pt.mamba_chunk_scan_combined(**kwargs)


def test_inner_fn_sizes_named_before_the_matmuls():
    kwargs = _inner_args()
    kwargs["x_proj_weight"] = rand(9, 4)  # rank 2 + 2*3 = 8 rows expected
    with pytest.raises(InvalidArgumentError, match=r"'x_proj_weight' shape\[0\] must be 8"):
        pt.mamba_inner_fn(**kwargs)
    kwargs = _inner_args()
    kwargs["out_proj_weight"] = rand(6, 5)
    with pytest.raises(InvalidArgumentError, match=r"'out_proj_weight' shape\[1\] must be 4"):
        pt.mamba_inner_fn(**kwargs)


@pytest.mark.parametrize("fn", [pt.layer_norm_fn, pt.layernorm_fn])
def test_norm_of_a_0_dim_x(fn):
    with pytest.raises(InvalidArgumentError, match=r"'x' must be \(\.\.\., hidden\), got shape"):
        fn(torch.tensor(1.0), rand(4), None)


# ---------------------------------------------------------------- output buffers


@pytest.mark.parametrize("bad, what", [
    (lambda: torch.full((2, 4, 2), float("nan")), r"must have shape \(2, 4, 3\), got \(2, 4, 2\)"),
    (lambda: torch.full((2, 3), float("nan")), r"must have shape \(2, 4, 3\), got \(2, 3\)"),
    (lambda: torch.full((2, 4, 3), float("nan"), dtype=torch.float16),
     r"must have dtype torch.float32, got torch.float16"),
])
def test_final_states_out_checked_before_anything_is_written(bad, what):
    args = _conv_args()
    out = bad()
    before = out.clone()
    exc = DtypeError if "dtype" in what else InvalidArgumentError
    with pytest.raises(exc, match="causal_conv1d_fn: 'final_states_out' " + what):
        pt.causal_conv1d_fn(args["x"], args["weight"], args["bias"], return_final_states=True,
                            final_states_out=out)
    assert torch.equal(out.isnan(), before.isnan())


def test_final_states_out_on_another_device():
    args = _conv_args()
    with pytest.raises(InvalidArgumentError, match="'final_states_out' must be on cpu, got meta"):
        pt.causal_conv1d_fn(args["x"], args["weight"], return_final_states=True,
                            final_states_out=torch.empty(2, 4, 3, device="meta"))


def test_final_states_out_right_one_is_written():
    args = _conv_args()
    out = torch.full((2, 4, 3), float("nan"))
    got, final = pt.causal_conv1d_fn(args["x"], args["weight"], args["bias"],
                                     return_final_states=True, final_states_out=out)
    assert final is out and torch.equal(out, args["x"][:, :, -3:])
    ref, _ = conv1d_ref(args["x"], args["weight"], args["bias"])
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- dtypes


def _state_update_args(state_dtype=torch.float32, x_dtype=torch.float32):
    Bt, H, P, N, G = 2, 4, 3, 5, 2
    return dict(state=rand(Bt, H, P, N, dtype=state_dtype), x=rand(Bt, H, P, dtype=x_dtype),
                dt=rand(Bt, H, P, lo=0.1, hi=0.5, dtype=x_dtype),
                A=rand(H, P, N, lo=-1, hi=-0.1), B=rand(Bt, G, N, dtype=x_dtype),
                C=rand(Bt, G, N, dtype=x_dtype), D=rand(H, P), z=rand(Bt, H, P, dtype=x_dtype),
                dt_bias=rand(H, P), dt_softplus=True)


DTYPE_CASES = [
    ("mamba_chunk_scan_combined", _ssd_args, ["x", "dt", "A", "B", "C", "D", "z", "dt_bias",
                                              "initial_states"]),
    ("mamba_split_conv1d_scan_combined", _split_args,
     ["zxbcdt", "conv1d_weight", "conv1d_bias", "dt_bias", "A", "D", "initial_states",
      "rmsnorm_weight", "outproj_weight", "outproj_bias"]),
    ("selective_scan_fn", _scan_args, ["u", "delta", "A", "B", "C", "D", "z", "delta_bias"]),
    ("mamba_inner_fn", _inner_args, ["xz", "conv1d_weight", "conv1d_bias", "x_proj_weight",
                                     "delta_proj_weight", "out_proj_weight", "out_proj_bias",
                                     "A", "D", "delta_bias"]),
    ("causal_conv1d_fn", _conv_args, ["x", "weight", "bias", "initial_states"]),
    ("selective_state_update", _state_update_args, ["state", "x", "dt", "A", "B", "C", "D",
                                                    "z", "dt_bias"]),
]


@pytest.mark.parametrize("fn_name, make, arg",
                         [(f, m, a) for f, m, args in DTYPE_CASES for a in args])
@pytest.mark.parametrize("dtype", [torch.float64, torch.int64, torch.int32])
def test_a_dtype_no_op_takes_is_one_error_class(fn_name, make, arg, dtype):
    """float64 nowhere, and int64 / int32 in a float argument: a DtypeError (also a TypeError)
    naming the argument, the dtype given and those taken, whichever layer refuses it."""
    kwargs = make()
    bad = kwargs[arg]
    kwargs[arg] = bad.to(dtype) if dtype.is_floating_point else (bad * 10).to(dtype)
    state = kwargs.get("state")
    state_before = state.clone() if state is not None else None
    with pytest.raises(DtypeError) as info:
        getattr(pt, fn_name)(**kwargs)
    assert isinstance(info.value, TypeError) and isinstance(info.value, InvalidArgumentError)
    msg = str(info.value)
    assert "'%s'" % arg in msg, msg
    given = {torch.float64: ("float64",), torch.int64: ("int64",),
             torch.int32: ("int32", "got i32")}[dtype]  # (the library says i32, f32...)
    assert any(g in msg for g in given), msg
    assert "float32" in msg or "f32" in msg, msg  # what it takes
    if state is not None and arg != "state":
        assert torch.equal(state, state_before)


def test_float64_state_refused_and_untouched():
    """selective_state_update took a float64 state (updating it through a float32 copy) while
    every other op refused float64: now it is refused the same way."""
    args = _state_update_args(state_dtype=torch.float64)
    before = args["state"].clone()
    with pytest.raises(DtypeError, match="'state' has dtype torch.float64; it takes float32, "
                       "float16 or bfloat16"):
        pt.selective_state_update(**args)
    assert torch.equal(args["state"], before)


def test_library_refusal_of_int32_is_a_dtype_error():
    """int32 is a dtype portssm has (index tensors), so the library refuses an int32 x itself:
    the same class as the Python layer's refusal of int64."""
    kwargs = _conv_args()
    kwargs["x"] = (kwargs["x"] * 10).to(torch.int32)
    with pytest.raises(DtypeError, match=r"causal_conv1d_fwd: 'x' dtype must be f32, f16 or bf16, "
                       r"got i32"):
        pt.causal_conv1d_fn(**kwargs)


@pytest.mark.parametrize("state_dtype", [torch.float32, torch.bfloat16])
def test_state_in_its_own_dtype_beside_bf16_activations(state_dtype):
    """How transformers calls it: a float32 (or bf16) state with bfloat16 x, dt, B, C, z and
    float32 A, D, dt_bias."""
    args = _state_update_args(state_dtype=state_dtype, x_dtype=torch.bfloat16)
    ref_out, ref_state = state_update_ref(**{k: v for k, v in args.items()})
    out = pt.selective_state_update(**args)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.double(), ref_out, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(args["state"].double(), ref_state, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- read-only NumPy arrays


def _conv_numpy(read_only_inputs):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (2, 4, 8)).astype(np.float32)
    w = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 4).astype(np.float32)
    if read_only_inputs:
        for a in (x, w, b):
            a.flags.writeable = False
    return x, w, b


def test_read_only_numpy_inputs_accepted():
    results = []
    for read_only in (False, True):
        x, w, b = _conv_numpy(read_only)
        out = np.full((2, 4, 8), np.nan, np.float32)
        final = np.full((2, 4, 2), np.nan, np.float32)
        ops.causal_conv1d_fwd(x, w, out, bias=b, final_states=final, activation="silu")
        results.append((out, final))
    assert not np.isnan(results[1][0]).any()
    assert np.array_equal(results[0][0], results[1][0])
    assert np.array_equal(results[0][1], results[1][1])


def test_read_only_broadcast_input_accepted():
    """np.broadcast_to gives a read-only view with zero strides."""
    x, w, _ = _conv_numpy(False)
    b = np.broadcast_to(np.float32(0.25), (4,))
    out = np.full((2, 4, 8), np.nan, np.float32)
    ops.causal_conv1d_fwd(x, w, out, bias=b)
    ref = np.full((2, 4, 8), np.nan, np.float32)
    ops.causal_conv1d_fwd(x, w, ref, bias=np.full(4, 0.25, np.float32))
    assert np.array_equal(out, ref)


@pytest.mark.parametrize("which", ["out", "final_states"])
def test_read_only_numpy_output_refused_and_nothing_written(which):
    x, w, b = _conv_numpy(True)
    arrays = dict(out=np.full((2, 4, 8), np.nan, np.float32),
                  final_states=np.full((2, 4, 2), np.nan, np.float32))
    arrays[which].flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="'%s' is read-only, but the op writes into "
                       "it" % which):
        ops.causal_conv1d_fwd(x, w, arrays["out"], bias=b, final_states=arrays["final_states"])
    assert np.isnan(arrays["out"]).all() and np.isnan(arrays["final_states"]).all()


def test_read_only_state_refused():
    """An in/out state (updated in place) counts as an output."""
    rng = np.random.default_rng(1)
    f = lambda *s: rng.uniform(-1, 1, s).astype(np.float32)  # noqa: E731
    state = f(2, 4, 3)
    state.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="'state' is read-only"):
        ops.selective_state_update(state, f(2, 4), f(2, 4), -np.abs(f(4, 3)), f(2, 3), f(2, 3),
                                   np.empty((2, 4), np.float32))


class _OldNumpy:
    """A read-only array as NumPy < 2.1 exports it: __dlpack__ without max_version, refusing a
    read-only array with BufferError; only __array_interface__ describes it."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        if not self.a.flags.writeable:
            raise BufferError("Cannot export readonly array since signalling readonly is "
                              "unsupported by DLPack.")
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()

    @property
    def __array_interface__(self):
        return self.a.__array_interface__


def test_read_only_inputs_of_a_producer_before_dlpack_1():
    x, w, b = _conv_numpy(True)
    xt = np.ascontiguousarray(x[:, :, ::2])  # (and a strided one)
    xt.flags.writeable = False
    for xin in (x, x[:, :, ::2]):
        out = np.full(xin.shape, np.nan, np.float32)
        ops.causal_conv1d_fwd(_OldNumpy(xin), _OldNumpy(w), out, bias=_OldNumpy(b))
        ref = np.full(xin.shape, np.nan, np.float32)
        ops.causal_conv1d_fwd(np.array(xin), np.array(w), ref, bias=np.array(b))
        assert np.array_equal(out, ref)
    out = np.full((2, 4, 8), np.nan, np.float32)
    out.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="'out' is read-only"):
        ops.causal_conv1d_fwd(x, w, _OldNumpy(out))


def test_written_names_are_fields_of_their_op():
    from portssm import _call

    assert set(ops.WRITTEN) == set(_call.SPECS)
    for op, names in ops.WRITTEN.items():
        assert names <= set(_call.SPECS[op].offset), op
