"""transformers with zero lines of ours: with the import aliases active, every modeling file that
looks causal_conv1d / mamba_ssm up binds portssm's kernels, and its models train and generate
through them.

Tiny random models of each family present in the installed transformers (mamba, falcon_mamba,
jamba, zamba, mamba2, bamba, zamba2, falcon_h1, granitemoehybrid, nemotron_h, lfm2, qwen3_next's
conv, lfm3), each built twice from the same weights: from its modeling file imported with the
aliases off (transformers' own torch code) and imported afresh with them on.  Nothing of
transformers is patched or called by us.

How a test knows the kernel path ran through portssm: a profile hook (sys.setprofile) counts the
calls entering portssm.torch's drop-in functions (their code objects) during the run; the run with
the aliases off must count none, the run with them on must count the family's kernels.

transformers 5.25 sends cpu tensors to its torch code whatever packages are installed (it holds
the kernel packages cuda-only): its kernel paths run on cuda, and its cpu runs are reported
skipped with that reason (the binding test still checks what it bound).  transformers 5.16-5.24
call the kernels for cpu tensors too, and so run every test here on cpu (5.16 and 5.17 checked).
Before 5.16 (4.57 and 5.14 checked) the modeling files import the kernel packages behind
is_*_available() checks that need cuda: the tests run on cuda there."""

import collections
import importlib
import inspect
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

import _portssm_aliases  # noqa: E402
from conftest import ALIASES_ACTIVE, DEVICES, import_aliases  # noqa: E402
from portssm.torch.transformers_patch import _declared_kernel  # noqa: E402

pytestmark = pytest.mark.skipif(not ALIASES_ACTIVE,
                                reason="PORTSSM_NO_ALIAS is set: the aliases are off")

KERNELS = ("causal_conv1d_fn", "causal_conv1d_update", "selective_scan_fn", "mamba_inner_fn",
           "selective_state_update", "mamba_chunk_scan_combined",
           "mamba_split_conv1d_scan_combined")
PACKAGES = ("causal_conv1d", "mamba_ssm")

_COMMON = dict(vocab_size=64, hidden_size=32, num_hidden_layers=2, pad_token_id=0,
               bos_token_id=1, eos_token_id=2)
_ATTN = dict(num_attention_heads=4, num_key_value_heads=2, intermediate_size=48)
_MAMBA2 = dict(mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=1, mamba_d_state=8,
               mamba_d_conv=4, mamba_expand=2, mamba_chunk_size=8)


def _config(name, **kw):
    for where in ("transformers", "transformers.models.%s" % FAMILIES[name][0]):
        cls = getattr(importlib.import_module(where), FAMILIES[name][1], None)
        if cls is not None:
            return cls(**kw)
    raise AttributeError(FAMILIES[name][1])


