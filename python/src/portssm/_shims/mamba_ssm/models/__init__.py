"""mamba_ssm.models on portssm's models (portssm.torch.models): config_mamba,
mixer_seq_simple."""
