"""Shared fixtures: the devices the suite runs on (cpu always; cuda when torch sees one, else
those tests report skipped with the reason) and fresh random data for every test.

portssm's import aliases (`import causal_conv1d` / `import mamba_ssm`) are made active first
thing, before torch or transformers is imported, as the installed wheel's .pth does at
interpreter start (from a build tree nothing else would; PORTSSM_NO_ALIAS=1 keeps them off)."""

import contextlib
import importlib
import os
import sys
import threading

import portssm

ALIASES_ACTIVE = portssm.enable_import_aliases()

import _portssm_aliases  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

_ALIASED = ("causal_conv1d", "mamba_ssm")


@contextlib.contextmanager
def import_aliases(active):
    """The import aliases on or off inside the block, with the aliased modules imported so far
    out of sight (an import in the block finds them anew); as before after it."""
    was_active = _portssm_aliases.finder() is not None
    hidden = {k: sys.modules.pop(k) for k in list(sys.modules) if k.split(".")[0] in _ALIASED}
    if active:
        _portssm_aliases.install()
    else:
        _portssm_aliases.uninstall()
    try:
        yield
    finally:
        for k in [k for k in sys.modules if k.split(".")[0] in _ALIASED]:
            del sys.modules[k]
        sys.modules.update(hidden)
        if was_active:
            _portssm_aliases.install()
        else:
            _portssm_aliases.uninstall()


def reimport_without_aliases(name):
    """Module `name` imported again with the aliases off, in sys.modules from then on: a
    transformers modeling file bound to transformers' own torch code (it binds the kernel
    packages when imported), for tests that need that path while the aliases are active."""
    sys.modules.pop(name, None)
    with import_aliases(False):
        return importlib.import_module(name)


def _devices():
    out = [pytest.param("cpu", id="cpu")]
    if torch.cuda.is_available():
        out.append(pytest.param("cuda", id="cuda"))
    else:
        out.append(pytest.param("cuda", id="cuda", marks=pytest.mark.skip(
            reason="no CUDA device visible to torch here")))
    return out


DEVICES = _devices()


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _fresh_seed(request):
    """Fresh random data per run (PORTSSM_TEST_SEED repeats one); the seed is printed on failure."""
    seed = int(os.environ.get("PORTSSM_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    request.node.user_properties.append(("seed", seed))
    yield


def pytest_runtest_makereport(item, call):
    if call.when == "call" and call.excinfo is not None and not call.excinfo.errisinstance(
            (pytest.skip.Exception, pytest.xfail.Exception)):
        for k, v in item.user_properties:
            if k == "seed":
                print("\nPORTSSM_TEST_SEED=%d repeats this test's data" % v)


def require_backward(device):
    """Backward on a backend without the op must fail with the library's message; the test says
    so rather than passing (it reports the library's UNSUPPORTED message as its skip reason only
    when the op is missing, which the capability query tells)."""
    import portssm
    from portssm.torch import _runtime

    ctx = _runtime.context_of(torch.empty(1, device=device))
    missing = [op for op in ("causal_conv1d_bwd", "selective_scan_bwd", "ssd_chunk_scan_bwd") if not ctx.supports(op)]
    return missing


def compile_refusal():
    """torch's own refusal to run torch.compile here (torch 2.5 on Python 3.13: "Dynamo is not
    supported on Python 3.13+"), or None."""
    from torch import _dynamo

    check = getattr(getattr(_dynamo, "eval_frame", None), "check_if_dynamo_supported", None)
    try:
        if check is not None:
            check()
        torch.compile(lambda t: t)  # where torch.compile itself refuses
    except RuntimeError as exc:
        return str(exc)
    return None


def require_compile():
    """Skips a test of torch.compile tracing portssm's ops where it cannot: where torch refuses
    torch.compile itself, or before torch.library.custom_op (torch 2.4), where torch.compile runs
    each op eagerly between graphs instead (test_compile_graphs.py::test_compile_before_custom_op
    checks that road)."""
    import portssm.torch as pt

    refusal = compile_refusal()
    if refusal is not None:
        pytest.skip("torch %s refuses torch.compile on Python %d.%d: %s"
                    % (torch.__version__, sys.version_info[0], sys.version_info[1], refusal))
    if not pt.USES_CUSTOM_OP:
        pytest.skip("torch %s has no torch.library.custom_op (2.4): torch.compile cannot trace "
                    "portssm's ops, it runs each eagerly between graphs (fullgraph=True fails); "
                    "see test_compile_before_custom_op" % torch.__version__)


def run_in_threads(work, n):
    """Runs work(0) .. work(n - 1), each on a thread of its own (all started before any is
    joined; a test that needs them to overlap waits on a barrier in work), and returns the
    exceptions they raised, for the test to assert there are none (uncaught, an exception in a
    thread is only printed)."""
    failures = []

    def run(i):
        try:
            work(i)
        except Exception as exc:  # returned, for the caller to report
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return failures
