"""Can the pods' Hugging Face token download this gated model? Asked before the driver starts, so a missing
licence acceptance fails in seconds with the licence URL instead of minutes into the run.

    uv run python check_access.py REPO_ID        (inside the Ray head pod; HF_TOKEN comes from the Secret)

Uses huggingface_hub.auth_check (v0.25+; the image pins 0.34.4), which downloads nothing. Exit 4 when the
token has no access; a network error is reported and does not stop the run (the download may still work).
"""

from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    repo = argv[0]
    url = f"https://huggingface.co/{repo}"
    if not (os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")):
        print(f"error: {repo} is gated and the Ray pods have no HF_TOKEN. Accept the licence at {url}, put a "
              f"read token in .env (HF_TOKEN=...), run `invoke storage.create` (it updates the Secret) and "
              f"`invoke ray.deploy` (pods read the Secret when they start); nothing was started.", file=sys.stderr)
        return 4
    from huggingface_hub import auth_check
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError

    try:
        auth_check(repo)
    except GatedRepoError:  # a subclass of RepositoryNotFoundError: first
        print(f"error: the Hugging Face token in the Ray pods has no access to the gated model {repo}. Accept its "
              f"licence at {url} with the token's account (approval can take a while), then submit again; "
              f"nothing was started.", file=sys.stderr)
        return 4
    except RepositoryNotFoundError:
        print(f"error: Hugging Face has no model {repo}, or the pods' token cannot see it: check model.name in "
              f"the job file and the token ({url}); nothing was started.", file=sys.stderr)
        return 4
    except Exception as exc:  # noqa: BLE001 - network, proxy: the download may still work, say so and go on
        print(f"warning: could not check access to {repo} ({type(exc).__name__}); starting anyway",
              file=sys.stderr)
        return 0
    print(f"access to {repo}: granted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
