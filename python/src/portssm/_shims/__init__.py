"""The shim packages that portssm's import aliases load under the public names `causal_conv1d`
and `mamba_ssm` (see _portssm_aliases, beside the portssm package).  They are thin re-exports of
portssm.torch; never import them as portssm._shims.*: their modules import each other by the
public names."""
