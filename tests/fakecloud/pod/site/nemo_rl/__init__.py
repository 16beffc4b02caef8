"""Stand-in for the `nemo_rl` package of the image: only `nemo_rl.utils.config` (the config loader)."""
