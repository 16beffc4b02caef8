"""Doctor's web and credential probes on the fake cloud: `NRG_DOCTOR_PROBES=fakecloud.doctor_probes:probes`
(with tests/fakecloud on PYTHONPATH). The real probes would reach raw.githubusercontent.com, huggingface.co
and Google's token endpoint; tests never touch the network.

Answers, as the real services give them:
- raw.githubusercontent.com: 200 for a manifest path that exists at a commit we checked in the real repository
  (FACTS §7: both installer files exist at 2da1c92… and 155bfa49…), 404 ("404: Not Found") for anything else;
  64f0eeb…, the tutorial's pin, is in no branch we could see, so it answers 404 here.
- huggingface.co/api/whoami-v2: 200 with the user for a token that starts with "hf_", 401 otherwise.
- huggingface.co/MODEL/resolve/main/config.json: 401 for a token that does not start with "hf_" (the hub refuses
  an invalid token before anything else, even for a public model). Without a token: 200 for a public model, 401
  for a gated one (GATED) and for one the hub does not have (it does not tell a private or missing repository
  from a gated one to a stranger). With a token: 404 for a model the hub does not have, else 200 (a test plants
  403 for a licence not accepted). The fake knows the models of hf_cache.DOWNLOAD_SECONDS.
- Application Default Credentials: found, unless the test says otherwise.
Tests shape them through state kind "web", key = the URL ({"status": 503} or {"unreachable": "reason"}) and
kind "doctor", key "settings", field "adc": false.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RAW = "https://raw.githubusercontent.com/GoogleCloudPlatform/container-engine-accelerators/"
# Commits of container-engine-accelerators master at which both installer manifests exist (checked with git).
COMMITS_WITH_BOTH = {"2da1c92ff7bd772a2c833710bb6c21dcfe6dfaae", "155bfa49b7459a55c2352495d3eeb46a55637be6"}
INSTALLER_PATHS = {"gpudirect-rdma/nccl-rdma-installer.yaml", "gpudirect-rdma/nccl-rdma-installer-autopilot.yaml"}
WHOAMI = "https://huggingface.co/api/whoami-v2"
HUB, MODEL_FILE = "https://huggingface.co/", "/resolve/main/config.json"
GATED = {"google/gemma-3-27b-it"}  # as on the hub: Gemma's licence must be accepted
ADC_MISSING = ("DefaultCredentialsError: Your default credentials were not found. To set up Application Default "
               "Credentials, see https://cloud.google.com/docs/authentication/external/set-up-adc for more "
               "information.")


def _state() -> dict[str, Any]:
    path = Path(os.environ.get("FAKECLOUD_STATE", "")) / "resources.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _log(url: str, headers: Mapping[str, str]) -> None:
    """What was asked (never a header's value), for the tests' secret scans and assertions."""
    root = os.environ.get("FAKECLOUD_STATE")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
        with open(Path(root) / "web.jsonl", "a") as log:
            log.write(json.dumps({"url": url, "headers": sorted(headers)}) + "\n")


def http_get(url: str, headers: Mapping[str, str]) -> Any:
    from nemo_rl_gke.readiness import WebAnswer

    _log(url, headers)
    shaped = _state().get("web", {}).get(url)
    if shaped is not None:
        if "unreachable" in shaped:
            return WebAnswer(None, "", shaped["unreachable"])
        return WebAnswer(int(shaped["status"]), shaped.get("body", ""), shaped.get("reason", ""))
    if url.startswith(RAW):
        commit, _, path = url[len(RAW):].partition("/")
        if commit in COMMITS_WITH_BOTH and path in INSTALLER_PATHS:
            return WebAnswer(200, "apiVersion: apps/v1\nkind: DaemonSet\n")
        return WebAnswer(404, "404: Not Found", "Not Found")
    if url == WHOAMI:
        token = headers.get("Authorization", "").removeprefix("Bearer ")
        if token.startswith("hf_"):
            body = {"type": "user", "name": "fake-tester", "auth": {"accessToken": {"displayName": "ci",
                                                                                   "role": "read"}}}
            return WebAnswer(200, json.dumps(body))
        return WebAnswer(401, '{"error":"Invalid credentials in Authorization header"}', "Unauthorized")
    if url.startswith(HUB) and url.endswith(MODEL_FILE):
        from .hf_cache import DOWNLOAD_SECONDS

        model = url[len(HUB):-len(MODEL_FILE)]
        sent = "Authorization" in headers
        if sent and not headers["Authorization"].removeprefix("Bearer ").startswith("hf_"):
            return WebAnswer(401, '{"error":"Invalid credentials in Authorization header"}', "Unauthorized")
        if model not in DOWNLOAD_SECONDS and sent:
            return WebAnswer(404, "Repository not found", "Not Found")
        if not sent and (model in GATED or model not in DOWNLOAD_SECONDS):
            return WebAnswer(401, f"Access to model {model} is restricted. You must have access to it and be "
                                  f"authenticated to access it. Please log in.", "Unauthorized")
        return WebAnswer(200, json.dumps({"architectures": ["FakeForCausalLM"]}))
    return WebAnswer(None, "", f"fakecloud has no answer for {url}")


def adc() -> Any:
    from nemo_rl_gke.readiness import AdcAnswer

    settings = _state().get("doctor", {}).get("settings", {}) or {}
    if settings.get("adc", True) is False:
        return AdcAnswer(False, ADC_MISSING)
    return AdcAnswer(True, "tester@example.com")


def probes() -> Any:
    from nemo_rl_gke.tasks.checkup import Probes

    return Probes(http_get=http_get, adc=adc)
