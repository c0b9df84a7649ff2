"""The embedded Redis asks for its password: a local process that reaches the port is not thereby trusted with
the ingestion queue; the stack's REDIS_URL (what gateway and worker get) carries the password, kept in the data
folder's secrets file (mode 0600), and the command line shows no password."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from ragmesh_dev.devstack import DEFAULT_PORTS, Stack
from ragmesh_dev.engines.redis import EmbeddedRedis
from ragmesh_dev.ports import free_port


def test_the_stacks_redis_refuses_clients_without_its_password(tmp_path: Path) -> None:
    stack = Stack(tmp_path / "data", ports={**dict.fromkeys(DEFAULT_PORTS, 1), "redis": free_port()})
    stack.data_dir.mkdir(parents=True)
    stack.start_redis()  # as start_engines does: before any process's environment (REDIS_URL) is built
    try:
        # refused from the first start on, before anything read REDIS_URL
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=stack.host, port=stack.ports["redis"], socket_timeout=10).ping()
        with pytest.raises(redis.AuthenticationError):
            redis.Redis(host=stack.host, port=stack.ports["redis"], password="guess", socket_timeout=10).ping()
        url = stack.env("gateway")["REDIS_URL"]
        assert "REDIS_URL" not in stack.env("parser")  # only the gateway and the worker talk to Redis
        password = json.loads((stack.data_dir / "secrets.json").read_text())["redis_password"]
        assert url == stack.redis_url and f":{password}@" in url
        assert (stack.data_dir / "secrets.json").stat().st_mode & 0o777 == 0o600
        assert stack.redis.process is not None and password not in " ".join(map(str, stack.redis.process.args))
        assert redis.Redis.from_url(url, socket_timeout=10).ping()
    finally:
        stack.redis.stop()


def test_a_password_with_url_characters_is_quoted(tmp_path: Path) -> None:
    server = EmbeddedRedis(tmp_path, free_port(), password="p@ss:w/rd%")
    server.start()
    try:
        assert redis.Redis.from_url(server.url, socket_timeout=10).ping()
    finally:
        server.stop()
