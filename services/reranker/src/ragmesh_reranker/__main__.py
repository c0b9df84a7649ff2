"""Entry point: python -m ragmesh_reranker."""

import os

from ragmesh_common.server import run_service
from ragmesh_reranker.config import Settings
from ragmesh_reranker.server import build_service

if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    run_service("reranker", Settings.from_env, lambda settings: build_service(settings)[0])
