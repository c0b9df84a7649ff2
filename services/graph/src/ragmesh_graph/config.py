"""Graph settings, read once from the environment."""
from __future__ import annotations

from dataclasses import dataclass, field

from ragmesh_common.config import ConfigError, env_float, env_int, env_str


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    neo4j_uri: str
    neo4j_user: str
    neo4j_password: str = field(repr=False)  # kept out of logs
    neo4j_database: str = "ragmesh"
    query_timeout_seconds: float = 10.0
    max_entities_per_chunk: int = 25
    # The catalogue (retriever) that decides which documents a caller may read or owns.
    retriever_addr: str = ""
    access_timeout_seconds: float = 5.0
    access_cache_seconds: float = 5.0

    @classmethod
    def from_env(cls) -> Settings:
        settings = cls(
            host=env_str("GRAPH_HOST", "127.0.0.1"),
            port=env_int("GRAPH_PORT", 50055),
            neo4j_uri=env_str("NEO4J_URI"),
            # "root" is ArcadeDB's administrator; a Neo4j deployment sets NEO4J_USER (usually "neo4j").
            neo4j_user=env_str("NEO4J_USER", "root"),
            neo4j_password=env_str("NEO4J_PASSWORD"),
            neo4j_database=env_str("NEO4J_DATABASE", "ragmesh"),
            query_timeout_seconds=env_float("GRAPH_QUERY_TIMEOUT_SECONDS", 10.0),
            max_entities_per_chunk=env_int("GRAPH_MAX_ENTITIES_PER_CHUNK", 25),
            retriever_addr=env_str("RETRIEVER_ADDR"),
            access_timeout_seconds=env_float("GRAPH_ACCESS_TIMEOUT_SECONDS", 5.0),
            access_cache_seconds=env_float("GRAPH_ACCESS_CACHE_SECONDS", 5.0),
        )
        if not settings.neo4j_uri.startswith(("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://",
                                              "neo4j+ssc://")):
            raise ConfigError(f"NEO4J_URI must be a bolt:// or neo4j:// URI, got {settings.neo4j_uri!r}")
        if settings.query_timeout_seconds <= 0:
            raise ConfigError(f"GRAPH_QUERY_TIMEOUT_SECONDS must be positive, got {settings.query_timeout_seconds}")
        if settings.max_entities_per_chunk < 1:
            raise ConfigError(f"GRAPH_MAX_ENTITIES_PER_CHUNK must be at least 1, got {settings.max_entities_per_chunk}")
        if settings.access_timeout_seconds <= 0:
            raise ConfigError(f"GRAPH_ACCESS_TIMEOUT_SECONDS must be positive, got {settings.access_timeout_seconds}")
        if settings.access_cache_seconds < 0:
            raise ConfigError(f"GRAPH_ACCESS_CACHE_SECONDS must be >= 0, got {settings.access_cache_seconds}")
        return settings
