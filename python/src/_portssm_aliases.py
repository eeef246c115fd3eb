"""portssm's import aliases: `import causal_conv1d` and `import mamba_ssm` give portssm-backed
modules wherever the real packages are not installed.

A meta-path finder, appended LAST to sys.meta_path, answers for the two top-level names only,
and only after every other finder has said it has no such module: a real causal-conv1d or
mamba-ssm (site-packages, an editable install, anything on sys.path) always wins.  It then loads
portssm's shim package (portssm/_shims/<name>/, beside this file) under the public name, so
that its submodules (mamba_ssm.ops.triton.ssd_combined, ...) resolve through the package's
__path__ like any package's.  `mamba_ssm.__file__` says where a module came from.

While an alias is in effect the finder also answers importlib.metadata for the distributions
"causal_conv1d" and "mamba_ssm" (which transformers and others read to decide whether the
packages are there): version "<reference version>+portssm<portssm version>", with a summary
saying that portssm provides it.  Never while a real distribution of that name exists, and only
to a lookup over the interpreter's own sys.path (importlib.metadata.version(name) and the like):
installers, which search directories they name, do not see the stand-ins, so that pip neither
lists them nor calls the real package already installed.

Installed, the wheel's portssm-aliases.pth runs install() at interpreter start; from a build
tree (no .pth processing) portssm.enable_import_aliases() does.  PORTSSM_NO_ALIAS=1 in the
environment turns the aliases off (install() then does nothing, and a finder already installed
answers for nothing).

This module runs at every interpreter start: it imports nothing that is not already loaded then
(sys, os), and defers everything else to the moment an alias is asked for.
"""

import os
import sys

# portssm's version, for the distributions' version strings without importing portssm (which
# loads the library); the tests hold it equal to portssm.__version__.
PORTSSM_VERSION = "0.1.0"

# import name -> (the reference release whose names the shim provides, distribution summary)
ALIASES = {
    "causal_conv1d": ("1.7.0", "causal-conv1d's interface, provided by portssm"),
    "mamba_ssm": ("2.3.2.post1", "mamba-ssm's interface, provided by portssm"),
}

OFF_SWITCH = "PORTSSM_NO_ALIAS"
HOME = os.path.dirname(os.path.abspath(__file__))  # where the portssm package lives too
SHIMS = os.path.join(HOME, "portssm", "_shims")


def disabled():
    """Whether the environment turns the aliases off (PORTSSM_NO_ALIAS set, and not "0")."""
    return os.environ.get(OFF_SWITCH, "") not in ("", "0")


def _normalize(name):
    # PEP 503: runs of "-", "_" and "." are one "-", case is not significant
    out = []
    for ch in name.lower():
        if ch in "-_.":
            if not out or out[-1] != "-":
                out.append("-")
        else:
            out.append(ch)
    return "".join(out)


class ImportAliasFinder:
    """The meta-path finder of the aliases (see the module docstring)."""

    def find_spec(self, fullname, path=None, target=None):
        if path is not None or fullname not in ALIASES or disabled():
            return None
        if self._found_elsewhere(fullname):
            return None
        package = os.path.join(SHIMS, fullname)
        init = os.path.join(package, "__init__.py")
        if not os.path.isfile(init):
            return None
        import importlib.util

        return importlib.util.spec_from_file_location(fullname, init,
                                                      submodule_search_locations=[package])

    def _found_elsewhere(self, fullname):
        """Whether a finder after this one in sys.meta_path has the module (one appended after
        this was, such as an editable install's, must win too; those before it have already
        said no by the time find_spec is asked)."""
        try:
            later = sys.meta_path[sys.meta_path.index(self) + 1:]
        except ValueError:
            later = list(sys.meta_path)
        return _any_finder_has(later, fullname)

    def _real_module_exists(self, fullname):
        return _any_finder_has(sys.meta_path, fullname)

    def find_distributions(self, context=None):
        """importlib.metadata's hook: portssm's stand-in distribution of each aliased name that
        context asks for (all of them for no name), where no real one exists."""
        if disabled():
            return iter(())
        import importlib.metadata as metadata

        if context is None:
            context = metadata.DistributionFinder.Context()
        wanted = getattr(context, "name", None)
        if getattr(context, "path", sys.path) is not sys.path:
            # A search of given directories is an installer's (pip lists each sys.path entry
            # this way): it must not take the stand-ins for installed packages, or
            # `pip install mamba-ssm` would call the real package already satisfied.
            return iter(())
        found = []
        for module, (version, summary) in ALIASES.items():
            if wanted is not None and _normalize(wanted) != _normalize(module):
                continue
            if self._real_module_exists(module) or _real_distribution(metadata, module):
                continue
            found.append(_stand_in_distribution(metadata, module, version, summary))
        return iter(found)

    def invalidate_caches(self):
        pass


def _any_finder_has(finders, fullname):
    """Whether any finder but the aliases' own finds fullname.  A finder that raises counts as
    not having it: pip from 26 on puts a finder in sys.meta_path during `pip install` that raises
    for every module not yet imported, and pip reads importlib.metadata meanwhile (which asks
    find_distributions above); that must not fail the user's pip."""
    for finder in finders:
        if isinstance(finder, ImportAliasFinder):
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        try:
            if find(fullname, None) is not None:
                return True
        except Exception:
            continue
    return False


def _real_distribution(metadata, module):
    try:
        from importlib.machinery import PathFinder

        ctx = metadata.DistributionFinder.Context(name=module)
        return next(iter(PathFinder.find_distributions(ctx)), None) is not None
    except Exception:  # an unreadable site-packages entry: no real distribution known
        return False


def _stand_in_distribution(metadata, module, version, summary):
    full_version = "%s+portssm%s" % (version, PORTSSM_VERSION)
    files = {
        "METADATA": "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s %s\n"
                    "Home-page: https://pypi.org/project/portssm/\n"
                    % (module, full_version, summary, PORTSSM_VERSION),
        "top_level.txt": module + "\n",
        "INSTALLER": "portssm\n",
    }

    class PortssmStandIn(metadata.Distribution):
        """A distribution that portssm's import alias stands for (not installed by pip)."""

        def read_text(self, filename):
            return files.get(filename)

        def locate_file(self, path):
            return os.path.join(SHIMS, module, str(path))

    return PortssmStandIn()


def finder():
    """The finder in sys.meta_path, or None."""
    for f in sys.meta_path:
        if isinstance(f, ImportAliasFinder):
            return f
    return None


def install():
    """Appends the finder to sys.meta_path (once); returns whether aliasing is active, i.e.
    False where PORTSSM_NO_ALIAS turns it off."""
    if disabled():
        return False
    if finder() is None:
        sys.meta_path.append(ImportAliasFinder())
    return True


def uninstall():
    """Removes the finder.  Modules already imported through it stay in sys.modules."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, ImportAliasFinder)]


def aliased(module):
    """Whether the module object (or sys.modules entry name) came from portssm's shims."""
    if isinstance(module, str):
        module = sys.modules.get(module)
    path = getattr(module, "__file__", None) or ""
    return os.path.abspath(path).startswith(SHIMS + os.sep)
