"""The embedder on a GPU (skipped where torch sees none; run on an H200 with bench/embedder_device.py, stop 44):
the production default picks cuda, and its vectors, through gRPC and with concurrent callers batched, are the
CPU's; half precision, when asked for, stays within a cosine of 0.999 of them."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_common.testing import channel_as, local_signer
from ragmesh_embedder.config import Settings
from ragmesh_embedder.model import EmbeddingModel
from ragmesh_embedder.server import build_service

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU that torch sees")

TEXTS = [
    "Revenue grew.",
    "Quarterly revenue grew by 12 percent in 2023 thanks to new enterprise customers in the public sector.",
    "The volcano erupted in 1883 and its ash reached the stratosphere.",
    "How do I reset my password?",
    "Steps to change a forgotten password: open settings, choose security, then reset.",
]


def production_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    """The settings the service reads from its environment (EMBEDDER_DEVICE and EMBEDDER_FP16 unset: defaults)."""
    for name in ("EMBEDDER_DEVICE", "EMBEDDER_FP16"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"EMBEDDER_PORT": "0", **env}.items():
        monkeypatch.setenv(name, value)
    return Settings.from_env()


def test_auto_device_is_cuda_in_full_precision(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = production_settings(monkeypatch)
    assert settings.device == "cuda" and not settings.fp16
    assert production_settings(monkeypatch, EMBEDDER_FP16="true").fp16


async def test_gpu_service_agrees_with_the_cpu_model(monkeypatch: pytest.MonkeyPatch) -> None:
    local_signer()
    cpu = EmbeddingModel(production_settings(monkeypatch, EMBEDDER_DEVICE="cpu")).encode(TEXTS, is_query=False)
    service, servicer = build_service(production_settings(monkeypatch, EMBEDDER_BATCH_WAIT_MS="50"))
    port = await service.start()
    try:
        async with channel_as(f"127.0.0.1:{port}", UserContext("tester", "eng", ("employee",))) as channel:
            stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
            whole = await stub.Embed(embedder_pb2.EmbedRequest(texts=TEXTS))
            gpu = np.array([v.values for v in whole.vectors])
            assert gpu.shape == cpu.shape
            np.testing.assert_allclose(gpu, cpu, atol=1e-4)  # fp32 on both: the same vectors
            assert np.argmax(gpu[3] @ gpu.T * (np.arange(5) != 3)) == 4  # the paraphrase is still nearest
            assert servicer.model is not None
            before = servicer.model.calls
            singles = await asyncio.gather(*(stub.Embed(embedder_pb2.EmbedRequest(texts=[t])) for t in TEXTS))
            assert servicer.model.calls - before < len(TEXTS)  # concurrent callers shared model calls
            for reply, expected in zip(singles, gpu, strict=True):  # and each got its own text's vector
                np.testing.assert_allclose(reply.vectors[0].values, expected, atol=1e-4)
    finally:
        await service.stop()
    half = EmbeddingModel(production_settings(monkeypatch, EMBEDDER_FP16="true"))
    assert half.settings.device == "cuda"
    assert float(np.min(np.sum(half.encode(TEXTS, is_query=False) * cpu, axis=1))) > 0.999
