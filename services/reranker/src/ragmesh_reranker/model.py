"""The cross-encoder (FlagEmbedding FlagReranker), scoring each (query, passage) pair in one pass."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from ragmesh_reranker.config import Settings

logger = logging.getLogger(__name__)


def _single_pass_flag_reranker(**kwargs: Any) -> Any:
    """A FlagReranker whose single-device scoring runs each batch once and shows no progress bars.

    FlagEmbedding 1.4's `compute_score_single_gpu` first runs the whole first batch as a probe for a
    batch size that fits in memory (retrying on any RuntimeError, down to a batch size of 0 - a hang),
    then runs it again. Tokenisation below is the library's own: the query truncated to 3/4 of
    max_length, the passage to the rest (`only_second`).
    """
    import torch
    from FlagEmbedding import FlagReranker
    from FlagEmbedding.utils.tokenizer_compat import pad_with_compat, prepare_for_model_compat

    class SinglePassFlagReranker(FlagReranker):  # type: ignore[misc]  # FlagEmbedding ships no types: the base is Any
        @torch.no_grad()
        def compute_score_single_gpu(
            self,
            sentence_pairs: list[Any],
            batch_size: int | None = None,
            query_max_length: int | None = None,
            max_length: int | None = None,
            normalize: bool | None = None,
            device: str | None = None,
            **kw: Any,
        ) -> list[float]:
            batch_size = batch_size or self.batch_size
            max_length = max_length or self.max_length
            query_max_length = query_max_length or self.query_max_length or max_length * 3 // 4
            normalize = self.normalize if normalize is None else normalize
            device = device or self.target_devices[0]
            if device == "cpu":
                self.use_fp16 = False
            if self.use_fp16:
                self.model.half()
            self.model.to(device)
            self.model.eval()
            if sentence_pairs and isinstance(sentence_pairs[0], str):
                sentence_pairs = [sentence_pairs]
            queries = self.tokenizer(
                [p[0] for p in sentence_pairs],
                return_tensors=None,
                add_special_tokens=False,
                max_length=query_max_length,
                truncation=True,
                **kw,
            )["input_ids"]
            passages = self.tokenizer(
                [p[1] for p in sentence_pairs],
                return_tensors=None,
                add_special_tokens=False,
                max_length=max_length,
                truncation=True,
                **kw,
            )["input_ids"]
            inputs = [
                prepare_for_model_compat(
                    self.tokenizer, q, d, truncation="only_second", max_length=max_length, padding=False
                )
                for q, d in zip(queries, passages, strict=True)
            ]
            order = np.argsort([-len(x["input_ids"]) for x in inputs])  # length-sorted: less padding
            scores: list[float] = []
            for start in range(0, len(inputs), batch_size):
                batch = pad_with_compat(
                    self.tokenizer,
                    [inputs[i] for i in order[start : start + batch_size]],
                    padding=True,
                    return_tensors="pt",
                    **kw,
                ).to(device)
                scores.extend(self.model(**batch, return_dict=True).logits.view(-1).float().cpu().tolist())
            restored = [scores[i] for i in np.argsort(order)]
            if normalize:
                restored = [float(1 / (1 + np.exp(-s))) for s in restored]
            return restored

    return SinglePassFlagReranker(**kwargs)


class CrossEncoder:
    """FlagReranker loaded from `settings.model` (a local folder); construction warms it up.

    Raises RuntimeError naming RERANKER_MODEL when the folder is missing or is not a loadable model.
    """

    def __init__(self, settings: Settings) -> None:
        if not settings.model or not Path(settings.model).is_dir():
            raise RuntimeError(f"RERANKER_MODEL={settings.model} is not a model folder")
        self.settings = settings
        self.name = Path(settings.model).name
        try:
            # devices as a one-element list: FlagReranker starts a multi-process pool for several devices
            self.model = _single_pass_flag_reranker(
                model_name_or_path=settings.model,
                use_fp16=settings.fp16,
                devices=[settings.device],
                batch_size=settings.batch_size,
                max_length=settings.max_length,
            )
            self.score("warm", ["up"], normalize=False)
        except Exception as exc:
            raise RuntimeError(f"RERANKER_MODEL={settings.model} could not be loaded: {exc}") from exc

    def score(self, query: str, passages: list[str], *, normalize: bool) -> list[float]:
        """Blocking: one relevance score per passage, in order (sigmoid-normalised when asked)."""
        return [float(s) for s in self.model.compute_score([(query, p) for p in passages], normalize=normalize)]
