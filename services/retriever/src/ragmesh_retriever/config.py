"""Retriever settings, read once from the environment."""
from __future__ import annotations

from dataclasses import dataclass

from ragmesh_common.config import ConfigError, env_float, env_int, env_opt, env_str

# Defaults chosen by the benchmarks, the same for every dataset (bench/README.md): the hybrid weight of the
# vector leg (`make bench-retrieval`'s alpha sweep: 0.4 led on SciFact and SQuAD and tied HotpotQA Recall@5;
# 0.3 was 0.005 ahead on HotpotQA Recall@2 and behind on the rest), and the
# BM25 weight of a term occurrence in a chunk's title or section path (`make bench-sweep`: 1 = counted like
# body text; 3 led the hybrid metrics on SciFact and HotpotQA and left SQuAD unchanged).
ALPHA = 0.4
HEADING_WEIGHT = 3.0
# BM25 k1 and b: Anserini's defaults. A sweep of five pairs (bench/results/sweep-bm25.json) moved SciFact's hybrid
# by at most 0.005 nDCG@10, and these led SQuAD's hybrid (0.9034 against 0.8965-0.9006).
BM25_K1 = 0.9
BM25_B = 0.4


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    database_url: str          # the application role (no superuser, no BYPASSRLS)
    backend: str               # pgvector | weaviate
    alpha: float
    bm25_k1: float
    bm25_b: float
    bm25_heading_weight: float  # an occurrence in the title or section path counts this many times
    bm25_postings_per_term: int  # impact-ordered postings read per query term (bounded lexical work)
    bm25_document_first_max_docs: int  # up to this many readable documents: postings by document
    candidates: int            # per-leg candidate pool before fusion
    text_search_config: str
    statement_timeout_ms: int
    pool_size: int
    ef_search: int
    embedder_addr: str | None  # for queries sent without a vector (embed_query)
    embed_timeout_ms: int
    weaviate_url: str | None
    weaviate_grpc_port: int
    weaviate_api_key: str | None
    weaviate_collection: str
    stuck_after_seconds: float = 900.0  # ListProblemDocuments: a non-terminal status older than this is stuck

    @classmethod
    def defaults(cls, database_url: str, **overrides: object) -> Settings:
        """The documented defaults (as from an empty environment) with overrides; for tools and tests."""
        values: dict[str, object] = dict(
            host="127.0.0.1", port=0, database_url=database_url, backend="pgvector", alpha=ALPHA, bm25_k1=BM25_K1,
            bm25_b=BM25_B, bm25_heading_weight=HEADING_WEIGHT, bm25_postings_per_term=2000,
            bm25_document_first_max_docs=200, candidates=100, text_search_config="english", statement_timeout_ms=10000, pool_size=8,
            ef_search=100, embedder_addr=None, embed_timeout_ms=5000, weaviate_url=None, weaviate_grpc_port=50051, weaviate_api_key=None,
            weaviate_collection="RagmeshChunk",
        )
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls) -> Settings:
        backend = env_str("RETRIEVER_BACKEND", "pgvector")
        if backend not in ("pgvector", "weaviate"):
            raise ConfigError(f"RETRIEVER_BACKEND must be 'pgvector' or 'weaviate', got {backend!r}")
        weaviate_url = env_opt("WEAVIATE_URL")
        if backend == "weaviate" and not weaviate_url:
            raise ConfigError("RETRIEVER_BACKEND=weaviate needs WEAVIATE_URL (e.g. http://weaviate:8080)")
        alpha = env_float("RETRIEVER_ALPHA", ALPHA)
        if not 0 <= alpha <= 1:
            raise ConfigError(f"RETRIEVER_ALPHA must be within [0, 1], got {alpha}")
        heading_weight = env_float("RETRIEVER_BM25_HEADING_WEIGHT", HEADING_WEIGHT)
        if not 0 <= heading_weight <= 100:
            raise ConfigError(f"RETRIEVER_BM25_HEADING_WEIGHT must be within [0, 100], got {heading_weight}")
        postings_per_term = env_int("RETRIEVER_BM25_POSTINGS_PER_TERM", 2000)
        if postings_per_term < 1:
            raise ConfigError(f"RETRIEVER_BM25_POSTINGS_PER_TERM must be at least 1, got {postings_per_term}")
        return cls(
            host=env_str("RETRIEVER_HOST", "127.0.0.1"),
            port=env_int("RETRIEVER_PORT", 50053),
            database_url=env_str("RETRIEVER_DATABASE_URL"),
            backend=backend,
            alpha=alpha,
            bm25_k1=env_float("RETRIEVER_BM25_K1", BM25_K1),
            bm25_b=env_float("RETRIEVER_BM25_B", BM25_B),
            bm25_heading_weight=heading_weight,
            bm25_postings_per_term=postings_per_term,
            bm25_document_first_max_docs=env_int("RETRIEVER_BM25_DOCUMENT_FIRST_MAX_DOCS", 200),
            candidates=env_int("RETRIEVER_CANDIDATES", 100),
            text_search_config=env_str("RETRIEVER_TEXT_SEARCH_CONFIG", "english"),
            statement_timeout_ms=env_int("RETRIEVER_STATEMENT_TIMEOUT_MS", 10000),
            pool_size=env_int("RETRIEVER_POOL_SIZE", 8),
            ef_search=env_int("RETRIEVER_HNSW_EF_SEARCH", 100),
            embedder_addr=env_opt("EMBEDDER_ADDR"),
            embed_timeout_ms=env_int("RETRIEVER_EMBED_TIMEOUT_MS", 5000),
            weaviate_url=weaviate_url,
            weaviate_grpc_port=env_int("WEAVIATE_GRPC_PORT", 50051),
            weaviate_api_key=env_opt("WEAVIATE_API_KEY"),
            weaviate_collection=env_str("WEAVIATE_COLLECTION", "RagmeshChunk"),
            stuck_after_seconds=stuck_after_seconds(),
        )


def stuck_after_seconds() -> float:
    value = env_float("RETRIEVER_STUCK_AFTER_SECONDS", 900.0)
    if value <= 0:
        raise ConfigError(f"RETRIEVER_STUCK_AFTER_SECONDS must be positive, got {value}")
    return value
