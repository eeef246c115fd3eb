"""The decode ops' two host paths: _runtime.run_python (the reference) and _runtime.run_fast (the
compiled module portssm._fastcall, python/ext/fastcall.c).  Both must pack the same bytes, raise
the same errors before calling anything, and give the same results; without the module the
package takes the Python path.  PORTSSM_EXPECT_EXTENSION=1 (set by .ci/run) makes a missing
module a failure rather than a skip."""

import ctypes
import os
import shutil
import subprocess
import sys
import threading

import pytest
import torch

import portssm
import portssm.torch as pt
from conftest import run_in_threads
from portssm import _call, errors
from portssm.torch import _impl, _runtime

FAST = _call.FASTCALL
needs_fast = pytest.mark.skipif(FAST is None, reason="portssm._fastcall " + _call.FASTCALL_STATUS)


def test_extension_loaded_where_expected():
    if os.environ.get("PORTSSM_EXPECT_EXTENSION", "") not in ("", "0"):
        assert FAST is not None, _call.FASTCALL_STATUS
    if FAST is None:
        pytest.skip("portssm._fastcall " + _call.FASTCALL_STATUS)
    assert _impl._STATE_UPDATE.run.func is FAST.call
    assert _impl._CONV_UPDATE.run.func is FAST.call
    assert (os.path.dirname(os.path.realpath(FAST.__file__))
            == os.path.dirname(os.path.realpath(portssm.library_path())))
    t = portssm._structs.Tensor
    assert tuple(FAST.TENSOR_LAYOUT) == (ctypes.sizeof(t), t.data.offset, t.dtype.offset,
                                         t.ndim.offset, t.shape.offset, t.stride.offset, 4)


# ---------------------------------------------------------------- the calls, both ways

def rand(*shape, device, dtype=torch.float32, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=device) * (hi - lo) + lo).to(dtype)


def _state_update_cases(device):
    """(label, args of _impl.state_update) covering every field, absent ones, broadcast strides,
    4-d tensors and int32 indices."""
    B, N, Dm = 2, 8, 10
    bf16 = torch.bfloat16
    m1 = (rand(B, Dm, N, device=device), rand(B, Dm, device=device, dtype=bf16),
          rand(B, Dm, device=device, dtype=bf16, lo=0, hi=0.5), -rand(Dm, N, device=device, lo=0.1),
          rand(B, N, device=device, dtype=bf16), rand(B, N, device=device, dtype=bf16),
          rand(Dm, device=device), rand(B, Dm, device=device, dtype=bf16), rand(Dm, device=device),
          None, True)
    H, P, G = 4, 6, 2
    m2 = (rand(B, H, P, N, device=device), rand(B, H, P, device=device),
          rand(B, H, device=device, lo=0, hi=0.5)[..., None].expand(-1, -1, P),
          (-rand(H, device=device, lo=0.1))[:, None, None].expand(-1, P, N),
          rand(B, G, N, device=device), rand(B, G, N, device=device),
          rand(H, device=device)[:, None].expand(-1, P), None,
          rand(H, device=device)[:, None].expand(-1, P), None, True)
    pool = rand(5, Dm, N, device=device)
    idx = (pool, rand(3, Dm, device=device), rand(3, Dm, device=device, lo=0, hi=0.5),
           -rand(Dm, N, device=device, lo=0.1), rand(3, N, device=device),
           rand(3, N, device=device), None, None, None,
           torch.tensor([4, -1, 0], device=device, dtype=torch.int32), False)
    strided = list(m1)
    strided[1] = rand(B, 2 * Dm, device=device, dtype=bf16)[:, ::2]  # a non-contiguous x
    # A, D, dt_bias in 16-bit dtypes (converted to float32), parameters and a tensor subclass
    odd = list(m1)
    odd[3] = torch.nn.Parameter(m1[3].to(bf16), requires_grad=False)
    odd[6] = m1[6].half()
    odd[8] = torch.nn.Parameter(m1[8].half(), requires_grad=False)
    odd[4] = m1[4].as_subclass(Traced)
    return [("mamba1", m1), ("mamba2_tied", m2), ("indices", idx), ("strided_x", tuple(strided)),
            ("converted_and_subclasses", tuple(odd))]


