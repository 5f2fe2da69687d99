"""Each request replayed from scratch with the cache off: the reference log-probs for KL."""
from __future__ import annotations

import numpy as np
import torch

from executor.batch import BatchItem
from executor.model import HybridModel
from executor.pools import Pools
from sim.trace import Trace


def replay_logprobs(model: HybridModel, trace: Trace, request_ids: list[str], kernels: str,
                    page_size: int = 16) -> dict[str, np.ndarray]:
    """Log-probs of every output token, the whole sequence computed in one pass from position 0."""
    lengths = {rid: trace.prompt_len(rid) + trace.request(rid).output_len - 1 for rid in request_ids}
    pages = -(-max(lengths.values(), default=1) // page_size)
    pools = Pools(model.spec, page_size, pages, pages, 1, device=model.device, dtype=model.dtype)
    out = {}
    for rid in request_ids:
        prompt_len, length = trace.prompt_len(rid), lengths[rid]
        tokens = trace.request_seq(rid)
        ids = model.map_token_ids(tokens.token_ids(0, length + 1)).numpy()
        slots = np.arange(length)
        item = BatchItem(ids[:length], 0, slots, slots, 0, (), prompt_len - 1)
        logits = model.forward([item], pools, kernels)[0].double()
        logprobs = torch.log_softmax(logits, dim=-1)
        targets = torch.as_tensor(ids[prompt_len:length + 1], device=logprobs.device)
        out[rid] = logprobs.gather(1, targets[:, None])[:, 0].cpu().numpy()
    return out


def kl_per_request(cached: dict[str, dict[int, float]], replayed: dict[str, np.ndarray]) -> dict[str, float]:
    """SGLang's k3 estimator: d = logprob(cached run) - logprob(replay), kl = mean(exp(d) - 1 - d)."""
    result = {}
    for rid, reference in replayed.items():
        got = cached.get(rid, {})
        run = np.array([got.get(i, np.nan) for i in range(len(reference))], dtype=np.float64)
        d = run - reference
        result[rid] = float(np.mean(np.exp(d) - 1.0 - d))
    return result
