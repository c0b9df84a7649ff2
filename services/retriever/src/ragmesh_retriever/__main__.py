"""Entry point: python -m ragmesh_retriever."""

from ragmesh_common.server import run_service
from ragmesh_retriever.config import Settings
from ragmesh_retriever.server import build_service

if __name__ == "__main__":
    run_service("retriever", Settings.from_env, build_service, instrument_psycopg=True)
