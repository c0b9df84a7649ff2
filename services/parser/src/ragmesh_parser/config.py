"""Parser settings, read once from the environment."""
from __future__ import annotations

from dataclasses import dataclass

from ragmesh_common.config import ConfigError, env_float, env_int, env_opt, env_str


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    max_bytes: int
    timeout_seconds: float
    concurrency: int
    max_chunk_tokens: int
    artifacts_path: str | None  # Docling layout weights; None = model-free native PDF pipeline

    @classmethod
    def from_env(cls) -> Settings:
        settings = cls(
            host=env_str("PARSER_HOST", "127.0.0.1"),
            port=env_int("PARSER_PORT", 50051),
            max_bytes=env_int("PARSER_MAX_BYTES", 50 * 1024 * 1024),
            timeout_seconds=env_float("PARSER_TIMEOUT_SECONDS", 120.0),
            concurrency=env_int("PARSER_CONCURRENCY", 2),
            max_chunk_tokens=env_int("PARSER_MAX_CHUNK_TOKENS", 200),
            artifacts_path=env_opt("PARSER_ARTIFACTS_PATH"),
        )
        for name, value in (("PARSER_MAX_BYTES", settings.max_bytes), ("PARSER_CONCURRENCY", settings.concurrency),
                            ("PARSER_TIMEOUT_SECONDS", settings.timeout_seconds)):
            if value <= 0:
                raise ConfigError(f"{name} must be positive, got {value}")
        if settings.max_chunk_tokens < 16:
            raise ConfigError(f"PARSER_MAX_CHUNK_TOKENS must be at least 16, got {settings.max_chunk_tokens}")
        return settings
