"""`python -m portssm <command>` and the `portssm` console script: the C tool's commands
(info, doctor, bench; `--help` lists them) run against the library this package loads.

The command itself is tools/portssm, installed in the wheel as portssm/bin/portssm beside
portssm/lib (it finds the library through its run path, $ORIGIN/../lib).  From a CMake build
tree (PORTSSM_LIBRARY_DIR=<build>/src) it is <build>/portssm.  Before `info` and `doctor`, the
package's own lines: where it is, and what the build made of each GPU module
(portssm.build_info(): the targets, or why the build skipped it); the command's own lines
follow, the library it loaded among them.
"""

from __future__ import annotations

import os
import sys


def tool_path() -> str:
    """The portssm command that belongs to the library this package loads."""
    from ._library import library_path

    libdir = os.path.dirname(library_path())
    candidates = [
        os.path.join(libdir, os.pardir, "bin", "portssm"),  # the wheel, an install tree
        os.path.join(libdir, os.pardir, "portssm"),         # a CMake build tree (build/src)
    ]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return os.path.abspath(path)
    raise FileNotFoundError(
        "portssm: the portssm command is not beside the library %s (looked for %s); build it "
        "with the library (tools/portssm: `cmake --build build`), or reinstall the package"
        % (library_path(), ", ".join(os.path.abspath(p) for p in candidates)))


def _package_lines() -> str:
    import portssm

    lines = ["package   portssm %s (%s)" % (portssm.__version__, os.path.dirname(portssm.__file__))]
    info = portssm.build_info()
    for vendor, what in sorted(info.get("modules", {}).items()):
        lines.append("build     %s module: %s" % (vendor, what))
    if not info:
        lines.append("build     (no portssm_build_info.json beside the library: built before "
                     "it was recorded)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        tool = tool_path()
    except (FileNotFoundError, ImportError) as exc:
        sys.stderr.write("%s\n" % exc)
        return 2
    if args and args[0] in ("info", "doctor"):
        sys.stdout.write(_package_lines() + "\n")
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(tool, ["portssm"] + args)  # the command's exit status is ours; no return
    import subprocess  # pragma: no cover - portssm builds for Linux (and macOS) only

    return subprocess.call([tool] + args)  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
