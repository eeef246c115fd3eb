"""The package's command line (`python -m portssm`, the `portssm` console script), what the build
recorded about its GPU modules (portssm.build_info(), and probe()'s reason for a skipped one),
and what the installed wheel holds (one copy of libportssm)."""

import os
import subprocess
import sys

import pytest

import portssm
from portssm.__main__ import tool_path


def _run(*args, cmd=None):
    cmd = cmd or [sys.executable, "-m", "portssm"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=300)


def test_help_lists_the_commands():
    r = _run("--help")
    assert r.returncode == 0, r.stderr
    for command in ("info", "doctor", "bench"):
        assert "\n  %s " % command in r.stdout, r.stdout


def test_info_names_package_library_and_build():
    r = _run("info")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "package   portssm %s (%s)" % (portssm.__version__,
                                           os.path.dirname(portssm.__file__)) in r.stdout
    modules = portssm.build_info()["modules"]
    for vendor in ("cuda", "hip"):
        assert "build     %s module: %s" % (vendor, modules[vendor]) in r.stdout
    # then the C tool's own info, on the library this package loads
    line = [x for x in r.stdout.splitlines() if x.startswith("library   ")]
    assert len(line) == 1, r.stdout
    path, _, version = line[0][len("library   "):].partition(" (version ")
    assert os.path.realpath(path) == os.path.realpath(portssm.library_path()), line
    assert version == portssm.library_version() + ")", line


def test_unknown_command_fails_with_its_name():
    r = _run("frobnicate")
    assert r.returncode == 2
    assert "unknown command 'frobnicate'" in r.stderr


def test_tool_is_beside_the_library():
    """<prefix>/bin/portssm for <prefix>/lib (wheel, install tree), <build>/portssm for
    <build>/src (build tree)."""
    tool = tool_path()
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(portssm.library_path())))
    assert os.path.dirname(tool) in (os.path.join(prefix, "bin"), prefix), (tool, prefix)


def test_missing_tool_is_a_clear_error(tmp_path):
    """A library directory without the command beside it: exit status 2, a message naming
    where it looked (not a traceback)."""
    libdir = tmp_path / "lib"
    libdir.mkdir()
    os.symlink(os.path.abspath(portssm.library_path()), libdir / "libportssm.so")
    env = dict(os.environ, PORTSSM_LIBRARY_DIR=str(libdir))
    r = subprocess.run([sys.executable, "-m", "portssm", "info"], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 2
    assert "the portssm command is not beside the library" in r.stderr
    assert str(tmp_path / "bin" / "portssm") in r.stderr


def test_build_info_says_what_each_module_is():
    info = portssm.build_info()
    assert info["version"] == portssm.library_version()
    assert set(info["modules"]) == {"cuda", "hip"}
    for vendor, what in info["modules"].items():
        module = os.path.join(os.path.dirname(portssm.library_path()), "libportssm_%s.so" % vendor)
        if what.startswith("skipped: "):
            assert len(what) > len("skipped: ") + 10, what  # a reason, not just the word
            assert not os.path.exists(module), (module, what)
        else:  # the targets it was built for
            assert os.path.exists(module), (module, what)


def test_probe_gives_the_build_reason_for_a_skipped_module():
    for vendor, what in portssm.build_info()["modules"].items():
        if not what.startswith("skipped: "):
            continue
        usable, count, reason = portssm.probe(vendor)
        assert not usable and count == 0
        assert reason.endswith("the build of this library skipped the module: "
                               + what[len("skipped: "):]), reason


def _installed():
    """The package as pip installed it (not python/src with PORTSSM_LIBRARY_DIR)."""
    return ("PORTSSM_LIBRARY_DIR" not in os.environ and
            os.path.dirname(portssm.library_path()) ==
            os.path.join(os.path.dirname(portssm.__file__), "lib"))


@pytest.mark.skipif(not _installed(), reason="runs against an installed wheel only "
                    "(this run uses a build tree: PORTSSM_LIBRARY_DIR)")
def test_console_script_runs_the_command():
    script = os.path.join(os.path.dirname(sys.executable), "portssm")
    assert os.access(script, os.X_OK), "the wheel installs no `portssm` console script"
    r = _run("--version", cmd=[script])
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("portssm %s (library %s)" % (portssm.__version__,
                                                           portssm.library_version()))


@pytest.mark.skipif(not _installed(), reason="runs against an installed wheel only "
                    "(this run uses a build tree: PORTSSM_LIBRARY_DIR)")
def test_wheel_holds_one_copy_of_the_library():
    libdir = os.path.dirname(portssm.library_path())
    copies = sorted(f for f in os.listdir(libdir) if f.startswith("libportssm.so"))
    assert copies == ["libportssm.so"], copies
