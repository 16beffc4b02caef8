"""What gcloud prints, as its own properties shape it, read as gcloud reads them: a flag, then the CLOUDSDK_CORE_*
environment variable (the fake has no configuration files, whose values these outrank).

Checked against gcloud 528 (googlecloudsdk/core/log.py, and the real gcloud run with these set):
- core/user_output_enabled=false drops all it prints on stdout (a `--format=json` list prints nothing, exit 0)
  and its status lines on stderr ("Created [...]"), not its log records (ERROR:, WARNING:);
- core/verbosity drops the records below it (default warning: `error` hides "List results may be incomplete");
- core/show_structured_logs=always prints each record as one JSON line, and so does "log" where stderr is not a
  terminal (the fake's never is; "terminal": only to a terminal);
- core/console_log_format=detailed starts each record with its time ("2026-12-05 10:37:53,841 ERROR: ...");
- a boolean is true for 1, true, on, yes, y (any case, no spaces), its default for none, false for anything else.
The fake tells a record from a status line by its first line: what follows an ERROR: or WARNING: line up to the
next record is taken as the record's (its handlers print no status line after a record).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50, "none": 100}
RECORDS = {"ERROR: ": "ERROR", "WARNING: ": "WARNING"}
TRUE = ("1", "true", "on", "yes", "y")


@dataclass(frozen=True)
class Shown:
    output: bool = True
    verbosity: int = LEVELS["warning"]
    structured: bool = False
    detailed: bool = False

    @classmethod
    def read(cls, argv: list[str], environ: Mapping[str, str]) -> Shown:
        enabled = environ.get("CLOUDSDK_CORE_USER_OUTPUT_ENABLED", "none").lower()
        output = enabled == "none" or enabled in TRUE
        verbosity = environ.get("CLOUDSDK_CORE_VERBOSITY", "warning").strip().lower()
        for arg in argv:
            if arg.startswith("--verbosity="):
                verbosity = arg.split("=", 1)[1].lower()
            elif arg in ("--user-output-enabled", "--no-user-output-enabled"):
                output = arg == "--user-output-enabled"
        structured = environ.get("CLOUDSDK_CORE_SHOW_STRUCTURED_LOGS", "never") in ("always", "log")
        detailed = environ.get("CLOUDSDK_CORE_CONSOLE_LOG_FORMAT", "standard") == "detailed"
        return cls(output, LEVELS.get(verbosity, LEVELS["warning"]), structured, detailed)

    def shape(self, stdout: str, stderr: str) -> tuple[str, str]:
        """What reaches the terminal of what the command would print with gcloud's defaults."""
        kept: list[str] = []
        record: tuple[str, list[str]] | None = None  # (level, lines): a record goes on to the next one

        def close() -> None:
            if record is None:
                return
            level, lines = record
            if LEVELS[level.lower()] < self.verbosity:
                return
            if not self.structured:
                when = time.strftime("%Y-%m-%d %H:%M:%S,000 ", time.localtime()) if self.detailed else ""
                kept.extend([when + lines[0], *lines[1:]])
                return
            message = "\n".join([lines[0].split(": ", 1)[1], *lines[1:]]).rstrip("\n")
            kept.append(json.dumps({"version": "0.0.1", "verbosity": level,
                                    "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
                                    "message": message}))

        for line in stderr.splitlines():
            level = next((name for prefix, name in RECORDS.items() if line.startswith(prefix)), None)
            if level is not None:
                close()
                record = (level, [line])
            elif record is not None:
                record[1].append(line)
            elif self.output:  # a status line
                kept.append(line)
        close()
        return (stdout if self.output else ""), "".join(line + "\n" for line in kept)
