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
    ocr_enabled: bool = True  # scanned PDF pages and image files read by RapidOCR
    ocr_dpi: int = Field(200, ge=72, le=600)  # PDF page render resolution for OCR
    # OCR time per document: pages left past it are reported in the warnings, not read. A parse that may OCR (a
    # PDF, an image) gets this much more wall clock than PARSER_TIMEOUT_SECONDS, and this times
    # PARSER_OCR_THREADS more CPU time than PARSER_MAX_CPU_SECONDS.
    ocr_max_seconds: float = Field(150.0, gt=0)
    ocr_threads: int = Field(1, ge=1, le=64)  # onnxruntime threads per worker process
