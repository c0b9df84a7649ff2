"""Reranker settings, read once from the environment."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragmesh_common.config import ConfigError, env_bool, env_int, env_opt, env_str


@dataclass(frozen=True)
class Settings:
    """Reranker configuration; `from_env` fails fast naming the bad variable."""

    host: str
    port: int
    model: str | None     # None: not configured, the gateway keeps the retrieval order
    device: str
    fp16: bool
    max_length: int
    batch_size: int
    max_passages: int

    @classmethod
    def from_env(cls) -> Settings:
        model = env_opt("RERANKER_MODEL")
        if model and not Path(model).is_dir():
            raise ConfigError(f"RERANKER_MODEL={model} is not a folder "
                              "(mount the model folder, e.g. bge-reranker-v2-m3)")
        device = env_str("RERANKER_DEVICE", "auto")
        if device == "auto":
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        settings = cls(
            host=env_str("RERANKER_HOST", "127.0.0.1"), port=env_int("RERANKER_PORT", 50054), model=model,
            device=device, fp16=env_bool("RERANKER_FP16", device.startswith("cuda")),
            max_length=env_int("RERANKER_MAX_LENGTH", 512), batch_size=env_int("RERANKER_BATCH_SIZE", 32),
            max_passages=env_int("RERANKER_MAX_PASSAGES", 200),
        )
        for name, value in (("RERANKER_MAX_LENGTH", settings.max_length), ("RERANKER_BATCH_SIZE", settings.batch_size),
                            ("RERANKER_MAX_PASSAGES", settings.max_passages)):
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        return settings

    @classmethod
    def defaults(cls, **overrides: object) -> Settings:
        """The production defaults on CPU and port 0 (for tests), with overrides."""
        values: dict[str, object] = dict(host="127.0.0.1", port=0, model=None, device="cpu", fp16=False,
                                         max_length=512, batch_size=32, max_passages=200)
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]
