"""portssm's import aliases (_portssm_aliases): `import causal_conv1d` / `import mamba_ssm` give
portssm's shims where the real packages are absent, a real install always wins, PORTSSM_NO_ALIAS
turns them off, importlib.metadata sees an honest stand-in distribution only while an alias is
in effect, and the .pth costs well under a millisecond at interpreter start without importing
torch.  What depends on the interpreter's state runs in a fresh subprocess."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

import _portssm_aliases
from conftest import ALIASES_ACTIVE

HERE = os.path.dirname(os.path.abspath(__file__))
ALIAS_DIR = os.path.dirname(os.path.abspath(_portssm_aliases.__file__))
PTH_SOURCE = os.path.join(HERE, "..", "portssm-aliases.pth")

needs_aliases = pytest.mark.skipif(not ALIASES_ACTIVE,
                                   reason="PORTSSM_NO_ALIAS is set: the aliases are off")


def _run(code, extra_path=(), env=None, args=()):
    """Runs code in a fresh interpreter with the portssm package (and extra_path first) on the
    path; returns (returncode, stdout, stderr)."""
    environ = dict(os.environ)
    environ.pop("PORTSSM_NO_ALIAS", None)
    environ.update(env or {})
    path = list(extra_path) + [ALIAS_DIR] + [p for p in environ.get("PYTHONPATH", "").split(
        os.pathsep) if p]
    environ["PYTHONPATH"] = os.pathsep.join(path)
    proc = subprocess.run([sys.executable, *args, "-c", textwrap.dedent(code)], env=environ,
                          capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@needs_aliases
def test_aliases_are_portssm():
    import causal_conv1d
    import mamba_ssm
    from mamba_ssm.ops.selective_scan_interface import selective_scan_fn
    from mamba_ssm.ops.triton.selective_state_update import selective_state_update
    from mamba_ssm.ops.triton.ssd_combined import (mamba_chunk_scan_combined,
                                                   mamba_split_conv1d_scan_combined)

    import portssm.torch as pt

    for module in (causal_conv1d, mamba_ssm):
        assert _portssm_aliases.aliased(module), module.__file__
        assert "+portssm" + _portssm_aliases.PORTSSM_VERSION in module.__version__
    assert causal_conv1d.causal_conv1d_fn is pt.causal_conv1d_fn
    assert causal_conv1d.causal_conv1d_update is pt.causal_conv1d_update
    assert mamba_ssm.selective_scan_fn is selective_scan_fn is pt.selective_scan_fn
    assert mamba_ssm.mamba_inner_fn is pt.mamba_inner_fn
    assert selective_state_update is pt.selective_state_update
    assert mamba_chunk_scan_combined is pt.mamba_chunk_scan_combined
    assert mamba_split_conv1d_scan_combined is pt.mamba_split_conv1d_scan_combined


def test_version_constant_is_portssms():
    import portssm

    assert _portssm_aliases.PORTSSM_VERSION == portssm.__version__


def test_pth_imports_only_the_finder():
    with open(PTH_SOURCE) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    assert lines == ["import _portssm_aliases; _portssm_aliases.install()"]


def test_fresh_interpreter_resolves_both_names():
    rc, out, err = _run("""
        import portssm
        assert portssm.enable_import_aliases()
        import causal_conv1d, mamba_ssm
        import mamba_ssm.ops.triton.ssd_combined as ssd
        print(causal_conv1d.__file__)
        print(mamba_ssm.__file__)
        print(ssd.__name__, ssd.__file__)
    """)
    assert rc == 0, err
    shims = os.path.join(ALIAS_DIR, "portssm", "_shims")
    files = out.split()
    assert files[0] == os.path.join(shims, "causal_conv1d", "__init__.py")
    assert files[1] == os.path.join(shims, "mamba_ssm", "__init__.py")
    assert files[2] == "mamba_ssm.ops.triton.ssd_combined"
    assert files[3] == os.path.join(shims, "mamba_ssm", "ops", "triton", "ssd_combined.py")


def test_real_install_wins(tmp_path):
    """A package of the same name anywhere on sys.path is imported instead, and so is one that
    a finder appended after portssm's (an editable install's) provides."""
    for name in ("mamba_ssm", "causal_conv1d"):
        os.makedirs(tmp_path / name)
        (tmp_path / name / "__init__.py").write_text("REAL = True\n")
    rc, out, err = _run("""
        import portssm
        portssm.enable_import_aliases()
        import causal_conv1d, mamba_ssm
        print(getattr(mamba_ssm, "REAL", False), getattr(causal_conv1d, "REAL", False))
    """, extra_path=[str(tmp_path)])
    assert rc == 0, err
    assert out.split() == ["True", "True"]

    rc, out, err = _run("""
        import importlib.machinery, importlib.util, sys, types
        import portssm
        portssm.enable_import_aliases()

        class Editable:  # what a setuptools editable install appends to sys.meta_path
            def find_spec(self, name, path=None, target=None):
                if name == "mamba_ssm":
                    return importlib.machinery.ModuleSpec(name, Loader())
                return None

        class Loader:
            def create_module(self, spec):
                return None
            def exec_module(self, module):
                module.REAL = True

        sys.meta_path.append(Editable())
        import mamba_ssm
        print(getattr(mamba_ssm, "REAL", False))
    """)
    assert rc == 0, err
    assert out.split() == ["True"]


def test_off_switch():
    rc, out, err = _run("""
        import importlib.metadata as md, importlib.util
        import portssm
        print(portssm.enable_import_aliases())
        print(importlib.util.find_spec("mamba_ssm"), importlib.util.find_spec("causal_conv1d"))
        print(len([d for d in md.distributions()
                   if d.metadata["Name"] in ("mamba_ssm", "causal_conv1d")]))
        try:
            import mamba_ssm
        except ModuleNotFoundError as e:
            print("refused:", e.name)
    """, env={"PORTSSM_NO_ALIAS": "1"})
    assert rc == 0, err
    assert out.splitlines() == ["False", "None None", "0", "refused: mamba_ssm"]


def test_disable_removes_the_finder():
    rc, out, err = _run("""
        import importlib.util
        import portssm
        portssm.enable_import_aliases()
        portssm.enable_import_aliases()
        import sys, _portssm_aliases
        print(sum(isinstance(f, _portssm_aliases.ImportAliasFinder) for f in sys.meta_path))
        print(sys.meta_path[-1].__class__.__name__)
        portssm.disable_import_aliases()
        print(importlib.util.find_spec("mamba_ssm"))
    """)
    assert rc == 0, err
    assert out.splitlines() == ["1", "ImportAliasFinder", "None"]


def test_stand_in_distributions(tmp_path):
    code = """
        import importlib.metadata as md
        import portssm
        portssm.enable_import_aliases()
        for name in ("mamba_ssm", "mamba-ssm", "causal_conv1d", "Causal-Conv1d"):
            print(name, md.version(name))
        print(md.metadata("mamba_ssm")["Summary"])
        print(sorted(d.metadata["Name"] for d in md.distributions()
                     if "portssm" in (d.metadata["Summary"] or "")
                     and d.metadata["Name"] in ("mamba_ssm", "causal_conv1d")))
        if hasattr(md, "packages_distributions"):
            print(md.packages_distributions().get("mamba_ssm"))
    """
    rc, out, err = _run(code)
    assert rc == 0, err
    lines = out.splitlines()
    ver = _portssm_aliases.PORTSSM_VERSION
    assert lines[:4] == ["mamba_ssm 2.3.2.post1+portssm" + ver,
                         "mamba-ssm 2.3.2.post1+portssm" + ver,
                         "causal_conv1d 1.7.0+portssm" + ver,
                         "Causal-Conv1d 1.7.0+portssm" + ver]
    assert "portssm" in lines[4]
    assert lines[5] == "['causal_conv1d', 'mamba_ssm']"
    if len(lines) > 6:
        assert lines[6] == "['mamba_ssm']"

    # a real mamba-ssm distribution (its metadata on sys.path): the stand-in steps aside
    info = tmp_path / "mamba_ssm-9.9.9.dist-info"
    os.makedirs(info)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mamba_ssm\nVersion: 9.9.9\n")
    rc, out, err = _run("""
        import importlib.metadata as md
        import portssm
        portssm.enable_import_aliases()
        print(md.version("mamba_ssm"))
        print([d.version for d in md.distributions() if d.metadata["Name"] == "mamba_ssm"])
    """, extra_path=[str(tmp_path)])
    assert rc == 0, err
    assert out.splitlines() == ["9.9.9", "['9.9.9']"]


def test_stand_ins_hidden_from_installers():
    # pip lists distributions directory by directory (importlib.metadata.distributions(path=
    # [entry]) for each sys.path entry); the stand-ins answer only a lookup over sys.path itself
    rc, out, err = _run("""
        import importlib.metadata as md, sys
        import portssm
        portssm.enable_import_aliases()
        print(md.version("mamba_ssm").split("+")[1][:7])
        names = set()
        for entry in sys.path:
            names.update(d.metadata["Name"] for d in md.distributions(path=[entry]))
        print(sorted(n for n in names if n in ("mamba_ssm", "causal_conv1d")))
    """)
    assert rc == 0, err
    assert out.splitlines() == ["portssm", "[]"]


def test_raising_finder_does_not_break_metadata():
    # pip 26 puts a finder in sys.meta_path during `pip install` that raises for every module
    # not yet imported, and reads importlib.metadata meanwhile: the aliases' probe of the other
    # finders must take a raising one as "not there", not raise out of importlib.metadata
    rc, out, err = _run("""
        import importlib.metadata as md, sys
        import portssm
        portssm.enable_import_aliases()

        class Blocker:
            def find_spec(self, fullname, path=None, target=None):
                if fullname.split(".")[0] in ("mamba_ssm", "causal_conv1d"):
                    raise ImportError("blocked: " + fullname)
                return None

        sys.meta_path.insert(0, Blocker())
        print(sorted(d.metadata["Name"] for d in md.distributions()
                     if d.metadata["Name"] in ("mamba_ssm", "causal_conv1d")))
        print(md.version("causal_conv1d").split("+")[0])
    """)
    assert rc == 0, err
    assert out.splitlines() == ["['causal_conv1d', 'mamba_ssm']", "1.7.0"]


def _startup_cost_us(site_dir):
    """(cumulative import time of _portssm_aliases in microseconds from -X importtime, the
    modules left imported) of one fresh interpreter that processes site_dir's .pth files."""
    code = "import site, sys; site.addsitedir(%r); print(sorted(sys.modules))" % site_dir
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=environ,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    m = re.search(r"import time:\s*(\d+)\s*\|\s*(\d+)\s*\|\s*_portssm_aliases\s*$",
                  proc.stderr, re.M)
    assert m, "the .pth did not import _portssm_aliases:\n" + proc.stderr[-2000:]
    return int(m.group(2)), proc.stdout


