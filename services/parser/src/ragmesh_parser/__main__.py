"""Entry point: python -m ragmesh_parser."""

from ragmesh_common.server import run_service
from ragmesh_parser.config import Settings
from ragmesh_parser.server import build_service

if __name__ == "__main__":
    run_service("parser", Settings.from_env, build_service)
