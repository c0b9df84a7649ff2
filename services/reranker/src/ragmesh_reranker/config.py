"""Reranker settings, read once from the environment (RERANKER_*)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from ragmesh_common.config import ServiceSettings, settings_config


class Settings(ServiceSettings):
    """Reranker configuration; `from_env` fails fast naming the bad variable."""

    model_config = settings_config(env_prefix="RERANKER_")

    host: str = "127.0.0.1"
    port: int = 50054
    model: str | None = None  # None: not configured, the gateway keeps the retrieval order
    device: str = "auto"  # auto: cuda when torch sees a GPU, else cpu
    fp16: bool = False  # unset: on when the device is cuda
    max_length: int = Field(512, ge=1)
    batch_size: int = Field(32, ge=1)
    max_passages: int = Field(200, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _resolve_device(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        device = str(data.get("device") or "auto")
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        data["device"] = device
        data.setdefault("fp16", device.startswith("cuda"))
        return data

    @field_validator("model")
    @classmethod
    def _model_folder(cls, value: str | None) -> str | None:
        if value and not Path(value).is_dir():
            raise ValueError("is not a folder (mount the model folder, e.g. bge-reranker-v2-m3)")
        return value

    @classmethod
    def defaults(cls, **overrides: Any) -> Settings:
        """The production defaults on CPU and port 0 (for tests), with overrides."""
        return cls(**{"port": 0, "device": "cpu", **overrides})