# family -> (model package, config class, config arguments, SSM kind, packed sequences kept
# apart by the kernels?).  The SSM kind says which kernels its path must call: "mamba1"
# (selective scan), "mamba2" (SSD), "conv" (the causal conv only).  n_groups is 1: before
# transformers fixed its gated norms (5.17 has not everywhere) the torch path normalises over
# all channels, the kernels per group, so the two agree for one group only.
FAMILIES = {
    "mamba": ("mamba", "MambaConfig",
              dict(_COMMON, state_size=4, expand=2, conv_kernel=4, time_step_rank=4), "mamba1"),
    "falcon_mamba": ("falcon_mamba", "FalconMambaConfig",
                     dict(_COMMON, state_size=4, expand=2, conv_kernel=4, time_step_rank=4),
                     "mamba1"),
    "jamba": ("jamba", "JambaConfig",
              dict(_COMMON, **_ATTN, num_experts=2, num_experts_per_tok=1,
                   expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2,
                   attn_layer_offset=1, mamba_d_state=4, mamba_d_conv=4, mamba_expand=2,
                   mamba_dt_rank=4), "mamba1"),
    "zamba": ("zamba", "ZambaConfig",
              dict(_COMMON, **_ATTN, num_hidden_layers=4, attention_hidden_size=64,
                   layers_block_type=["linear_attention", "hybrid", "linear_attention",
                                      "hybrid"],
                   mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, mamba_dt_rank=4,
                   n_mamba_heads=2), "mamba1"),
    "mamba2": ("mamba2", "Mamba2Config",
               dict(_COMMON, state_size=8, num_heads=4, head_dim=16, n_groups=1, expand=2,
                    conv_kernel=4, chunk_size=8), "mamba2"),
    "bamba": ("bamba", "BambaConfig", dict(_COMMON, **_ATTN, **_MAMBA2, attn_layer_indices=[1]),
              "mamba2"),
    "zamba2": ("zamba2", "Zamba2Config",
               dict(_COMMON, num_attention_heads=4, mamba_d_state=8, mamba_headdim=8,
                    mamba_ngroups=1, mamba_expand=2, chunk_size=8,
                    layers_block_type=["mamba", "hybrid"], hybrid_layer_ids=[1],
                    num_mem_blocks=1), "mamba2"),
    "falcon_h1": ("falcon_h1", "FalconH1Config",
                  dict(_COMMON, **_ATTN, **_MAMBA2, head_dim=8, mamba_d_ssm=64), "mamba2"),
    "granitemoehybrid": ("granitemoehybrid", "GraniteMoeHybridConfig",
                         dict(_COMMON, **_ATTN, **_MAMBA2, num_local_experts=2,
                              num_experts_per_tok=1, shared_intermediate_size=16,
                              layer_types=["mamba", "attention"]), "mamba2"),
    "nemotron_h": ("nemotron_h", "NemotronHConfig",
                   dict(_COMMON, **_ATTN, head_dim=8, mamba_num_heads=4, mamba_head_dim=16,
                        n_groups=1, ssm_state_size=8, conv_kernel=4, expand=2, chunk_size=8,
                        hybrid_override_pattern="M*"), "mamba2"),
    "lfm2": ("lfm2", "Lfm2Config",
             dict(_COMMON, **_ATTN, conv_L_cache=3, layer_types=["conv", "full_attention"]),
             "conv"),
    "qwen3_next": ("qwen3_next", "Qwen3NextConfig",
                   dict(_COMMON, **_ATTN, head_dim=8, linear_num_key_heads=2,
                        linear_num_value_heads=4, linear_key_head_dim=8,
                        linear_value_head_dim=8, linear_conv_kernel_dim=4, num_experts=2,
                        num_experts_per_tok=1, moe_intermediate_size=16,
                        shared_expert_intermediate_size=16,
                        layer_types=["linear_attention", "full_attention"]), "conv"),
    # lfm3's conv is 7 wide: causal-conv1d stops at 4, portssm does not
    "lfm3": ("lfm3", "Lfm3Config",
             dict(_COMMON, **_ATTN, head_dim=8, conv_L_cache=7, sliding_window=16,
                  layer_types=["conv", "full_attention"]), "conv"),
}
# transformers' FalconMamba computes two different functions on its two paths: its fused training
# path (mamba_inner_fn with dt_rms_weight, mamba-ssm's definition) normalises dt after dt_proj,
# its torch path before it, so their training steps differ whatever the kernels (with mamba-ssm
# too).  There the comparison step runs in eval mode, where both take the unfused path (the conv
# and the scan, with portssm's backward ops), and the fused path is checked to run through
# portssm on its own.
FUSED_PATH_DIFFERS = {"falcon_mamba"}

# the SSD and the conv take seq_idx; mamba-ssm's (and so portssm's) Mamba-1 scan does not, and
# transformers drops it there: a packed Mamba-1 batch is not kept apart by any kernel package.
# qwen3_next's first layer runs a gated delta rule after the conv, which only
# flash-linear-attention keeps apart (its torch code ignores seq_idx): not a kernel of portssm's.
PACKED = [f for f, spec in FAMILIES.items() if spec[3] != "mamba1" and f != "qwen3_next"]


