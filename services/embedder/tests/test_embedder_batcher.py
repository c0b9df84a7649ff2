"""The micro-batcher with a stand-in encoder, and the embedder's environment settings."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from ragmesh_common.config import ConfigError
from ragmesh_embedder.config import Settings
from ragmesh_embedder.model import MicroBatcher


class RecordingEncoder:
    """Encodes text i as the vector [len(text), is_query]; records each call's texts."""

    def __init__(self, fail: bool = False) -> None:
        self.batches: list[tuple[list[str], bool]] = []
        self.fail = fail
        self.threads: set[int] = set()

    def encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        self.threads.add(threading.get_ident())
        self.batches.append((list(texts), is_query))
        if self.fail:
            raise RuntimeError("model exploded")
        return np.array([[len(t), float(is_query)] for t in texts], dtype=np.float32)


async def run_batcher(
    encoder: RecordingEncoder, calls: list[tuple[list[str], bool]], batch_size: int = 4, wait_ms: int = 20
) -> list[np.ndarray | BaseException]:
    batcher = MicroBatcher(encoder, batch_size, wait_ms)
    batcher.start()
    try:
        return await asyncio.gather(*[batcher.embed(texts, is_query=q) for texts, q in calls], return_exceptions=True)
    finally:
        await batcher.stop()


async def test_concurrent_calls_share_batches_up_to_batch_size() -> None:
    encoder = RecordingEncoder()
    calls = [(["a" * (i + 1)], False) for i in range(6)]
    results = await run_batcher(encoder, calls, batch_size=4)
    assert [len(texts) for texts, _ in encoder.batches] == [4, 2]
    # every caller gets the vector of its own text back
    assert [float(r[0][0]) for r in results] == [1, 2, 3, 4, 5, 6]
    assert threading.get_ident() not in encoder.threads  # the model ran in a worker thread


class SlowEncoder(RecordingEncoder):
    def __init__(self) -> None:
        super().__init__()
        self.started: list[list[str]] = []

    def encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        import time

        self.started.append(list(texts))
        time.sleep(0.05)
        return super().encode(texts, is_query=is_query)


async def test_without_wait_an_idle_model_runs_at_once_and_a_busy_one_batches_what_queues() -> None:
    encoder = SlowEncoder()
    batcher = MicroBatcher(encoder, 8, 0)
    batcher.start()
    try:
        first = asyncio.create_task(batcher.embed(["alone"], is_query=True))
        await asyncio.sleep(0.01)  # the model is busy with "alone" now
        assert encoder.started == [["alone"]]  # at once, no wait for company
        rest = await asyncio.gather(*[batcher.embed([t], is_query=True) for t in ("b", "cc", "ddd")])
        await first
    finally:
        await batcher.stop()
    assert encoder.batches == [(["alone"], True), (["b", "cc", "ddd"], True)]
    assert [float(r[0][0]) for r in rest] == [1, 2, 3]


async def test_queries_and_passages_never_share_a_model_call() -> None:
    encoder = RecordingEncoder()
    results = await run_batcher(encoder, [(["q1"], True), (["p1"], False), (["q2", "q3"], True), (["p2"], False)])
    assert sorted((len(texts), q) for texts, q in encoder.batches) == [(2, False), (3, True)]
    assert [r[:, 1].tolist() for r in results] == [[1.0], [0.0], [1.0, 1.0], [0.0]]


async def test_a_request_larger_than_the_batch_is_one_call() -> None:
    encoder = RecordingEncoder()
    results = await run_batcher(encoder, [(["x"] * 10, False)], batch_size=4)
    assert len(encoder.batches) == 1 and results[0].shape == (10, 2)


async def test_a_model_failure_reaches_every_waiting_caller() -> None:
    results = await run_batcher(RecordingEncoder(fail=True), [(["a"], False), (["b"], False)])
    assert all(isinstance(r, RuntimeError) and "exploded" in str(r) for r in results)


def test_settings_defaults_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "EMBEDDER_MODEL",
        "EMBEDDER_POOLING",
        "EMBEDDER_DEVICE",
        "EMBEDDER_FP16",
        "EMBEDDER_PORT",
        "EMBEDDER_QUERY_INSTRUCTION",
        "EMBEDDER_MAX_LENGTH",
        "EMBEDDER_BATCH_SIZE",
        "EMBEDDER_LONG_TEXT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("EMBEDDER_DEVICE", "cpu")
    settings = Settings.from_env()
    assert settings.model.endswith("model") and settings.pooling == "mean" and settings.query_instruction == ""
    assert (settings.port, settings.max_length, settings.batch_size, settings.fp16) == (50052, 256, 32, False)
    assert settings.long_text == "truncate"
    monkeypatch.setenv("EMBEDDER_QUERY_INSTRUCTION", "Represent this sentence for searching relevant passages: ")
    assert Settings.from_env().query_instruction.endswith("passages: ")  # trailing space kept


def test_pooling_defaults_to_what_the_model_folder_declares(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    monkeypatch.setenv("EMBEDDER_DEVICE", "cpu")
    monkeypatch.setenv("EMBEDDER_MODEL", str(tmp_path))
    monkeypatch.delenv("EMBEDDER_POOLING", raising=False)
    assert Settings.from_env().pooling == "cls"  # a bge folder
    monkeypatch.setenv("EMBEDDER_POOLING", "mean")
    assert Settings.from_env().pooling == "mean"  # an explicit setting wins
    (tmp_path / "1_Pooling" / "config.json").unlink()
    monkeypatch.delenv("EMBEDDER_POOLING")
    assert Settings.from_env().pooling == "mean"  # nothing declared


@pytest.mark.parametrize(
    "name, value",
    [
        ("EMBEDDER_POOLING", "max"),
        ("EMBEDDER_MODEL", "/no/such/model"),
        ("EMBEDDER_BATCH_SIZE", "0"),
        ("EMBEDDER_FP16", "maybe"),
        ("EMBEDDER_LONG_TEXT", "max"),
    ],
)
def test_bad_settings_fail_fast_naming_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv("EMBEDDER_DEVICE", "cpu")
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        Settings.from_env()


async def test_a_caller_that_gave_up_while_queued_is_not_embedded() -> None:
    """Under load an Embed call can pass its deadline while queued behind others (gRPC cancels its handler): its
    texts are dropped, so the model's time goes to the callers still waiting, not to answers nobody reads."""
    encoder = SlowEncoder()
    batcher = MicroBatcher(encoder, 2, 0)
    batcher.start()
    try:
        first = asyncio.create_task(batcher.embed(["busy"], is_query=False))
        await asyncio.sleep(0.01)  # the model is busy with "busy"
        gone = asyncio.create_task(batcher.embed(["gave", "up"], is_query=False))
        waiting = asyncio.create_task(batcher.embed(["still", "here"], is_query=False))
        await asyncio.sleep(0)  # both queued behind "busy"
        gone.cancel()  # its deadline passed
        await first
        result = await waiting
    finally:
        await batcher.stop()
    assert encoder.started == [["busy"], ["still", "here"]]
    assert [float(v[0]) for v in result] == [5, 4]
    assert gone.cancelled()
