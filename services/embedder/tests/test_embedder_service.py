"""The embedder through gRPC: correct vectors for MiniLM, batching of concurrent calls, bad input."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import grpc
import numpy as np
import pytest

from ragmesh.embedder.v1 import embedder_pb2, embedder_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_common.testing import channel_as
from ragmesh_embedder.config import Settings
from ragmesh_embedder.model import EmbeddingModel, long_text_windows
from ragmesh_embedder.server import EmbedderServicer, build_service

CALLER = UserContext("tester", "eng", ("employee",))  # every call carries its signed token


@pytest.fixture(scope="module")
async def embedder() -> AsyncIterator[tuple[embedder_pb2_grpc.EmbedderServiceStub, EmbedderServicer]]:
    service, servicer = build_service(Settings.defaults(batch_wait_ms=50))
    port = await service.start()
    async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
        yield embedder_pb2_grpc.EmbedderServiceStub(channel), servicer
    await service.stop()


def reference_mean_pooling(texts: list[str]) -> np.ndarray:
    """Sentence-Transformers' definition of all-MiniLM-L6-v2: mean over tokens, L2-normalised."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = Settings.defaults().model
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (hidden * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=-1).numpy()


async def test_vectors_equal_sentence_transformers_mean_pooling(embedder) -> None:
    stub, _ = embedder
    # unequal lengths in unsorted order: the model sorts by length inside and must restore the order
    texts = [
        "Revenue grew.",
        "Quarterly revenue grew by 12 percent in 2023 thanks to new enterprise customers in the public sector.",
        "The cat sits on the mat.",
    ]
    reply = await stub.Embed(embedder_pb2.EmbedRequest(texts=texts))
    got = np.array([v.values for v in reply.vectors])
    assert got.shape == (3, 384)
    np.testing.assert_allclose(got, reference_mean_pooling(texts), atol=1e-4)
    queries = await stub.Embed(embedder_pb2.EmbedRequest(texts=texts, is_query=True))
    np.testing.assert_allclose(np.array([v.values for v in queries.vectors]), got, atol=1e-5)  # no instruction


async def test_paraphrase_is_closer_than_unrelated(embedder) -> None:
    stub, _ = embedder
    reply = await stub.Embed(
        embedder_pb2.EmbedRequest(
            texts=[
                "How do I reset my password?",
                "Steps to change a forgotten password",
                "The volcano erupted in 1883.",
            ]
        )
    )
    a, b, c = (np.array(v.values) for v in reply.vectors)
    assert float(a @ b) > float(a @ c) + 0.2


async def test_concurrent_requests_share_model_calls(embedder) -> None:
    stub, servicer = embedder
    assert servicer.model is not None
    before = servicer.model.calls
    replies = await asyncio.gather(
        *[stub.Embed(embedder_pb2.EmbedRequest(texts=[f"document number {i}"])) for i in range(12)]
    )
    assert all(len(r.vectors) == 1 for r in replies)
    assert servicer.model.calls - before < 12
    # each caller got its own text's vector back
    single = await stub.Embed(embedder_pb2.EmbedRequest(texts=["document number 7"]))
    np.testing.assert_allclose(replies[7].vectors[0].values, single.vectors[0].values, atol=1e-5)


@pytest.mark.parametrize(
    "texts, message", [([], "must not be empty"), (["ok", "  "], "text 1 is empty"), (["x"] * 513, "at most 512")]
)
async def test_bad_input_is_invalid_argument(embedder, texts, message) -> None:
    stub, _ = embedder
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Embed(embedder_pb2.EmbedRequest(texts=texts))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()


def test_query_instruction_prefixes_queries_only() -> None:
    instruction = "Represent this sentence for searching relevant passages: "
    model = EmbeddingModel(Settings.defaults(query_instruction=instruction))
    text = "where is the travel policy"
    query, passage = model.encode([text], is_query=True), model.encode([text], is_query=False)
    np.testing.assert_allclose(query, reference_mean_pooling([instruction + text]), atol=1e-4)
    np.testing.assert_allclose(passage, reference_mean_pooling([text]), atol=1e-4)


def test_long_text_windows_cover_the_text_with_overlap() -> None:
    tokenizer = EmbeddingModel(Settings.defaults()).model.tokenizer
    text = " ".join(f"Finding {i} holds for cohort {i * 7}." for i in range(120))  # ~1,000 tokens
    pieces, owner = long_text_windows(tokenizer, [text, "A short passage."], 256)
    counts = [len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p in pieces]
    assert owner[-1] == 1 and pieces[-1] == "A short passage."  # a text that fits stays whole
    windows = pieces[:-1]
    assert len(windows) > 4 and set(owner[:-1]) == {0} and all(c <= 254 for c in counts[:-1])
    assert all(w in text for w in windows) and text.startswith(windows[0]) and text.endswith(windows[-1])
    for before, after in itertools.pairwise(windows):  # each window starts inside the one before it
        assert before[-40:] in after or after[:40] in before


def test_long_text_mean_averages_windows_and_leaves_short_texts_alone() -> None:
    truncating = EmbeddingModel(Settings.defaults())
    averaging = EmbeddingModel(Settings.defaults(long_text="mean"))
    head = " ".join(f"Statins lowered LDL cholesterol in trial arm {i}." for i in range(40))
    tail = " ".join(f"Volcanic ash reached the stratosphere on day {i}." for i in range(40))
    long_text, short = f"{head} {tail}", "Statins lowered LDL cholesterol."
    pieces, _ = long_text_windows(truncating.model.tokenizer, [long_text], 256)
    windows = truncating.encode(pieces, is_query=False)
    expected = windows.mean(axis=0) / np.linalg.norm(windows.mean(axis=0))
    got = averaging.encode([long_text, short], is_query=False)
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    np.testing.assert_allclose(got[1], truncating.encode([short], is_query=False)[0], atol=1e-6)
    # the tail past the first 256 tokens now counts: closer to a volcano query than truncation was
    volcano = averaging.encode(["volcanic ash in the stratosphere"], is_query=True)[0]
    assert float(got[0] @ volcano) > float(truncating.encode([long_text], is_query=False)[0] @ volcano) + 0.05
    # queries are never split
    np.testing.assert_allclose(
        averaging.encode([long_text], is_query=True), truncating.encode([long_text], is_query=True), atol=1e-6
    )
