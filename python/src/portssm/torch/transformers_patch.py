"""transformers' Mamba-family models on portssm, with no change to model code.

transformers 5.x picks its fast kernels per function: each modeling file decorates its pure-torch
fallbacks with ``use_kernel_func_from_hub_with_fallback(func_name, package)``, which at import
time looks for ``package`` (causal_conv1d, mamba_ssm) and the function in it, and otherwise
keeps the torch code.  patch_transformers() works at that level:

  * the decorator factory itself is replaced, so modeling files imported afterwards bind
    portssm's function for every kernel portssm has (others go to transformers' own factory);
  * modeling files already imported are re-bound: each decorated function whose kernel portssm
    has is replaced by a wrapper of the same kind (keyword arguments filtered by portssm's
    signature, like transformers' own wrapper), so existing models switch too;
  * Mamba and Mamba-2 are imported, so both are covered at once.

Since transformers 5.24 (with the ``kernels`` package) the decorator's result is not a function but
a ``kernels`` function layer (an ``nn.Module`` instance made by ``use_kernel_forward_from_hub``),
which Mamba-2's mixer class registers with ``use_kernelized_func`` and which rejects anything else;
portssm's functions are then wrapped the same way, so that the new modeling files accept them and
the layers already imported are replaced by layers of portssm's.

transformers before 5.16 has no such decorator: its modeling files bind the kernel functions as
module globals (behind cuda-only availability checks) and take the kernel path for cuda tensors
only; there transformers_legacy.py binds the globals and sends the mixers' torch path to their
kernel path on portssm (see that module).  Checked from transformers 4.39 (the first with Mamba)
on; older versions get an ImportError naming the minimum (MINIMUM_TRANSFORMERS).  Mamba-2 is
patched from 4.48 on (MINIMUM_MAMBA2): in 4.44-4.47 transformers' own Mamba-2 torch path and
kernel path give different logits (its torch path was rewritten in 4.48) and 4.44's kernel path
fails in generate, so there Mamba-2 keeps transformers' torch code, with a warning.

mamba-ssm and causal-conv1d need not be installed; every kernel function transformers' Mamba and
Mamba-2 look for is portssm's (Mamba-2's training path through mamba_split_conv1d_scan_combined,
its prefill through mamba_chunk_scan_combined); a kernel portssm did not know would keep
transformers' own choice.  The returned TransformersPatch counts the calls per kernel
(``.calls``) and undoes everything with ``.restore()``.
"""

from __future__ import annotations

import ast
import collections
import functools
import importlib
import importlib.util
import inspect
import re
import sys
import textwrap
import warnings

from . import transformers_legacy

# (package transformers looks in, function name) -> portssm's drop-in
def _kernels():
    from .causal_conv1d import causal_conv1d_fn, causal_conv1d_update
    from .selective_scan import mamba_inner_fn, selective_scan_fn
    from .ssd import mamba_chunk_scan_combined, mamba_split_conv1d_scan_combined
    from .state_update import selective_state_update

    return {
        ("causal_conv1d", "causal_conv1d_fn"): causal_conv1d_fn,
        ("causal_conv1d", "causal_conv1d_update"): causal_conv1d_update,
        ("mamba_ssm", "selective_scan_fn"): selective_scan_fn,
        ("mamba_ssm", "mamba_inner_fn"): mamba_inner_fn,
        ("mamba_ssm", "selective_state_update"): selective_state_update,
        ("mamba_ssm", "mamba_chunk_scan_combined"): mamba_chunk_scan_combined,
        ("mamba_ssm", "mamba_split_conv1d_scan_combined"): mamba_split_conv1d_scan_combined,
    }


MODELS = ("transformers.models.mamba.modeling_mamba", "transformers.models.mamba2.modeling_mamba2")
# the oldest transformers patch_transformers() was checked with (python/tests/test_transformers.py
# against 4.39 ... 5.25): older versions are refused with this in the message
MINIMUM_TRANSFORMERS = "4.39"
# the oldest whose Mamba-2 is patched (see the module docstring)
MINIMUM_MAMBA2 = "4.48"

_active = None