class Traced(torch.Tensor):
    """A tensor subclass with __torch_function__: its getters go through it."""

    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        Traced.calls += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def _conv_update_cases(device):
    B, D, W = 2, 8, 4
    bf16 = torch.bfloat16
    plain = (rand(B, D, device=device, dtype=bf16), rand(B, D, W - 1, device=device, dtype=bf16),
             rand(D, W, device=device, dtype=bf16), rand(D, device=device, dtype=bf16), True,
             None, None)
    ring = (rand(B, D, 3, device=device), rand(B, D, 7, device=device), rand(D, W, device=device),
            None, False, torch.tensor([3, 11], device=device, dtype=torch.int32), None)
    indices = (rand(3, D, device=device), rand(5, D, W - 1, device=device),
               rand(D, W, device=device), rand(D, device=device), True, None,
               torch.tensor([4, -1, 1], device=device, dtype=torch.int32))
    return [("plain", plain), ("ring", ring), ("indices", indices)]


CASES = [("state_update", i) for i in range(5)] + [("conv_update", i) for i in range(3)]


def _case(device, op, i):
    cases = _state_update_cases(device) if op == "state_update" else _conv_update_cases(device)
    return cases[i][1]


def _clone(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


@pytest.fixture
def path():
    """path(name): every decode plan on that path; restored afterwards."""
    plans = (_impl._STATE_UPDATE, _impl._CONV_UPDATE)

    def use(name):
        for p in plans:
            p.bind(path=name)

    yield use
    for p in plans:
        p.bind()


def _run(path, name, op, args):
    path(name)
    args = _clone(args)
    out = getattr(_impl, op)(*args)
    return out, args


@needs_fast
@pytest.mark.parametrize("op, i", CASES)
def test_both_paths_give_the_same_results(path, device, op, i):
    args = _case(device, op, i)
    Traced.calls = 0
    out_py, args_py = _run(path, "python", op, args)
    calls_py, Traced.calls = Traced.calls, 0
    out_c, args_c = _run(path, "fast", op, args)
    assert Traced.calls == calls_py  # the same attributes read through __torch_function__
    assert torch.equal(out_py, out_c)
    for a, b in zip(args_py, args_c):  # the in-place states too
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b)


class Recorder:
    """A C-callable stand-in for an op (a ctypes callback): records the args struct it is given
    and returns `status`."""

    def __init__(self, plan, status=0):
        self.plan, self.status, self.seen = plan, status, []
        self.fn = _runtime._OP_FN(self._record)
        plan.bind(ctypes.cast(self.fn, ctypes.c_void_p).value)

    def _record(self, ctx, args):
        self.seen.append(ctypes.string_at(args, self.plan.spec.size))
        return self.status

    def restore(self):
        self.plan.bind()


@pytest.fixture
def recorder():
    made = []

    def make(plan, status=0):
        made.append(Recorder(plan, status))
        return made[-1]

    yield make
    for r in made:
        r.restore()


def _plan_and_call(device, op, i):
    args = _case(device, op, i)
    if op == "state_update":
        state, x, dt, A, B, C, D, z, dt_bias, idx, softplus = args
        out = torch.empty_like(x)
        return _impl._STATE_UPDATE, x, (state, x, dt, A, B, C, D, z, dt_bias, idx, out), (
            int(softplus),)
    x, conv_state, weight, bias, silu, seqlens, idx = args
    out = torch.empty_like(x)
    return _impl._CONV_UPDATE, x, (x, conv_state, weight, bias, seqlens, idx, out), (int(silu),)


@needs_fast
@pytest.mark.parametrize("op, i", CASES)
def test_both_paths_pack_the_same_bytes(recorder, device, op, i):
    plan, x, tensors, ints = _plan_and_call(device, op, i)
    rec = recorder(plan)
    ctx, where = _runtime.context_where(x)
    _runtime.run_python(plan, ctx.handle, where, x, tensors, ints)
    _runtime.run_fast(plan, ctx.handle, where, x, tensors, ints)
    assert len(rec.seen) == 2
    seen = [bytearray(b) for b in rec.seen]
    for off, f32, t in zip(plan.offsets, plan.f32, tensors):
        if f32 and t is not None and t.dtype != torch.float32:
            for b in seen:  # converted by each path: the copies' addresses differ
                assert any(b[off:off + 8])
                b[off:off + 8] = bytes(8)
    assert seen[0] == seen[1]
    # and the bytes are what the fields say: the first tensor's data pointer and shape
    first = tensors[0]
    raw = rec.seen[0][plan.offsets[0]:plan.offsets[0] + 80]
    assert int.from_bytes(raw[:8], "little") == first.data_ptr()
    assert int.from_bytes(raw[16:24], "little") == first.shape[0]


