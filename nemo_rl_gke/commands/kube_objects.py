"""The Kubernetes objects of the storage layer, built as data: the ServiceAccount (and its namespace), the
Secret with the tokens (only ever sent on kubectl's stdin), and the Lustre PV/PVC rendered from manifests/."""

from __future__ import annotations

import base64
import json
from typing import Any

from .. import names
from ..settings import Settings
from .lustre import volume_handle

_LABELS = {"app.kubernetes.io/managed-by": names.MANAGED_BY}


def service_account(s: Settings) -> list[dict[str, Any]]:
    """The KSA (and its namespace when it is not `default`): the Ray pods' identity on the bucket."""
    docs: list[dict[str, Any]] = []
    if s.NAMESPACE != "default":
        docs.append({"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": s.NAMESPACE, "labels": _LABELS}})
    docs.append({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": s.KSA_NAME, "namespace": s.NAMESPACE,
                              "labels": _LABELS}})
    return docs


def secret_values(s: Settings) -> dict[str, str]:
    return {"HF_TOKEN": s.HF_TOKEN, "WANDB_API_KEY": s.WANDB_API_KEY}


def secret(s: Settings) -> dict[str, Any]:
    """The Secret with the tokens: only ever sent on kubectl's stdin, never printed or written to disk."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": names.SECRET_NAME, "namespace": s.NAMESPACE,
                         "labels": _LABELS},
            "stringData": secret_values(s)}


def secret_matches(s: Settings, get_json: str) -> bool:
    """The Secret in the cluster holds exactly our values (`data` is base64; a fake may keep stringData).

    A Secret in a bad state (a value that is not base64 or not UTF-8, a body that is not JSON) does not match:
    `storage.create` then replaces it, instead of failing on every re-run."""
    import binascii

    try:
        body = json.loads(get_json or "{}")
        found = {k: base64.b64decode(v, validate=True).decode() for k, v in (body.get("data") or {}).items()}
        found.update(body.get("stringData") or {})
    except (ValueError, TypeError, AttributeError, binascii.Error):  # UnicodeDecodeError is a ValueError
        return False
    return found == secret_values(s)


def to_yaml(docs: list[dict[str, Any]]) -> str:
    from ..render import go_yaml

    return "---\n".join(go_yaml(doc) for doc in docs)


def pv_values(s: Settings, ip: str, capacity_gib: int) -> dict[str, object]:
    return {"PV_NAME": names.LUSTRE_PV, "PVC_NAME": names.LUSTRE_PVC, "NAMESPACE": s.NAMESPACE,
            "CAPACITY": f"{capacity_gib}Gi", "VOLUME_HANDLE": volume_handle(s), "LUSTRE_IP": ip,
            "FILESYSTEM": names.LUSTRE_FILESYSTEM}


def pv_pvc_yaml(s: Settings, ip: str, capacity_gib: int) -> tuple[str, str]:
    from .. import render

    values = pv_values(s, ip, capacity_gib)
    pv = render.render_file("lustre-pv.yaml", values)
    pvc = render.render_file("lustre-pvc.yaml", {k: values[k] for k in ("PV_NAME", "PVC_NAME", "NAMESPACE",
                                                                         "CAPACITY")})
    return pv, pvc
