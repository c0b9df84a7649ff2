"""Parser settings, read once from the environment (PARSER_*)."""

from __future__ import annotations

from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config


class Settings(ServiceSettings):
    model_config = settings_config(env_prefix="PARSER_")

    host: str = "127.0.0.1"
    port: int = 50051
    max_bytes: int = Field(50 * 1024 * 1024, gt=0)
    timeout_seconds: float = Field(120.0, gt=0)  # wall clock per parse; the worker process is killed past it
    max_cpu_seconds: float = Field(120.0, gt=0)  # CPU time per parse (RLIMIT_CPU in the worker)
    max_memory_mb: int = Field(2048, ge=0)  # worker memory above its warmed size (RLIMIT_AS); 0 = no limit
    concurrency: int = Field(2, gt=0)  # worker processes
    max_chunk_tokens: int = Field(200, ge=16)
    artifacts_path: str | None = None  # Docling layout weights; None = model-free native PDF pipeline
