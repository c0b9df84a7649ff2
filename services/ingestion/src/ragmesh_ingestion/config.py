"""Ingestion worker settings, read once from the environment (fail fast, naming the variable).

The worker reads the same variables as the gateway for what they share (the service addresses, REDIS_URL and
REDIS_PASSWORD, GATEWAY_UPLOAD_DIR: the store it may read uploads from, GATEWAY_GRAPH_ENABLED: one switch turns
the graph off for chat and ingestion alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config
from ragmesh_common.ingestion import DEFAULT_TOKEN_TTL_SECONDS, TOKEN_TTL_ENV, redis_url
from ragmesh_common.tokens import MAX_INGEST_TTL_SECONDS


@dataclass(frozen=True)
class Deadlines:
    """Per-hop gRPC deadlines in seconds."""

    # per Embed call of up to 64 texts (pipeline.EMBED_BATCH): the model's time for the batch and for the ones the
    # embedder runs before it, which the worker bounds (pipeline.EMBED_IN_FLIGHT in flight per process), never the
    # whole backlog of every document the worker ingests at once
    embed: float = 60.0
    parse: float = 300.0
    index: float = 120.0
    # How long a hop whose service is down or restarting is waited for and retried (pipeline.Ingestor._step):
    # longer than any service's start (the chart's startup probes allow 60 x 10 s; the dev stack 300 s), so that
    # a rolling deploy or a restarted service fails no upload.
    retry_budget: float = 900.0


class Settings(ServiceSettings):
    model_config = settings_config()

    parser_addr: str = Field(validation_alias="PARSER_ADDR")
    embedder_addr: str = Field(validation_alias="EMBEDDER_ADDR")
    retriever_addr: str = Field(validation_alias="RETRIEVER_ADDR")
    graph_addr: str = Field(validation_alias="GRAPH_ADDR")
    redis_url: str = Field(validation_alias="REDIS_URL", repr=False)
    redis_password: str = Field("", validation_alias="REDIS_PASSWORD", repr=False)
    redis_tls_ca_file: str = Field("", validation_alias="REDIS_TLS_CA_FILE")
    upload_dir: Path = Field(validation_alias="GATEWAY_UPLOAD_DIR")
    # the lifetime of the token the worker signs for a retry of a task it admitted (the gateway's, for a new task)
    token_ttl_seconds: int = Field(
        DEFAULT_TOKEN_TTL_SECONDS, ge=1, le=MAX_INGEST_TTL_SECONDS, validation_alias=TOKEN_TTL_ENV
    )
    graph_enabled: bool = Field(True, validation_alias="GATEWAY_GRAPH_ENABLED")
    retry_budget_seconds: float = Field(Deadlines.retry_budget, gt=0, validation_alias="INGEST_RETRY_BUDGET_SECONDS")
    embed_deadline_seconds: float = Field(Deadlines.embed, gt=0, validation_alias="INGEST_EMBED_DEADLINE_SECONDS")

    @property
    def broker_url(self) -> str:
        """REDIS_URL with the password and TLS settings (ragmesh_common.ingestion.redis_url)."""
        return redis_url(self.redis_url, self.redis_password, self.redis_tls_ca_file)

    @property
    def deadlines(self) -> Deadlines:
        return Deadlines(embed=self.embed_deadline_seconds, retry_budget=self.retry_budget_seconds)
