"""portssm's PEP 517 build backend: scikit-build-core's, with two additions.

On Linux without a CUDA toolkit, nvcc comes from PyPI: the hooks get_requires_for_build_wheel
and get_requires_for_build_editable add nvidia-cuda-nvcc (and what it needs) to the build
requirements, and the build hooks point CMake at it (portssm_nvcc.py, which also says how to opt
out).  An sdist compiles nothing, so its requirements are scikit-build-core's alone.

After a wheel is built, the GPU modules the build skipped are reported on the terminal.  pip
shows a build's output only with -v, so CMake's warning ("the cuda module is skipped: nvcc not
found ...") would otherwise reach nobody and the user would learn it from portssm.probe('cuda')
at run time.  The report is read from the wheel itself (portssm/lib/portssm_build_info.json,
written by python/CMakeLists.txt) and written to stderr and, when stderr is captured (pip), to
the controlling terminal (/dev/tty), where there is one.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile

from scikit_build_core import build as _skbuild
from scikit_build_core.build import *  # noqa: F401,F403  (every PEP 517 hook not redefined here)

import portssm_nvcc

_BUILD_INFO = "portssm/lib/portssm_build_info.json"


def _skipped_modules(wheel_path):
    """[(vendor, why)] of the GPU modules the wheel was built without."""
    try:
        with zipfile.ZipFile(wheel_path) as wheel:
            info = json.loads(wheel.read(_BUILD_INFO).decode("utf-8"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        return [("any GPU", "the wheel has no readable %s (%s)" % (_BUILD_INFO, exc))]
    return [(vendor, what[len("skipped: "):]) for vendor, what in sorted(info["modules"].items())
            if what.startswith("skipped: ")]


def _tell(lines):
    text = "".join("portssm: %s\n" % line for line in lines)
    sys.stderr.write(text)
    sys.stderr.flush()
    if sys.stderr.isatty():
        return
    try:  # pip captures stderr; the terminal it runs in is still this process's
        with open("/dev/tty", "w") as tty:
            tty.write(text)
    except OSError:  # no terminal (CI, a service): stderr is all there is
        pass


def _report(wheel_directory, filename):
    skipped = _skipped_modules(os.path.join(wheel_directory, filename))
    # "not requested" is the user's own choice (BACKEND=cpu): nothing to warn about
    loud = [(v, why) for v, why in skipped if not why.startswith("not requested")]
    if loud:
        _tell(["WARNING: %s was built without the %s module: %s" % (filename, v, why)
               for v, why in loud])


def _settings(config_settings):
    """What scikit-build-core gets: portssm's own keys out, PyPI's nvcc in where it is used."""
    settings = dict(portssm_nvcc.strip_setting(config_settings) or {})
    settings.update(portssm_nvcc.cmake_defines(config_settings))
    return settings or None


def get_requires_for_build_wheel(config_settings=None):
    return (_skbuild.get_requires_for_build_wheel(portssm_nvcc.strip_setting(config_settings))
            + portssm_nvcc.requirements(config_settings))


def get_requires_for_build_editable(config_settings=None):
    return (_skbuild.get_requires_for_build_editable(portssm_nvcc.strip_setting(config_settings))
            + portssm_nvcc.requirements(config_settings))


def get_requires_for_build_sdist(config_settings=None):
    return _skbuild.get_requires_for_build_sdist(portssm_nvcc.strip_setting(config_settings))


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _skbuild.prepare_metadata_for_build_wheel(
        metadata_directory, portssm_nvcc.strip_setting(config_settings))


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    return _skbuild.prepare_metadata_for_build_editable(
        metadata_directory, portssm_nvcc.strip_setting(config_settings))


def build_sdist(sdist_directory, config_settings=None):
    return _skbuild.build_sdist(sdist_directory, portssm_nvcc.strip_setting(config_settings))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    filename = _skbuild.build_wheel(wheel_directory, _settings(config_settings),
                                    metadata_directory)
    _report(wheel_directory, filename)
    return filename


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    filename = _skbuild.build_editable(wheel_directory, _settings(config_settings),
                                       metadata_directory)
    _report(wheel_directory, filename)
    return filename
