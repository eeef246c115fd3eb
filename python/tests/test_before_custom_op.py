"""The road for torch < 2.4 (no torch.library.custom_op): the same implementations under
torch.autograd.Function.  Forced here with PORTSSM_TORCH_NO_CUSTOM_OP=1 in a fresh interpreter,
which runs the drop-in tests (forward and gradients) on that road, and torch.compile there (each op
run eagerly between graphs)."""

import os
import subprocess
import sys


def test_autograd_function_road():
    import portssm

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(portssm.__file__)))
    paths = [package_root] + [os.path.abspath(p) for p in
                              os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = dict(os.environ, PORTSSM_TORCH_NO_CUSTOM_OP="1", PYTHONPATH=os.pathsep.join(paths))
    if "PORTSSM_LIBRARY_DIR" in env:
        env["PORTSSM_LIBRARY_DIR"] = os.path.abspath(env["PORTSSM_LIBRARY_DIR"])
    here = os.path.dirname(os.path.abspath(__file__))
    probe = subprocess.run(
        [sys.executable, "-c", "import portssm.torch as pt; assert not pt.USES_CUSTOM_OP"],
        env=env, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k",
         "grad or update or test_conv1d_fn or varlen or fills or final_state_only or "
         "compile_before_custom_op",
         os.path.join(here, "test_torch_ops.py"), os.path.join(here, "test_ssd_ops.py"),
         os.path.join(here, "test_autograd_outputs.py"),
         os.path.join(here, "test_compile_graphs.py")],
        env=env, capture_output=True, text=True, cwd=here)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert " passed" in run.stdout