def _modeling_name(family):
    return "transformers.models.%s.modeling_%s" % (FAMILIES[family][0], FAMILIES[family][0])


def _require_family(family):
    try:
        importlib.import_module("transformers.models.%s" % FAMILIES[family][0])
        importlib.import_module(_modeling_name(family))
    except ImportError as exc:
        pytest.skip("transformers %s has no %s (%s)" % (transformers.__version__, family, exc))


_FRESH = {}


def _fresh_modeling(family, active):
    """The family's modeling module imported afresh with the aliases on or off (transformers
    binds the kernel packages when a modeling file is imported); sys.modules keeps its own."""
    key = (family, active)
    if key not in _FRESH:
        name = _modeling_name(family)
        importlib.import_module(name)
        kept = sys.modules.pop(name)
        try:
            with import_aliases(active):
                _FRESH[key] = importlib.import_module(name)
        finally:
            sys.modules[name] = kept
    return _FRESH[key]


def _closure(fn):
    code = getattr(fn, "__code__", None)
    if code is None or not fn.__closure__:
        return {}
    out = {}
    for name, cell in zip(code.co_freevars, fn.__closure__):
        try:
            out[name] = cell.cell_contents
        except ValueError:
            pass
    return out


def _kernel_bindings(module):
    """{(package, func_name): what the modeling module bound} for every kernel function it
    looked up.  transformers 5.16+ looks them up by import path when the file is imported
    (use_kernel_func_from_hub_with_fallback: "implementation" is the function it found, else its
    torch code, "torch_function"; a `kernels` function layer holds that wrapper in its class's
    forward); earlier versions import them into module globals behind is_*_available() checks
    (None where unavailable; "torch_function" is then None)."""
    found = {}
    for value in vars(module).values():
        fn = value
        if hasattr(value, "kernel_layer_name"):
            fn = _closure(getattr(type(value), "forward", None)).get("func", value)
        cells = _closure(fn)
        if "implementation" in cells and "package" not in cells and "torch_function" in cells:
            # transformers 5.16: the wrapper keeps neither name; its decorator line says them
            cells["package"], cells["func_name"] = _declared_kernel(cells["torch_function"])
        if cells.get("package") in PACKAGES and "implementation" in cells:
            found[(cells["package"], cells["func_name"])] = cells
    if not found and not _LOOKUP_BY_PATH:
        for name in KERNELS:
            if name in vars(module):
                package = "causal_conv1d" if name.startswith("causal_conv1d") else "mamba_ssm"
                found[(package, name)] = {"implementation": vars(module)[name],
                                          "torch_function": None}
    return found


def _lookup_by_path():
    try:
        hub = importlib.import_module("transformers.integrations.hub_kernels")
    except ImportError:  # before 4.48 there is none
        return False
    return hasattr(hub, "use_kernel_func_from_hub_with_fallback")


_LOOKUP_BY_PATH = _lookup_by_path()


def _portssm_kernel(name):
    import portssm.torch

    return getattr(portssm.torch, name)


def _cuda_only_lookup(device):
    """transformers before 5.16 binds the kernel packages only where torch sees cuda."""
    if not _LOOKUP_BY_PATH and (device != "cuda" or not torch.cuda.is_available()):
        pytest.skip("transformers %s imports the kernel packages behind is_*_available() "
                    "checks, which need cuda (the aliases serve those imports and their "
                    "metadata checks; see test_availability_checks_see_the_aliases)"
                    % transformers.__version__)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_modeling_file_binds_portssm(family):
    _require_family(family)
    _cuda_only_lookup("cuda")
    on = _kernel_bindings(_fresh_modeling(family, True))
    off = _kernel_bindings(_fresh_modeling(family, False))
    assert on, "no kernel lookups found in %s" % _modeling_name(family)
    assert on.keys() == off.keys()
    for (package, func_name), cells in on.items():
        assert cells["implementation"] is _portssm_kernel(func_name), (package, func_name)
        off_cells = off[(package, func_name)]
        assert off_cells["implementation"] is off_cells["torch_function"], (package, func_name)