class TransformersPatch:
    """What patch_transformers() changed.  ``calls[func_name]`` counts the calls that went to
    portssm (eager calls; a compiled graph counts when traced); ``bound`` lists
    (module, attribute, func_name) of every modeling function now on portssm."""

    ABSENT = object()  # a dict entry that was not there

    def __init__(self):
        self.calls = collections.Counter()
        self.bound = []
        self._saved = []  # (object, attribute, previous value)
        self._saved_items = []  # (dict, key, previous value or ABSENT)
        self._factory = None

    def restore(self) -> None:
        """Puts transformers back as it was (functions bound since the patch get transformers'
        own wrapper)."""
        global _active
        for obj, attr, value in reversed(self._saved):
            setattr(obj, attr, value)
        self._saved.clear()
        for mapping, key, value in reversed(self._saved_items):
            if value is self.ABSENT:
                mapping.pop(key, None)
            else:
                mapping[key] = value
        self._saved_items.clear()
        for module, attr, _ in self.bound:
            fn = getattr(module, attr, None)
            original = getattr(fn, "__portssm_original__", None)
            if original is not None:
                setattr(module, attr, original())
        self.bound.clear()
        if _active is self:
            _active = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()


def _wrapper(patch, func_name, impl, torch_function, original):
    from ._runtime import is_compiling

    params = frozenset(inspect.signature(impl).parameters)

    @functools.wraps(torch_function)
    def wrapped(*args, **kwargs):
        if not is_compiling():
            patch.calls[func_name] += 1
        if kwargs:
            kwargs = {k: v for k, v in kwargs.items() if k in params}
        return impl(*args, **kwargs)

    wrapped.__portssm_kernel__ = func_name
    wrapped.__portssm_original__ = original  # builds transformers' own wrapper again
    return wrapped


def _layer_func(obj):
    """The function inside a ``kernels`` function layer (its class's forward closes over it), or
    None for anything else."""
    forward = getattr(type(obj), "forward", None)
    if forward is None or not hasattr(obj, "kernel_layer_name"):
        return None
    return _closure(forward).get("func")


def _as_layer(hub, func_name, fn, like):
    """fn as transformers makes its kernel functions: a ``kernels`` function layer where
    ``like`` (transformers' own result) is one, else fn itself."""
    make = getattr(hub, "use_kernel_forward_from_hub", None)
    if make is None or _layer_func(like) is None:
        return fn
    layer = make(func_name)(fn)
    layer.__portssm_kernel__ = fn.__portssm_kernel__
    layer.__portssm_original__ = fn.__portssm_original__
    return layer


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


