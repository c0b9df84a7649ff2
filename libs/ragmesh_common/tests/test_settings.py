"""The typed settings base: environment read only by from_env, errors that name the variable."""

from __future__ import annotations

import pytest
from pydantic import Field

from ragmesh_common.config import ConfigError, ServiceSettings, settings_config


class Example(ServiceSettings):
    model_config = settings_config(env_prefix="EXAMPLE_")

    port: int = Field(50051, gt=0)
    enabled: bool = True
    peer_addr: str = Field(validation_alias="PEER_ADDR")


def test_from_env_reads_prefixed_and_aliased_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_PORT", "7000")
    monkeypatch.setenv("EXAMPLE_ENABLED", "false")
    monkeypatch.setenv("PEER_ADDR", "peer:1")
    assert Example.from_env() == Example(port=7000, enabled=False, peer_addr="peer:1")


def test_an_empty_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_PORT", "")
    monkeypatch.setenv("PEER_ADDR", "peer:1")
    assert Example.from_env().port == 50051


def test_settings_built_in_code_ignore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXAMPLE_PORT", "7000")
    assert Example(peer_addr="x:1").port == 50051


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("EXAMPLE_PORT", "0", "greater than 0, got '0'"),
        ("EXAMPLE_PORT", "many", "valid integer"),
        ("EXAMPLE_ENABLED", "maybe", "valid boolean"),
    ],
)
def test_a_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str, fragment: str) -> None:
    monkeypatch.setenv("PEER_ADDR", "peer:1")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=f"environment variable {name}: .*{fragment}"):
        Example.from_env()


def test_a_missing_required_variable_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PEER_ADDR", raising=False)
    with pytest.raises(ConfigError, match="environment variable PEER_ADDR is required but not set"):
        Example.from_env()
    with pytest.raises(ConfigError, match="PEER_ADDR"):
        Example()