def test_availability_checks_see_the_aliases():
    """transformers' own check of an installed package (find_spec, then the distribution's
    version through importlib.metadata, as 4.x and 5.x before 5.16 read it) finds the aliases
    with portssm's stand-in version."""
    from transformers.utils import import_utils

    for package, version in (("mamba_ssm", "2.3.2.post1"), ("causal_conv1d", "1.7.0")):
        found = import_utils._is_package_available(package, return_version=True)
        assert found[0] is True
        assert found[1] == "%s+portssm%s" % (version, _portssm_aliases.PORTSSM_VERSION)


class _Calls:
    """Counts the calls entering portssm.torch's drop-ins while active (sys.setprofile; the
    current thread, where transformers calls its kernel functions), and those given a seq_idx."""

    def __init__(self):
        self.counts = collections.Counter()
        self.with_seq_idx = collections.Counter()
        self._codes = {_portssm_kernel(n).__code__: n for n in KERNELS}

    def _profile(self, frame, event, arg):
        if event == "call":
            name = self._codes.get(frame.f_code)
            if name is not None:
                self.counts[name] += 1
                if frame.f_locals.get("seq_idx") is not None:
                    self.with_seq_idx[name] += 1

    def __enter__(self):
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(self._previous)


def _skip_if_torch_path_on(device, module):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch here")
    for cells in _kernel_bindings(module).values():
        supported = cells.get("supported_devices")
        if supported is not None and device not in supported:
            pytest.skip("transformers %s sends %s tensors to its torch code whatever kernel "
                        "packages are installed (they run on %s there)"
                        % (transformers.__version__, device, "/".join(supported)))


def _models(family, device):
    """(torch-path model, portssm model) of the family with the same random weights."""
    cfg = _config(family, **FAMILIES[family][2])
    cls_name = transformers.AutoModelForCausalLM._model_mapping[type(cfg)].__name__
    off_cls = getattr(_fresh_modeling(family, False), cls_name)
    on_cls = getattr(_fresh_modeling(family, True), cls_name)
    torch.manual_seed(torch.initial_seed() % (2 ** 31))
    off = off_cls(cfg).to(device)
    on = on_cls(cfg).to(device)
    missing = on.load_state_dict(off.state_dict(), strict=True)
    assert not missing.missing_keys and not missing.unexpected_keys
    return off, on


def _step(model, ids, train=True):
    """A training step's loss and parameter gradients (in eval mode where not train)."""
    model.train(train)
    model.zero_grad()
    out = model(ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()
             if p.grad is not None}
    return out.loss.detach(), grads


def _generate(model, ids):
    model.eval()
    with torch.no_grad():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=4,
                             do_sample=False, use_cache=True, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=0)
    return out.sequences, torch.stack(out.logits)


def _close(a, b, what, rtol=2e-4, atol=2e-4):
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol, msg=lambda m: "%s: %s" % (what, m))


def _expected_kernels(kind):
    """Kernels the family's run must have entered (any one of each group)."""
    groups = [("causal_conv1d_fn", "mamba_inner_fn", "mamba_split_conv1d_scan_combined"),
              ("causal_conv1d_update",)]
    if kind == "mamba1":
        groups += [("selective_scan_fn", "mamba_inner_fn"), ("selective_state_update",)]
    elif kind == "mamba2":
        groups += [("mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined"),
                   ("selective_state_update",)]
    return groups


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_training_and_generation_agree_with_the_torch_path(family, device):
    _require_family(family)
    _cuda_only_lookup(device)
    _skip_if_torch_path_on(device, _fresh_modeling(family, True))
    off, on = _models(family, device)
    ids = torch.randint(3, 64, (2, 12), device=device)

    train = family not in FUSED_PATH_DIFFERS
    with _Calls() as torch_path:
        off_loss, off_grads = _step(off, ids, train)
        off_seq, off_logits = _generate(off, ids)
    with _Calls() as kernels:
        on_loss, on_grads = _step(on, ids, train)
        on_seq, on_logits = _generate(on, ids)
    if not train:
        with _Calls() as fused:
            loss, _ = _step(on, ids)
        assert fused.counts["mamba_inner_fn"] > 0 and torch.isfinite(loss), dict(fused.counts)

    assert sum(torch_path.counts.values()) == 0, dict(torch_path.counts)
    for group in _expected_kernels(FAMILIES[family][3]):
        assert any(kernels.counts[k] for k in group), (group, dict(kernels.counts))
    _close(on_loss, off_loss, "loss")
    assert on_grads.keys() == off_grads.keys()
    for name in off_grads:
        _close(on_grads[name], off_grads[name], "grad of " + name, rtol=2e-3, atol=2e-4)
    _close(on_logits, off_logits, "greedy decode logits")
    assert torch.equal(on_seq, off_seq)
    print("%s on %s ran through portssm: %s" % (family, device, dict(kernels.counts)))


