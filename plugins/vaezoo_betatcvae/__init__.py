"""beta-TCVAE (Chen et al., 2018) and beta-VAE (Higgins et al., 2017)."""
