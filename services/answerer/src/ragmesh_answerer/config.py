"""Answerer settings, read once from the environment."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ragmesh_common.config import ConfigError, env_float, env_int, env_opt, env_str


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    ollama_host: str             # e.g. http://127.0.0.1:11435 (anything the ollama client accepts)
    model: str
    max_tokens: int              # default num_predict when the request says 0
    temperature: float           # default when the request has no temperature
    timeout_seconds: float       # whole generation, and each HTTP read
    max_question_chars: int
    max_context_chars: int       # budget for the evidence quotes in the prompt
    max_quotes: int              # evidence quotes selected for the prompt
    min_sentence_support: float  # share of a sentence's content words its evidence must contain
    history_turns: int           # how many past chat turns go into the prompt
    seed: int | None             # fixed sampling seed (tests, evaluations); None = random
    max_concurrent: int = 1      # generations at once (match the model server's parallel slots)
    max_queue: int = 32          # requests waiting for a slot; beyond it RESOURCE_EXHAUSTED at once
    queue_timeout_seconds: float = 30.0  # longest wait for a slot (less when the call's deadline is nearer)

    @classmethod
    def from_env(cls) -> Settings:
        seed = env_opt("ANSWERER_SEED")
        try:
            seed_value = int(seed) if seed is not None else None
        except ValueError:
            raise ConfigError(f"environment variable ANSWERER_SEED must be an integer, got {seed!r}") from None
        settings = cls(
            host=env_str("ANSWERER_HOST", "127.0.0.1"),
            port=env_int("ANSWERER_PORT", 50056),
            ollama_host=env_str("OLLAMA_HOST"),
            model=env_str("ANSWERER_MODEL", "smollm2:135m"),
            max_tokens=env_int("ANSWERER_MAX_TOKENS", 64),
            temperature=env_float("ANSWERER_TEMPERATURE", 0.2),
            timeout_seconds=env_float("ANSWERER_TIMEOUT_SECONDS", 120.0),
            max_question_chars=env_int("ANSWERER_MAX_QUESTION_CHARS", 2000),
            max_context_chars=env_int("ANSWERER_MAX_CONTEXT_CHARS", 2000),
            max_quotes=env_int("ANSWERER_MAX_QUOTES", 5),
            min_sentence_support=env_float("ANSWERER_MIN_SENTENCE_SUPPORT", 0.5),
            history_turns=env_int("ANSWERER_HISTORY_TURNS", 4),
            seed=seed_value,
            max_concurrent=env_int("ANSWERER_MAX_CONCURRENT", 1),
            max_queue=env_int("ANSWERER_MAX_QUEUE", 32),
            queue_timeout_seconds=env_float("ANSWERER_QUEUE_TIMEOUT_SECONDS", 30.0),
        )
        settings.validate()
        return settings

    @classmethod
    def defaults(cls, ollama_host: str, **overrides: object) -> Settings:
        """The documented defaults (as from an empty environment) with overrides; for tools and tests."""
        base = cls(host="127.0.0.1", port=50056, ollama_host=ollama_host, model="smollm2:135m", max_tokens=64,
                   temperature=0.2, timeout_seconds=120.0, max_question_chars=2000, max_context_chars=2000,
                   max_quotes=5, min_sentence_support=0.5, history_turns=4, seed=None)
        settings = dataclasses.replace(base, **overrides)  # type: ignore[arg-type]
        settings.validate()
        return settings

    def validate(self) -> None:
        checks = [
            ("ANSWERER_MAX_TOKENS", self.max_tokens > 0, "must be > 0"),
            ("ANSWERER_TEMPERATURE", 0.0 <= self.temperature <= 2.0, "must be within 0..2"),
            ("ANSWERER_TIMEOUT_SECONDS", self.timeout_seconds > 0, "must be > 0"),
            ("ANSWERER_MAX_QUESTION_CHARS", self.max_question_chars > 0, "must be > 0"),
            ("ANSWERER_MAX_CONTEXT_CHARS", self.max_context_chars >= 200, "must be >= 200"),
            ("ANSWERER_MAX_QUOTES", 1 <= self.max_quotes <= 20, "must be within 1..20"),
            ("ANSWERER_MIN_SENTENCE_SUPPORT", 0.0 < self.min_sentence_support <= 1.0, "must be within (0, 1]"),
            ("ANSWERER_HISTORY_TURNS", self.history_turns >= 0, "must be >= 0"),
            ("ANSWERER_MAX_CONCURRENT", self.max_concurrent >= 1, "must be >= 1"),
            ("ANSWERER_MAX_QUEUE", self.max_queue >= 0, "must be >= 0 (0 = no queue: busy means refused)"),
            ("ANSWERER_QUEUE_TIMEOUT_SECONDS", self.queue_timeout_seconds > 0, "must be > 0"),
        ]
        for name, ok, why in checks:
            if not ok:
                raise ConfigError(f"environment variable {name} {why}")
