"""Entry point: python -m ragmesh_answerer."""

from ragmesh_answerer.config import Settings
from ragmesh_answerer.llm import chat_model
from ragmesh_answerer.server import build_service
from ragmesh_common.server import GrpcService, run_service


def build(settings: Settings) -> GrpcService:
    return build_service(settings, chat_model(settings))


if __name__ == "__main__":
    run_service("answerer", Settings.from_env, build, instrument_httpx=True)
