"""Stand-in for `huggingface_hub.auth_check` in the fake pod (no network). The token comes from HF_TOKEN as
in the real library; repos listed in NRG_STANDIN_HF_NO_ACCESS (the fake cloud's FAKECLOUD_HF_NO_ACCESS) are
gated ones the token's account has not been granted; a repo id without an owner does not exist."""

from __future__ import annotations

import os

from .utils import GatedRepoError, RepositoryNotFoundError

__all__ = ["auth_check", "GatedRepoError", "RepositoryNotFoundError"]


def auth_check(repo_id, *, repo_type=None, token=None):
    url = f"https://huggingface.co/api/{repo_type or 'model'}s/{repo_id}/auth-check"
    token = token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    denied = [r for r in os.environ.get("NRG_STANDIN_HF_NO_ACCESS", "").split(",") if r]
    if "/" not in repo_id:
        raise RepositoryNotFoundError(f"404 Client Error. Repository Not Found for url: {url}.")
    if repo_id in denied or not token:
        raise GatedRepoError(f"403 Client Error.\n\nCannot access gated repo for url {url}.")
