"""mamba_ssm.utils on portssm: generation, hf, torch."""