def _declared_kernel(torch_function):
    """(package, func_name) as the decorator above torch_function's source declares them
    (``@use_kernel_func_from_hub_with_fallback("causal_conv1d_fn", "causal_conv1d")``), for
    transformers 5.16, whose wrapper's closure keeps the torch function but neither name;
    (None, None) where the source or the decorator is not found."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(torch_function)))
    except (OSError, TypeError, SyntaxError):
        return (None, None)
    for node in tree.body[:1]:
        for dec in getattr(node, "decorator_list", ()):
            callee = getattr(dec, "func", None)
            name = getattr(callee, "id", None) or getattr(callee, "attr", None)
            if name != "use_kernel_func_from_hub_with_fallback":
                continue
            given = [a.value for a in dec.args if isinstance(a, ast.Constant)]
            given += [None] * 2
            named = {k.arg: k.value.value for k in dec.keywords
                     if isinstance(k.value, ast.Constant)}
            return (named.get("package", given[1]), named.get("func_name", given[0]))
    return (None, None)


def patch_transformers() -> TransformersPatch:
    """Route transformers' Mamba / Mamba-2 kernel calls to portssm (see the module docstring).
    Calling it again returns the patch already in place."""
    global _active
    if _active is not None:
        return _active
    transformers = importlib.import_module("transformers")
    _check_version(transformers.__version__)
    try:
        hub = importlib.import_module("transformers.integrations.hub_kernels")
    except ImportError:  # before the hub kernels (4.4x)
        hub = None
    if hub is None or transformers_legacy.is_legacy(hub):
        return _patch_legacy()
    integrations = importlib.import_module("transformers.integrations")
    original_factory = hub.use_kernel_func_from_hub_with_fallback
    kernels = _kernels()
    patch = TransformersPatch()

    def factory(func_name, package, internal_path=None):
        impl = kernels.get((package, func_name))
        if impl is None:
            return original_factory(func_name, package, internal_path)

        def decorator(torch_function):
            def original():
                return original_factory(func_name, package, internal_path)(torch_function)

            fn = _as_layer(hub, func_name,
                           _wrapper(patch, func_name, impl, torch_function, original), original())
            module = sys.modules.get(torch_function.__module__)
            if module is not None:
                patch.bound.append((module, torch_function.__name__, func_name))
            return fn

        return decorator

    functools.update_wrapper(factory, original_factory)
    for obj in (hub, integrations):
        patch._saved.append((obj, "use_kernel_func_from_hub_with_fallback",
                             getattr(obj, "use_kernel_func_from_hub_with_fallback")))
        setattr(obj, "use_kernel_func_from_hub_with_fallback", factory)
    _active = patch

    for name in MODELS:  # imported now (through the new factory) or re-bound below
        importlib.import_module(name)
    for name, module in list(sys.modules.items()):
        if not name.startswith("transformers.models.") or module is None:
            continue
        for attr, fn in list(vars(module).items()):
            if not callable(fn) or getattr(fn, "__portssm_kernel__", None):
                continue
            inner = _layer_func(fn)  # a kernels function layer: transformers' wrapper inside
            cells = _closure(fn if inner is None else inner)
            torch_function = cells.get("torch_function")
            if torch_function is None:
                continue
            key = (cells.get("package"), cells.get("func_name"))
            if key[0] is None:  # transformers 5.16: its wrapper keeps neither
                key = _declared_kernel(torch_function)
            if key not in kernels:
                continue
            patch._saved.append((module, attr, fn))
            wrapped = _wrapper(patch, key[1], kernels[key], torch_function, None)
            setattr(module, attr, _as_layer(hub, key[1], wrapped, fn))
            patch.bound.append((module, attr, key[1]))
    found = {func for _, _, func in patch.bound}
    if not found:
        patch.restore()
        raise RuntimeError("portssm.torch.patch_transformers: no kernel function of transformers' "
                           "Mamba models was found to patch; this transformers version selects "
                           "its kernels differently")
    return patch


def _version_tuple(text):
    """(4, 57, 6) of "4.57.6"; a part's leading digits ("0rc1" -> 0), up to the first that has
    none."""
    parts = []
    for piece in text.split("."):
        digits = re.match(r"\d*", piece).group()
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _check_version(version):
    if _version_tuple(version) < _version_tuple(MINIMUM_TRANSFORMERS):
        raise ImportError("portssm.torch.patch_transformers needs transformers >= %s (checked "
                          "from there on), this is %s; upgrade transformers, or use the import "
                          "aliases (portssm.enable_import_aliases(), on by default where portssm "
                          "is installed), which serve the kernel packages any version imports on "
                          "cuda" % (MINIMUM_TRANSFORMERS, version))


def _patch_legacy():
    """patch_transformers() on transformers before 5.16 (transformers_legacy.py)."""
    global _active
    patch = TransformersPatch()
    kernels = _kernels()
    _active = patch
    models = list(MODELS)
    version = transformers_legacy.version_of_transformers()
    if _version_tuple(version) < _version_tuple(MINIMUM_MAMBA2):
        models.remove("transformers.models.mamba2.modeling_mamba2")
        if importlib.util.find_spec("transformers.models.mamba2") is not None:
            warnings.warn("portssm.torch.patch_transformers: transformers %s's Mamba-2 stays on "
                          "its torch code (its torch and kernel paths disagree before 4.48); "
                          "transformers >= %s runs Mamba-2 on portssm" % (version, MINIMUM_MAMBA2),
                          stacklevel=3)
    try:
        patched = transformers_legacy.patch_legacy(
            patch, kernels, lambda func_name, impl: _wrapper(patch, func_name, impl, impl, None),
            models)
    except BaseException:
        patch.restore()
        raise
    if not patch.bound:
        patch.restore()
        raise RuntimeError("portssm.torch.patch_transformers: transformers %s binds no kernel "
                           "function portssm knows in %s; this version selects its kernels "
                           "differently" % (transformers_legacy.version_of_transformers(),
                                            ", ".join(patched) or "its Mamba modeling files"))
    return patch
