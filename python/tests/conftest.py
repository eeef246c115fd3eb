"""Shared fixtures: the devices the suite runs on (cpu always; cuda when torch sees one, else
those tests report skipped with the reason) and fresh random data for every test.

portssm's import aliases (`import causal_conv1d` / `import mamba_ssm`) are made active first
thing, before torch or transformers is imported, as the installed wheel's .pth does at
interpreter start (from a build tree nothing else would; PORTSSM_NO_ALIAS=1 keeps them off)."""

import os
import threading

import portssm

ALIASES_ACTIVE = portssm.enable_import_aliases()

import pytest  # noqa: E402
import torch  # noqa: E402


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
