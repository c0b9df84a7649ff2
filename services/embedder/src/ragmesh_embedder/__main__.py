"""Entry point: python -m ragmesh_embedder."""

import os

from ragmesh_common.server import run_service
from ragmesh_embedder.config import Settings
from ragmesh_embedder.server import build_service

if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run_service("embedder", Settings.from_env, lambda settings: build_service(settings)[0])
