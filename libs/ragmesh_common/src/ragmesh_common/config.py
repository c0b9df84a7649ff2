"""Typed settings on pydantic-settings: read once from the environment, validated, failing fast naming the variable.

A service declares its settings as a `ServiceSettings` subclass; each default is written once, on its field.

    class Settings(ServiceSettings):
        model_config = settings_config(env_prefix="PARSER_")
        port: int = 50051                                        # PARSER_PORT
        retriever_addr: str = Field(validation_alias="RETRIEVER_ADDR")  # a variable outside the prefix

`Settings.from_env()` reads the environment (an empty variable counts as unset) and raises `ConfigError` whose
message names the variable; `run_service` turns that into a one-line SystemExit. `Settings(...)` reads nothing
from the environment: the code defaults plus the given values (tests and tools), validated the same way.
"""

from __future__ import annotations

import os
from contextvars import ContextVar
from typing import Any, Self, Unpack

from pydantic import ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class ConfigError(RuntimeError):
    """A required environment variable is missing or malformed."""


_READ_ENV: ContextVar[bool] = ContextVar("ragmesh_settings_read_env", default=False)


def settings_config(**overrides: Unpack[SettingsConfigDict]) -> SettingsConfigDict:
    """The model config every service's settings share: frozen, unknown variables ignored, "" = unset."""
    config = SettingsConfigDict(
        env_prefix="",
        frozen=True,
        extra="ignore",
        env_ignore_empty=True,
        case_sensitive=False,
        validate_by_name=True,
        validate_by_alias=True,
        validate_default=True,
    )
    config.update(overrides)
    return config


class ServiceSettings(BaseSettings):
    model_config = settings_config()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # the environment only inside from_env: a settings object built in code does not depend on the shell
        return (init_settings, env_settings) if _READ_ENV.get() else (init_settings,)

    @classmethod
    def env_name(cls, field: str) -> str:
        """The environment variable a field is read from."""
        info = cls.model_fields.get(field)
        if info is not None and isinstance(info.validation_alias, str):
            return info.validation_alias
        if any(f.validation_alias == field for f in cls.model_fields.values()):
            return field
        return f"{cls.model_config.get('env_prefix', '')}{field}".upper()

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(describe(type(self), exc)) from None

    @classmethod
    def from_env(cls) -> Self:
        token = _READ_ENV.set(True)
        try:
            return cls()
        finally:
            _READ_ENV.reset(token)


def describe(cls: type[ServiceSettings], exc: ValidationError) -> str:
    """One line per invalid field, each naming its environment variable."""
    lines = []
    for error in exc.errors(include_url=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        name = cls.env_name(field) if field else cls.__name__
        if error["type"] == "missing":
            lines.append(f"environment variable {name} is required but not set")
            continue
        message = error["msg"].removeprefix("Value error, ")
        raw = os.environ.get(name) if _READ_ENV.get() else None
        got = f", got {raw!r}" if raw is not None else f", got {error['input']!r}" if "input" in error else ""
        lines.append(f"environment variable {name}: {message}{got}")
    return "; ".join(lines)


def env_int(name: str, default: int) -> int:
    """One integer variable outside a settings class (an empty value counts as unset)."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be an integer, got {raw!r}") from None
