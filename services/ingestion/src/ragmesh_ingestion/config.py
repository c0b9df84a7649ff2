"""Ingestion worker settings, read once from the environment (fail fast, naming the variable).

The worker reads the same variables as the gateway for what they share (the service addresses, REDIS_URL,
GATEWAY_GRAPH_ENABLED: one switch turns the graph off for chat and ingestion alike).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ragmesh_common.config import env_bool, env_str


@dataclass(frozen=True)
class Deadlines:
    """Per-hop gRPC deadlines in seconds."""
    embed: float = 10.0      # per batch: six times this (a batch is up to 64 chunks, not one query)
    parse: float = 300.0
    index: float = 120.0


@dataclass(frozen=True)
class Settings:
    parser_addr: str
    embedder_addr: str
    retriever_addr: str
    graph_addr: str
    redis_url: str
    graph_enabled: bool = True
    deadlines: Deadlines = field(default_factory=Deadlines)

    @classmethod
    def from_env(cls) -> Settings:
        return cls(
            parser_addr=env_str("PARSER_ADDR"),
            embedder_addr=env_str("EMBEDDER_ADDR"),
            retriever_addr=env_str("RETRIEVER_ADDR"),
            graph_addr=env_str("GRAPH_ADDR"),
            redis_url=env_str("REDIS_URL"),
            graph_enabled=env_bool("GATEWAY_GRAPH_ENABLED", True),
        )
