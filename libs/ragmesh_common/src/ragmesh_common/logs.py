"""One logging setup for every process: level from LOG_LEVEL, one line per record."""

from __future__ import annotations

import logging
import os


def setup_logging(service: str) -> None:
    level = os.environ.get("LOG_LEVEL", "INFO").upper()
    logging.basicConfig(
        level=level,
        format=f"%(asctime)s %(levelname)s {service} %(name)s: %(message)s",
    )
