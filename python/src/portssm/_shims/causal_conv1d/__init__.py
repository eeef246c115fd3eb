"""causal-conv1d 1.7.0's import surface, provided by portssm (portssm's import alias: loaded as
`causal_conv1d` where no real causal-conv1d is installed).  The functions are portssm.torch's."""

from _portssm_aliases import ALIASES, PORTSSM_VERSION

__version__ = "%s+portssm%s" % (ALIASES["causal_conv1d"][0], PORTSSM_VERSION)

from causal_conv1d.causal_conv1d_interface import causal_conv1d_fn, causal_conv1d_update  # noqa: E402

__all__ = ["causal_conv1d_fn", "causal_conv1d_update", "__version__"]
