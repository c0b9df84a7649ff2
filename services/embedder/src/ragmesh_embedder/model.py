"""The embedding model (FlagEmbedding FlagModel) and a micro-batcher for concurrent requests."""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragmesh_embedder.config import Settings

logger = logging.getLogger(__name__)


class EmbeddingModel:
    """FlagModel configured from settings. For all-MiniLM-L6-v2: mean pooling, fp32 on CPU, 256 tokens."""

    def __init__(self, settings: Settings) -> None:
        from FlagEmbedding import FlagModel

        self.settings = settings
        self.name = Path(settings.model).name if Path(settings.model).name != "model" else Path(settings.model).parent.name
        self.model = FlagModel(
            settings.model, pooling_method=settings.pooling, normalize_embeddings=True,
            query_instruction_for_retrieval=settings.query_instruction or None, use_fp16=settings.fp16,
            devices=[settings.device], batch_size=settings.batch_size, query_max_length=settings.max_length,
            passage_max_length=settings.max_length,
        )
        self.calls = 0
        self.dimension = int(self.encode(["warm-up"], is_query=False).shape[1])

    def encode(self, texts: list[str], *, is_query: bool) -> np.ndarray:
        self.calls += 1
        if is_query:
            vectors = self.model.encode_queries(texts, batch_size=self.settings.batch_size,
                                                max_length=self.settings.max_length)
        else:
            vectors = self.model.encode_corpus(texts, batch_size=self.settings.batch_size,
                                               max_length=self.settings.max_length)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


@dataclass
class _Pending:
    texts: list[str]
    future: asyncio.Future[np.ndarray]


@dataclass
class MicroBatcher:
    """Collects texts from concurrent calls (queries and passages apart) into one model call.

    A batch closes when it holds `batch_size` texts or `wait_ms` passed since its first request;
    the model runs in a worker thread, one batch at a time, so the event loop stays free.
    """

    model: EmbeddingModel
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
                batch.append(item)
                count += len(item.texts)
            if queue:
                self._wakeup[is_query].set()  # leftovers form the next batch
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
                p.future.set_result(vectors[start:start + len(p.texts)])
            start += len(p.texts)
