"""patch_transformers() for transformers before 5.16, which has no
``use_kernel_func_from_hub_with_fallback`` to patch.

Those versions bind the kernel functions as module globals of the modeling files:

  * 4.x imports them at import time behind ``is_mamba_ssm_available()``-style checks, which are
    False without cuda (None then), Mamba's causal-conv1d through ``_lazy_load_causal_conv1d()``
    and its ``_causal_conv1d_cache``, Mamba-2's ``is_fast_path_available`` computed once;
  * 5.0-5.15 assign them in the mixer's ``__init__`` from ``lazy_load_kernel("causal-conv1d" /
    "mamba-ssm")``, which returns the module cached in ``hub_kernels._KERNEL_MODULE_MAPPING``.

Here the globals are set to portssm's functions (wrapped to count calls, like the 5.16+ patch),
``_causal_conv1d_cache`` and ``is_fast_path_available`` to match, and the lazy-load cache holds
portssm-backed modules, so that mixers built later bind portssm's functions again.

These versions also take the kernel path for cuda tensors only (the mixer's ``forward`` tests
``"cuda" in device.type``, whatever is installed); 5.16-5.24 take it on any device.  So that the
patch means the same on every version, the mixer's torch path (``slow_forward`` of Mamba,
``torch_forward`` of Mamba-2), which ``forward`` picks for every other device, goes to its kernel
path (``cuda_kernels_forward``, which calls nothing cuda-specific) on portssm instead, except
while torch.compile traces (transformers' own choice then).  ``restore()`` undoes all of it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
import types

# the torch path each mixer's forward takes off cuda, by the attribute name transformers gives it
_TORCH_PATHS = ("slow_forward", "torch_forward")
# the lazy-load cache's key -> (package, the function names portssm provides of it)
_LAZY_KERNELS = {
    "causal-conv1d": ("causal_conv1d", ("causal_conv1d_fn", "causal_conv1d_update")),
    "mamba-ssm": ("mamba_ssm", ("selective_scan_fn", "mamba_inner_fn", "selective_state_update",
                                "mamba_chunk_scan_combined", "mamba_split_conv1d_scan_combined")),
}


def _kernel_module(name, functions):
    """A module object holding portssm's functions under their reference names, for
    ``lazy_load_kernel`` (transformers resolves ``ops.triton.x.f`` by the last name first)."""
    module = types.ModuleType("portssm:" + name)
    module.__doc__ = "portssm's kernels standing in for %s (patch_transformers)" % name
    for func_name, fn in functions.items():
        setattr(module, func_name, fn)
    return module


def _global_names(cls):
    """Every name the code of cls's methods looks up (globals among them), nested code too."""
    names = set()
    codes = [getattr(fn, "__code__", None) for fn in vars(cls).values()]
    while codes:
        code = codes.pop()
        if code is None:
            continue
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return names


def _kernel_path(cls, torch_path):
    """cls's torch path replaced: its kernel path unless torch.compile traces."""
    from ._runtime import is_compiling

    kernel_params = inspect.signature(cls.cuda_kernels_forward).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in kernel_params.values())

    @functools.wraps(torch_path)
    def forward(self, *args, **kwargs):
        if is_compiling():
            return torch_path(self, *args, **kwargs)
        if "input_states" in kwargs:  # Mamba's slow_forward names its first argument so
            args = (kwargs.pop("input_states"),) + args
        if not takes_any:
            kwargs = {k: v for k, v in kwargs.items() if k in kernel_params}
        return self.cuda_kernels_forward(*args, **kwargs)

    forward.__portssm_kernel__ = "cuda_kernels_forward"
    return forward


def patch_legacy(patch, kernels, wrapper, models):
    """Binds portssm's kernels into the modeling modules `models` of a transformers without
    use_kernel_func_from_hub_with_fallback; records everything in `patch` (a TransformersPatch).
    `kernels` maps (package, func_name) to portssm's function, `wrapper(func_name, impl)` makes
    the counting wrapper.  Returns the names of the modeling modules it patched."""
    by_name = {func: wrapper(func, impl) for (_, func), impl in kernels.items()}
    try:
        hub = importlib.import_module("transformers.integrations.hub_kernels")
    except ImportError:  # transformers before the hub kernels
        hub = None
    mapping = getattr(hub, "_KERNEL_MODULE_MAPPING", None)
    if isinstance(mapping, dict):
        for key, (package, names) in _LAZY_KERNELS.items():
            patch._saved_items.append((mapping, key, mapping.get(key, patch.ABSENT)))
            mapping[key] = _kernel_module(package, {n: by_name[n] for n in names})
            # what mixers built from now on bind (5.x assigns the globals in __init__)
            patch.bound.extend((hub, "_KERNEL_MODULE_MAPPING[%r]" % key, n) for n in names)

    patched = []
    for name in models:
        try:
            module = importlib.import_module(name)
        except ImportError:  # a family this version does not have (Mamba-2 before 4.44)
            continue
        g = vars(module)
        mixers = [cls for cls in list(g.values())
                  if isinstance(cls, type) and cls.__module__ == name
                  and "cuda_kernels_forward" in vars(cls)]
        used = set().union(*(_global_names(cls) for cls in mixers)) if mixers else set()
        for func_name, fn in by_name.items():
            # a global the module has, or one its mixers use but an import left undefined
            # (4.44's Mamba-2 defines mamba_split_conv1d_scan_combined only with mamba-ssm)
            if func_name in g or func_name in used:
                patch._saved_items.append((g, func_name, g.get(func_name, patch.ABSENT)))
                g[func_name] = fn
                patch.bound.append((module, func_name, func_name))
        if "_causal_conv1d_cache" in g:
            patch._saved.append((module, "_causal_conv1d_cache", g["_causal_conv1d_cache"]))
            module._causal_conv1d_cache = (by_name["causal_conv1d_update"],
                                           by_name["causal_conv1d_fn"])
            patch.bound.append((module, "_causal_conv1d_cache", "causal_conv1d_fn"))
        if isinstance(g.get("is_fast_path_available"), bool):
            patch._saved.append((module, "is_fast_path_available", g["is_fast_path_available"]))
            module.is_fast_path_available = True
        for cls in mixers:
            for attr in _TORCH_PATHS:
                torch_path = vars(cls).get(attr)
                if torch_path is not None:
                    patch._saved.append((cls, attr, torch_path))
                    setattr(cls, attr, _kernel_path(cls, torch_path))
        patched.append(name)
    return patched


def is_legacy(hub_module) -> bool:
    """Whether this transformers predates use_kernel_func_from_hub_with_fallback (5.16)."""
    return not hasattr(hub_module, "use_kernel_func_from_hub_with_fallback")


def version_of_transformers():
    tf = sys.modules.get("transformers")
    return getattr(tf, "__version__", "?")