def _first_layer(model):
    return next(m for n, m in model.named_modules() if n.endswith("layers.0"))


def _first_layer_output(model, *args, **kwargs):
    """The output of the model's first decoder layer (a Mamba / conv layer in every config here)
    for model(*args, **kwargs)."""
    seen = []
    handle = _first_layer(model).register_forward_hook(
        lambda m, i, o: seen.append(o[0] if isinstance(o, tuple) else o))
    try:
        model(*args, **kwargs)
    finally:
        handle.remove()
    return seen[0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family", PACKED)
def test_packed_sequences(family, device):
    """Two sequences flattened into one row (seq_idx int32 and position_ids, as a flattening
    collator gives them): the kernel layer's output is each sequence's own, through portssm's
    kernels.  (The first layer is compared: later attention layers keep packed sequences apart
    by transformers' own masks, not by these kernels.)  Without a kernel package transformers
    5.25 refuses seq_idx; earlier ones ignore it in their torch code."""
    _require_family(family)
    _cuda_only_lookup(device)
    _skip_if_torch_path_on(device, _fresh_modeling(family, True))
    off, on = _models(family, device)
    lengths = (5, 7)
    ids = torch.randint(3, 64, (1, sum(lengths)), device=device)
    seq_idx = torch.cat([torch.full((n,), i, dtype=torch.int32)
                         for i, n in enumerate(lengths)]).to(device).unsqueeze(0)
    position_ids = torch.cat([torch.arange(n) for n in lengths]).to(device).unsqueeze(0)
    packed_kw = dict(seq_idx=seq_idx, position_ids=position_ids, use_cache=False)
    on.eval()
    off.eval()
    with torch.no_grad():
        with _Calls() as kernels:
            packed = _first_layer_output(on, ids, **packed_kw)
        if not sum(kernels.with_seq_idx.values()):
            pytest.skip("transformers %s's %s does not pass seq_idx down to its kernel "
                        "functions (calls: %s)" % (transformers.__version__, family,
                                                    dict(kernels.counts)))
        alone = torch.cat([_first_layer_output(on, part, use_cache=False)
                           for part in torch.split(ids, lengths, dim=1)], dim=1)
        _close(packed, alone, "packed vs each sequence alone")
        try:
            _first_layer_output(off, ids, **packed_kw)
        except ValueError as exc:  # transformers 5.25: refused without a kernel package
            assert "packed sequences" in str(exc)
    # and a training step through the packed batch
    on.train()
    on.zero_grad()
    loss = on(ids, labels=ids, **packed_kw).loss
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in on.parameters() if p.grad is not None)


def test_patch_transformers_still_works_with_the_aliases():
    """patch_transformers() (for older transformers and explicit use) over modeling files that
    the aliases bound already: it re-binds them and restores them."""
    import portssm.torch as pt

    patch = pt.patch_transformers()
    try:
        assert {func for _, _, func in patch.bound} >= {"causal_conv1d_fn", "selective_scan_fn"}
    finally:
        patch.restore()
    assert inspect.isfunction(pt.patch_transformers)