def _bad_inputs(device):
    """(field, replacement, exception) that every path refuses before calling the op: the
    classes the library raises for the same kind of mistake (DtypeError is also a TypeError,
    InvalidArgumentError a ValueError)."""
    x = rand(2, 10, device=device)
    return [
        ("C", x.to("meta"), errors.InvalidArgumentError),                  # another device
        ("x", x.double(), errors.DtypeError),                              # no portssm dtype
        ("B", torch.tensor(1.0, device=device), errors.InvalidArgumentError),  # 0 dimensions
        ("A", torch.zeros(1, 1, 1, 1, 1, device=device),
         errors.InvalidArgumentError),                                     # 5 dimensions
        ("dt", [1.0, 2.0], TypeError),                                     # not a tensor
        ("dt_bias", x[0].double(), errors.DtypeError),     # float64 where float32 is used
        ("D", x[0].to(torch.int32), errors.DtypeError),    # int32 where float32 is used
    ]


def _with_bad_input(device, k):
    """The first state_update call of _plan_and_call with its field of _bad_inputs(device)[k]
    replaced by the bad input: (plan, x, tensors, ints, the field's name, the exception that
    every path raises for it)."""
    plan, x, tensors, ints = _plan_and_call(device, "state_update", 0)
    name, bad, exc = _bad_inputs(device)[k]
    tensors = list(tensors)
    tensors[plan.names.index(name)] = bad
    return plan, x, tuple(tensors), ints, name, exc


@needs_fast
@pytest.mark.parametrize("k", range(7))
def test_both_paths_refuse_alike_and_call_nothing(recorder, device, k):
    plan, x, tensors, ints, name, exc = _with_bad_input(device, k)
    rec = recorder(plan)
    ctx, where = _runtime.context_where(x)
    messages = []
    for path in (_runtime.run_python, _runtime.run_fast):
        with pytest.raises(exc) as info:
            path(plan, ctx.handle, where, x, tensors, ints)
        messages.append(str(info.value))
    assert not rec.seen  # refused before the op
    assert messages[0] == messages[1]
    assert messages[0].startswith("'%s' " % name)


@needs_fast
def test_both_paths_raise_the_library_error_alike(path, device):
    """A call the library refuses (B of the wrong length): the same exception and message."""
    args = list(_case(device, "state_update", 0))
    args[4] = rand(2, 5, device=device, dtype=torch.bfloat16)
    state_before = args[0].clone()
    messages = []
    for name in ("python", "fast"):
        path(name)
        with pytest.raises(errors.InvalidArgumentError, match="'B'") as info:
            _impl.state_update(*args)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert torch.equal(args[0], state_before)


@needs_fast
def test_status_goes_back_to_python(recorder, device):
    """A failing status from the op comes back as the library's exception type."""
    plan, x, tensors, ints = _plan_and_call(device, "conv_update", 0)
    recorder(plan, status=errors.UnsupportedError.code)
    ctx, where = _runtime.context_where(x)
    for path in (_runtime.run_python, _runtime.run_fast):
        with pytest.raises(errors.UnsupportedError):
            path(plan, ctx.handle, where, x, tensors, ints)


@needs_fast
def test_fast_path_leaks_nothing(device):
    """Every object the module makes per tensor (device, shape, stride, pointer) is released, on
    success and on a refused tensor."""
    plan, x, tensors, ints = _plan_and_call(device, "state_update", 0)
    ctx, where = _runtime.context_where(x)
    bad = tuple(t.double() if i == 2 else t for i, t in enumerate(tensors))  # dt
    meta = tuple(t.to("meta") if i == 5 else t for i, t in enumerate(tensors))

    def many():
        for _ in range(2000):
            _runtime.run_fast(plan, ctx.handle, where, x, tensors, ints)
            for refused, exc in ((bad, TypeError), (meta, ValueError)):
                try:
                    _runtime.run_fast(plan, ctx.handle, where, x, refused, ints)
                except exc:
                    pass

    many()  # warm caches and free lists
    before = sys.getallocatedblocks()
    many()
    assert sys.getallocatedblocks() - before < 200
    assert all(sys.getrefcount(t) < 10 for t in tensors if t is not None)


