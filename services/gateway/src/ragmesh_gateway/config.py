"""Gateway settings, read once from the environment (fail fast, naming the variable)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ragmesh_common.config import ConfigError, env_bool, env_float, env_int, env_opt, env_str
from ragmesh_gateway.grading import Thresholds


@dataclass(frozen=True)
class Deadlines:
    """Per-hop gRPC deadlines in seconds."""
    guardrail: float = 5.0
    embed: float = 10.0
    retrieve: float = 10.0
    rerank: float = 10.0
    rewrite: float = 8.0     # the answerer's model rewriting a follow-up the rules could not resolve
    graph: float = 5.0
    answer: float = 180.0
    parse: float = 300.0
    index: float = 120.0


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    parser_addr: str
    embedder_addr: str
    retriever_addr: str
    reranker_addr: str
    graph_addr: str
    answerer_addr: str
    redis_url: str
    traces_dsn: str | None
    upload_dir: Path
    jwt_secret: str | None
    jwt_issuer: str | None
    jwt_audience: str | None
    jwks_url: str | None
    max_upload_bytes: int = 50 * 1024 * 1024
    max_json_bytes: int = 1024 * 1024     # a chat or search request body (413 beyond)
    max_header_bytes: int = 16 * 1024     # all request headers together (431 beyond; h11's limit too)
    candidates: int = 30
    min_relevance: float = 0.25
    rate_limit_per_minute: int = 60
    token_cache_size: int = 4096
    token_cache_seconds: float = 300.0
    graph_enabled: bool = True
    deadlines: Deadlines = field(default_factory=Deadlines)
    relevance: Thresholds = field(default_factory=Thresholds)
    corrective_alpha: float = 0.3
    corrective_candidates: int = 60

    @classmethod
    def from_env(cls) -> Settings:
        secret, issuer, jwks = env_opt("GATEWAY_JWT_SECRET"), env_opt("GATEWAY_JWT_ISSUER"), env_opt("GATEWAY_JWKS_URL")
        if not secret and not (issuer and jwks):
            raise ConfigError("set GATEWAY_JWT_ISSUER and GATEWAY_JWKS_URL (production) "
                              "or GATEWAY_JWT_SECRET (local development)")
        return cls(
            host=env_str("GATEWAY_HOST", "127.0.0.1"),
            port=env_int("GATEWAY_PORT", 8080),
            parser_addr=env_str("PARSER_ADDR"),
            embedder_addr=env_str("EMBEDDER_ADDR"),
            retriever_addr=env_str("RETRIEVER_ADDR"),
            reranker_addr=env_str("RERANKER_ADDR"),
            graph_addr=env_str("GRAPH_ADDR"),
            answerer_addr=env_str("ANSWERER_ADDR"),
            redis_url=env_str("REDIS_URL"),
            traces_dsn=env_opt("GATEWAY_TRACES_DSN"),
            upload_dir=Path(env_str("GATEWAY_UPLOAD_DIR")),
            jwt_secret=secret,
            jwt_issuer=issuer,
            jwt_audience=env_opt("GATEWAY_JWT_AUDIENCE"),
            jwks_url=jwks,
            max_upload_bytes=env_int("GATEWAY_MAX_UPLOAD_BYTES", 50 * 1024 * 1024),
            max_json_bytes=env_int("GATEWAY_MAX_JSON_BYTES", 1024 * 1024),
            max_header_bytes=env_int("GATEWAY_MAX_HEADER_BYTES", 16 * 1024),
            candidates=env_int("GATEWAY_CANDIDATES", 30),
            min_relevance=env_float("GATEWAY_MIN_RELEVANCE", 0.25),
            rate_limit_per_minute=env_int("GATEWAY_RATE_LIMIT_PER_MINUTE", 60),
            token_cache_size=env_int("GATEWAY_TOKEN_CACHE_SIZE", 4096),
            token_cache_seconds=env_float("GATEWAY_TOKEN_CACHE_SECONDS", 300.0),
            graph_enabled=env_bool("GATEWAY_GRAPH_ENABLED", True),
            deadlines=Deadlines(answer=env_float("GATEWAY_ANSWER_DEADLINE_SECONDS", 180.0),
                                rewrite=env_float("GATEWAY_REWRITE_DEADLINE_SECONDS", 8.0)),
            relevance=Thresholds(
                vector_strong=env_float("GATEWAY_RELEVANCE_VECTOR_STRONG", 0.45),
                vector_weak=env_float("GATEWAY_MIN_RELEVANCE", 0.25),
                lexical_strong=env_float("GATEWAY_RELEVANCE_LEXICAL_STRONG", 0.6),
                lexical_weak=env_float("GATEWAY_RELEVANCE_LEXICAL_WEAK", 0.34),
                rerank_strong=env_float("GATEWAY_RELEVANCE_RERANK_STRONG", 0.5),
                rerank_weak=env_float("GATEWAY_RELEVANCE_RERANK_WEAK", 0.1),
                hybrid_confirm=env_float("GATEWAY_RELEVANCE_HYBRID_CONFIRM", 0.5)),
            corrective_alpha=env_float("GATEWAY_CORRECTIVE_ALPHA", 0.3),
            corrective_candidates=env_int("GATEWAY_CORRECTIVE_CANDIDATES", 60),
        )
