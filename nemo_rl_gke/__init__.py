"""Invoke tasks that take a Google Cloud project to a NeMo RL GRPO run on GKE, and back to nothing."""
