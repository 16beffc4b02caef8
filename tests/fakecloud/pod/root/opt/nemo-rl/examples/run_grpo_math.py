# Stand-in for NeMo RL v0.5.0's examples/run_grpo_math.py in the fake pod: its presence is what matters
# (the entry point exists in v0.5.0 and not on NeMo RL's main branch). `uv run` (tests/fakecloud/pod/bin/uv)
# runs the stand-in trainer instead of this file.
