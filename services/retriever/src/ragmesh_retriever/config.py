"""Retriever settings, read once from the environment."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from ragmesh_common.config import ConfigError, ServiceSettings, settings_config
from ragmesh_common.text.language import IDENTIFIED_LANGS

# Defaults chosen by the benchmarks, the same for every dataset (the measurements and why: bench/README.md,
# "Why the retriever's defaults"): the hybrid weight of the vector leg, the BM25 weight of a term occurrence in a
# chunk's title or section path, and BM25 k1 and b (Anserini's defaults).
ALPHA = 0.4
HEADING_WEIGHT = 3.0
BM25_K1 = 0.9
BM25_B = 0.4
# Query languages (bench/languages.py, tuned on the even half of its German questions; results in
# bench/results/languages.json): the detection margin of "close" (0.2 to 0.8 tie; 0 and 1 lose), the length of a
# short query, and the alpha of a language the embedder does not cover: 0.4, the plain alpha, won the sweep
# 0 / 0.1 / 0.2 / 0.3 / 0.4 with all-MiniLM-L6-v2 on German (leaning on BM25 lost 0.01-0.04 nDCG@10)
LANGUAGE_MARGIN = 0.5
SHORT_QUERY_WORDS = 6
UNCOVERED_ALPHA = 0.4
VECTOR_EXACT_MAX_CHUNKS = 20000


class Settings(ServiceSettings):
    model_config = settings_config(env_prefix="RETRIEVER_")

    host: str = "127.0.0.1"
    port: int = 50053
    database_url: str = Field(repr=False)  # the application role (no superuser, no BYPASSRLS)
    # signs the identity assertion every transaction hands PostgreSQL (ragmesh_common.rls); the migration's
    # RAGMESH_RLS_KEY, the same secret
    rls_key: str = Field(repr=False, min_length=32)
    backend: Literal["pgvector", "weaviate"] = "pgvector"
    alpha: float = Field(ALPHA, ge=0, le=1)
    bm25_k1: float = BM25_K1
    bm25_b: float = BM25_B
    # an occurrence in the title or section path counts this many times
    bm25_heading_weight: float = Field(HEADING_WEIGHT, ge=0, le=100)
    # impact-ordered postings read per query term (bounded lexical work)
    bm25_postings_per_term: int = Field(2000, ge=1)
    # a less weighted (more common) term reads fewer, in proportion to its idf weight, down to this many (equal
    # to bm25_postings_per_term: every term reads as many); README "Search cost and what a user may read"
    bm25_min_postings_per_term: int = Field(200, ge=1)
    bm25_document_first_max_docs: int = 200  # up to this many readable documents: postings by document
    # a scope searched by ACL (more readable documents than the above) with at most this many ready chunks at
    # the searched levels: the vector leg scores them exactly instead of walking HNSW through the permission
    # filter, which reads ~1/selectivity candidates per kept one (0 = always HNSW); README "Search cost"
    vector_exact_max_chunks: int = Field(VECTOR_EXACT_MAX_CHUNKS, ge=0)
    candidates: int = 100  # per-leg candidate pool before fusion
    # The graph leg's weight in the fusion when a search brings graph scores and no graph_weight of its own (2.0:
    # the best of 0.5 / 1 / 2 with two seed passages on the tuning half of HotpotQA-100, bench/README.md)
    graph_weight: float = Field(2.0, ge=0, le=10)
    text_search_config: str = "english"
    # query languages (analysis.choose_languages): a short query whose language is unclear is searched in the
    # user's language and each of these whose detection is within the margin of the most probable one
    query_languages: str = "en,de,fr"
    language_margin: float = Field(LANGUAGE_MARGIN, ge=0, le=1)
    short_query_words: int = Field(SHORT_QUERY_WORDS, ge=0, le=100)
    # the languages the query embedder was trained for ("*" = all); a query in another leans on BM25: its alpha
    # is at most uncovered_alpha (ranking.language_alpha). The default all-MiniLM-L6-v2 covers English only.
    embedder_languages: str = "en"
    uncovered_alpha: float = Field(UNCOVERED_ALPHA, ge=0, le=1)
    statement_timeout_ms: int = 10000
    pool_size: int = 8
    ef_search: int = Field(100, validation_alias="RETRIEVER_HNSW_EF_SEARCH")
    # for queries sent without a vector (embed_query)
    embedder_addr: str | None = Field(None, validation_alias="EMBEDDER_ADDR")
    embed_timeout_ms: int = 5000
    weaviate_url: str | None = Field(None, validation_alias="WEAVIATE_URL")
    weaviate_grpc_port: int = Field(50051, validation_alias="WEAVIATE_GRPC_PORT")
    weaviate_api_key: str | None = Field(None, validation_alias="WEAVIATE_API_KEY", repr=False)
    weaviate_collection: str = Field("RagmeshChunk", validation_alias="WEAVIATE_COLLECTION")
    # ListProblemDocuments: a non-terminal status older than this is stuck
    stuck_after_seconds: float = Field(900.0, gt=0)

    @model_validator(mode="after")
    def _weaviate_needs_a_url(self) -> Settings:
        if self.backend == "weaviate" and not self.weaviate_url:
            raise ConfigError("RETRIEVER_BACKEND=weaviate needs WEAVIATE_URL (e.g. http://weaviate:8080)")
        return self

    @model_validator(mode="after")
    def _languages_are_known(self) -> Settings:
        unknown = [lang for lang in self.query_language_list if lang not in IDENTIFIED_LANGS]
        if unknown:
            raise ConfigError(
                f"RETRIEVER_QUERY_LANGUAGES names {', '.join(unknown)}: use ISO 639-1 codes of "
                f"{', '.join(IDENTIFIED_LANGS)}"
            )
        return self

    @property
    def query_language_list(self) -> list[str]:
        return [lang.strip().lower() for lang in self.query_languages.split(",") if lang.strip()]

    @property
    def embedder_language_list(self) -> list[str]:
        return [lang.strip().lower() for lang in self.embedder_languages.split(",") if lang.strip()]

    @classmethod
    def defaults(cls, database_url: str, **overrides: Any) -> Settings:
        """The documented defaults (as from an empty environment) with overrides; for tools and tests."""
        return cls(**{"port": 0, "database_url": database_url, **overrides})
