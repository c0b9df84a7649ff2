"""Entry point: python -m ragmesh_graph."""

from ragmesh_common.server import run_service
from ragmesh_graph.config import Settings
from ragmesh_graph.server import build_service

if __name__ == "__main__":
    run_service("graph", Settings.from_env, build_service)
