"""Ingestion worker settings, read once from the environment (fail fast, naming the variable).

The worker reads the same variables as the gateway for what they share (the service addresses, REDIS_URL,
GATEWAY_GRAPH_ENABLED: one switch turns the graph off for chat and ingestion alike).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config


@dataclass(frozen=True)
class Deadlines:
    """Per-hop gRPC deadlines in seconds."""

    embed: float = 10.0  # per batch: six times this (a batch is up to 64 chunks, not one query)
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
    graph_enabled: bool = Field(True, validation_alias="GATEWAY_GRAPH_ENABLED")
    retry_budget_seconds: float = Field(Deadlines.retry_budget, gt=0, validation_alias="INGEST_RETRY_BUDGET_SECONDS")

    @property
    def deadlines(self) -> Deadlines:
        return Deadlines(retry_budget=self.retry_budget_seconds)