@needs_fast
def test_accessors_called_directly_where_they_can_be(device):
    """CPython >= 3.10: torch.Tensor's and nn.Parameter's descriptors are called directly (3.9
    cannot take the slots of static types: plain lookups, the same results)."""
    _impl.conv_update(*_case(device, "conv_update", 2))
    p = torch.nn.Parameter(torch.ones(4, 4, device=device))
    _impl.conv_update(torch.ones(1, 4, device=device), torch.zeros(1, 4, 3, device=device), p,
                      None, False, None, None)
    seen = dict(FAST.accessor_types())
    direct = sys.version_info >= (3, 10)
    assert seen[torch.Tensor] is direct and seen[torch.nn.Parameter] is direct


@needs_fast
def test_plan_refuses_a_bad_layout():
    spec = _call.SPECS["causal_conv1d_update"]
    addr = _call.address_of(spec.fn)
    dt, codes = _runtime._DTYPES, _runtime._DTYPE_CODES

    def plan(size, names, offsets, like, f32=None, fn=addr):
        return FAST.plan(fn, size, names, offsets, like, f32 or (0,) * len(names), (), dt,
                         codes, print)

    with pytest.raises(ValueError):  # past the end
        plan(spec.size, ("x",), (spec.size - 8,), (-1,))
    with pytest.raises(ValueError):  # misaligned
        plan(spec.size, ("x",), (4,), (-1,))
    with pytest.raises(ValueError):  # like a later field
        plan(spec.size, ("x", "y"), (0, 80), (1, -1))
    with pytest.raises(ValueError):  # f32 is 0 or 1
        plan(spec.size, ("x",), (0,), (-1,), (2,))
    with pytest.raises(ValueError):
        plan(FAST.ARGS_MAX + 8, (), (), ())
    with pytest.raises(ValueError):
        plan(spec.size, (), (), (), fn=0)
    plan = plan(spec.size, ("x",), (0,), (-1,))
    x = torch.ones(1)
    with pytest.raises(TypeError):
        FAST.call(plan, 0, -2, x, (), ())  # one tensor expected
    with pytest.raises(ValueError):
        FAST.call(plan, 0, -3, x, (x,), ())  # no such device test


@needs_fast
def test_device_tests(recorder, device):
    """`where`: -2 takes cpu tensors only, -1 cuda tensors, n cuda tensors of device n."""
    plan, x, tensors, ints = _plan_and_call(device, "conv_update", 0)
    rec = recorder(plan)
    ctx, where = _runtime.context_where(x)
    assert where == (-2 if device == "cpu" else (-1 if torch.cuda.device_count() == 1 else
                                                 x.get_device()))
    tests = [-2, -1, 0, 1]
    ok = {"cpu": [-2], "cuda": [-1, x.get_device()]}[device]
    for w in tests:
        if w in ok:
            _runtime.run_fast(plan, ctx.handle, w, x, tensors, ints)
        else:
            with pytest.raises(ValueError, match="'conv_state' is on %s, but" % x.device):
                _runtime.run_fast(plan, ctx.handle, w, x, tensors, ints)
    assert len(rec.seen) == len(ok)


def test_decode_ops_from_two_threads(device):
    """Two threads calling the decode ops at once (each its own context) get one thread's
    results."""
    cases = [_case(device, "state_update", 0), _case(device, "conv_update", 0)]
    expected = [(_impl.state_update(*_clone(cases[0])), _impl.conv_update(*_clone(cases[1])))]
    results = [None, None]
    start = threading.Barrier(2, timeout=60)

    def work(i):
        start.wait()
        for _ in range(200):
            a, b = _clone(cases[0]), _clone(cases[1])
            results[i] = (_impl.state_update(*a), _impl.conv_update(*b))

    failures = run_in_threads(work, 2)
    assert not failures, failures
    for r in results:
        assert all(torch.equal(a, b) for a, b in zip(r, expected[0]))


# ---------------------------------------------------------------- without the module

def _python(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "PORTSSM_NO_EXTENSION"}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True,
                          timeout=300)


_PROBE = """
import torch, portssm.torch as pt
from portssm import _call
from portssm.torch import _runtime
s = torch.zeros(1, 4, 2); x = torch.ones(1, 4)
out = pt.selective_state_update(s, x, x, -torch.ones(4, 2), torch.ones(1, 2), torch.ones(1, 2))
assert out.shape == x.shape and bool(torch.isfinite(out).all())
from portssm.torch import _impl
print(getattr(_impl._STATE_UPDATE.run.func, "__name__", "?"), "|", _call.FASTCALL_STATUS)
"""


