"""Apply a run's overrides to its recipe chain with NeMo RL's own loader, as the driver does first, and stop in
seconds (exit 2) if Hydra refuses one: a key the recipe chain lacks, `+` on a key it has, a bad value.

    uv run python check_config.py RECIPE OVERRIDES_FILE        (in /opt/nemo-rl, inside the Ray head pod)

job.submit pipes this file into the head pod; it runs before the supervisor starts the driver.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    recipe, overrides_file = argv[0], argv[1]
    with open(overrides_file, encoding="utf-8") as handle:
        overrides = [line for line in handle.read().splitlines() if line]
    from nemo_rl.utils.config import load_config, parse_hydra_overrides

    config = load_config(recipe)
    try:
        parse_hydra_overrides(config, overrides)
    except Exception as exc:  # noqa: BLE001 - NeMo RL wraps every Hydra error in OverridesError
        text = " ".join(str(exc).split())
        print(f"error: NeMo RL v0.5.0 refuses the overrides for {recipe}: {text[:600]}\n"
              f"  Fix the job file or --set (key=value changes a key the recipe has, +key=value adds one); "
              f"nothing was started.", file=sys.stderr)
        return 2
    print(f"overrides checked against {recipe}: {len(overrides)} accepted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