def test_interpreter_start_is_cheap(tmp_path):
    """The .pth imports one small module and nothing of torch or portssm: under a millisecond
    of import time (the best of five starts, this machine being shared).  Measured on a copy of
    the .pth and the module with its bytecode, as pip installs them (the environment may forbid
    writing bytecode, which would time the compiler instead)."""
    import importlib.util
    import py_compile
    import shutil

    shutil.copy(PTH_SOURCE, tmp_path / "portssm-aliases.pth")
    module = str(tmp_path / "_portssm_aliases.py")
    shutil.copy(_portssm_aliases.__file__, module)
    py_compile.compile(module, cfile=importlib.util.cache_from_source(module), doraise=True)
    best, modules = min(_startup_cost_us(str(tmp_path)) for _ in range(5))
    assert best < 1000, "importing _portssm_aliases took %d us" % best
    loaded = eval(modules)
    assert "_portssm_aliases" in loaded
    # what this interpreter loads at start anyway (other .pth files of its site-packages, e.g.
    # setuptools' or an editable install's, may import importlib.util) is not the alias's doing
    empty = tmp_path / "empty"
    empty.mkdir()
    code = "import site, sys; site.addsitedir(%r); print(sorted(sys.modules))" % str(empty)
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    baseline = set(eval(subprocess.run([sys.executable, "-c", code], env=environ,
                                       capture_output=True, text=True, timeout=120).stdout))
    added = [m for m in loaded if m not in baseline]
    assert not [m for m in added if m.split(".")[0] in ("torch", "portssm")
                or m.startswith("importlib.metadata") or m == "importlib.util"], added