def test_no_extension_env_takes_the_python_path():
    r = _python(_PROBE, PORTSSM_NO_EXTENSION="1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("run_python | not loaded: PORTSSM_NO_EXTENSION"), r.stdout


def test_library_dir_without_the_module_takes_the_python_path(tmp_path):
    """Developer mode against a library directory that has no _fastcall (a build without
    Python headers): the package works, on the Python path."""
    lib_dir = os.path.dirname(portssm.library_path())
    for f in os.listdir(lib_dir):
        if f.startswith("libportssm"):
            shutil.copy2(os.path.join(lib_dir, f), tmp_path / f, follow_symlinks=False)
    r = _python(_PROBE, PORTSSM_LIBRARY_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("run_python | not built: no "), r.stdout


# ---------------------------------------------------------------- DLPack's C exchange API

HAS_API = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
needs_api = pytest.mark.skipif(FAST is None or not HAS_API,
                               reason="no compiled module, or torch %s has no DLPack C exchange "
                                      "API" % torch.__version__)


@pytest.fixture
def exchange_api():
    """exchange_api(on): the compiled module reads tensors through DLPack's C API or not;
    restored afterwards."""
    yield _runtime.use_exchange_api
    _runtime.use_exchange_api(_runtime.EXCHANGE_API)


def test_exchange_api_in_use_where_torch_has_it():
    if FAST is None:
        pytest.skip("portssm._fastcall " + _call.FASTCALL_STATUS)
    wanted = HAS_API and os.environ.get("PORTSSM_NO_DLPACK_API", "") in ("", "0")
    assert _runtime.EXCHANGE_API is wanted


@needs_api
def test_drop_ins_read_plain_tensors_through_the_exchange_api(device):
    """A public call of each decode op packs every tensor it is given (and its output) through
    DLPack's C API, none through the getters."""
    args = _case(device, "state_update", 0)  # mamba1: 9 tensors given, D..dt_bias included
    state, x, dt, A, B, C, D, z, dt_bias, _, softplus = args
    before = FAST.stats()
    pt.selective_state_update(state, x, dt, A, B, C, D=D, z=z, dt_bias=dt_bias,
                              dt_softplus=softplus)
    after = FAST.stats()
    assert (after[0] - before[0], after[1] - before[1]) == (10, 0)
    x, conv_state, weight, bias, silu, _, _ = _case(device, "conv_update", 0)
    weight = torch.nn.Parameter(weight, requires_grad=True)  # a model's own weight
    before = FAST.stats()
    pt.causal_conv1d_update(x, conv_state, weight, bias, "silu")
    after = FAST.stats()
    assert (after[0] - before[0], after[1] - before[1]) == (5, 0)


@needs_api
@pytest.mark.parametrize("op, i", CASES)
def test_exchange_api_and_getters_pack_the_same_bytes(recorder, exchange_api, device, op, i):
    plan, x, tensors, ints = _plan_and_call(device, op, i)
    rec = recorder(plan)
    ctx, where = _runtime.context_where(x)
    for on in (True, False):
        assert exchange_api(on) is on
        _runtime.run_fast(plan, ctx.handle, where, x, tensors, ints)
    seen = [bytearray(b) for b in rec.seen]
    for off, f32, t in zip(plan.offsets, plan.f32, tensors):
        if f32 and t is not None and t.dtype != torch.float32:
            for b in seen:
                b[off:off + 8] = bytes(8)
    assert seen[0] == seen[1]


@needs_api
@pytest.mark.parametrize("k", range(5))
def test_exchange_api_refuses_like_the_getters(recorder, exchange_api, device, k):
    """A tensor the exchange API path would refuse goes to the getters, which word the error:
    the same exception and message as the Python path, and the op is not called."""
    plan, x, tensors, ints, name, exc = _with_bad_input(device, k)
    rec = recorder(plan)
    ctx, where = _runtime.context_where(x)
    messages = []
    with pytest.raises(exc) as info:
        _runtime.run_python(plan, ctx.handle, where, x, tensors, ints)
    messages.append(str(info.value))
    exchange_api(True)
    with pytest.raises(exc) as info:
        _runtime.run_fast(plan, ctx.handle, where, x, tensors, ints)
    messages.append(str(info.value))
    assert not rec.seen
    assert messages[0] == messages[1]


@needs_api
def test_exchange_api_results_on_fresh_random_data(path, exchange_api, device):
    """Fresh random tensors, each case: the op's results through the exchange API are those of
    the pure-Python path, outputs and in-place states alike."""
    torch.manual_seed(1234)
    for op, i in CASES:
        args = _case(device, op, i)
        out_py, args_py = _run(path, "python", op, args)
        exchange_api(True)
        out_c, args_c = _run(path, "fast", op, args)
        assert torch.equal(out_py, out_c), (op, i)
        for a, b in zip(args_py, args_c):
            if isinstance(a, torch.Tensor):
                assert torch.equal(a, b), (op, i)


def test_no_dlpack_api_env_takes_the_getters():
    if FAST is None:
        pytest.skip("portssm._fastcall " + _call.FASTCALL_STATUS)
    code = _PROBE + "print(_runtime.EXCHANGE_API)\n"
    r = _python(code, PORTSSM_NO_DLPACK_API="1")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[0].startswith("call | loaded: "), r.stdout  # the compiled module, on getters
    assert lines[1] == "False", r.stdout


# ---------------------------------------------------------------- the SSD ops' packing alone


def _ssd_plan_args(device, op, dtype=torch.bfloat16):
    """(plan, x, tensors, ints) of one SSD forward or backward call on fresh random data, every
    optional field present but the varlen ones."""
    from portssm.torch import _impl_ssd

    Bt, L, H, P, G, N = 2, 70, 2, 16, 1, 8
    x, z, dout = (rand(Bt, L, H, P, device=device, dtype=dtype) for _ in range(3))
    dt = rand(Bt, L, H, device=device, dtype=dtype)
    A, dtb = rand(H, device=device), rand(H, device=device)
    B, C = (rand(Bt, L, G, N, device=device, dtype=dtype) for _ in range(2))
    D, init = rand(H, P, device=device), rand(Bt, H, P, N, device=device)
    seq = torch.zeros(Bt, L, device=device, dtype=torch.int32)
    ints = (1, 0, 64)
    inputs = (x, dt, A, B, C, D, z, dtb, init, seq, None)
    if op == "fwd":
        out, final = torch.empty_like(x), torch.empty(Bt, H, P, N, device=device)
        return _impl_ssd._FWD, x, inputs + (out, final, None, torch.empty_like(x)), ints
    grads = _impl_ssd.ssd_bwd_outputs(x, dt, A, B, D, z, dtb, True)
    return _impl_ssd._BWD, x, inputs + (dout, rand(Bt, H, P, N, device=device), None,
                                        None) + tuple(grads), ints


@needs_fast
@pytest.mark.parametrize("op", ["fwd", "bwd"])
def test_ssd_both_paths_pack_the_same_bytes(device, op):
    plan, x, tensors, ints = _ssd_plan_args(device, op)
    _, where = _runtime.context_where(x)
    bufs = [plan.spec.buffer_type() for _ in range(2)]
    keep = [_runtime.pack_python(plan, bufs[0], where, x, tensors, ints),
            _runtime.pack_fast(plan.fast, bufs[1], where, x, tensors, ints)]
    assert not keep[0] and not keep[1]  # (no field of these converts)
    assert bytes(bufs[0]) == bytes(bufs[1])
    raw = bytes(bufs[1])  # and the fields hold what they say: the last tensor's pointer
    off = plan.offsets[-1]
    assert int.from_bytes(raw[off:off + 8], "little") == tensors[-1].data_ptr()
    off = plan.int_offsets[-1]
    assert int.from_bytes(raw[off:off + 4], "little") == ints[-1]


@needs_fast
@pytest.mark.parametrize("k", range(5))
def test_ssd_pack_refuses_alike_and_writes_nothing(device, k):
    plan, x, tensors, ints = _ssd_plan_args(device, "fwd")
    name, bad, exc = _bad_inputs(device)[k]
    tensors = list(tensors)
    tensors[plan.names.index(name)] = bad
    _, where = _runtime.context_where(x)
    messages = []
    for pack, target in ((_runtime.pack_python, plan), (_runtime.pack_fast, plan.fast)):
        buf = plan.spec.buffer_type()
        with pytest.raises(exc) as info:
            pack(target, buf, where, x, tuple(tensors), ints)
        messages.append(str(info.value))
        if pack is _runtime.pack_fast:
            assert not any(bytes(buf))
    assert messages[0] == messages[1]
    assert messages[0].startswith("'%s' " % name)
