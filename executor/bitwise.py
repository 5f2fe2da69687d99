"""The executor's criterion: every output of a cached run equals a replay from scratch, bit for bit.

Each output position yields two values, computed the same way in both runs from the float32 logits row
that predicts it: the target token's log-prob (float64, one row per call so no batch shape enters) and an
exact integer fingerprint of the row's bits (a float64 log-prob can hide a change in a logit whose
probability is negligible). A request is bit-exact when both arrays equal the replay's everywhere.
KL (SGLang's k3 estimator) is kept as a secondary figure only: ``exp(d) - 1 - d`` is exactly 0 in
float64 for any ``|d|`` up to about 1.5e-8, so "KL = 0" cannot tell a wrong restore from a right one.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch

_FINGERPRINT_SEED = 20261130
_weights: dict[tuple[int, str], torch.Tensor] = {}


class Outputs(NamedTuple):
    """Per output position of one request: the target's log-prob and the logits row's fingerprint."""

    logprobs: np.ndarray  # float64; NaN where a position was never computed
    fingerprints: np.ndarray  # int64


class RequestCheck(NamedTuple):
    outputs: int
    bit_exact: bool
    logprob_max_abs_diff: float  # inf where a log-prob is NaN or missing
    kl: float  # mean(exp(d) - 1 - d); inf where d is NaN


def _fingerprint_weights(vocab: int, device: torch.device) -> torch.Tensor:
    key = (vocab, str(device))
    if key not in _weights:
        gen = torch.Generator().manual_seed(_FINGERPRINT_SEED)
        # < 2**12: |bits * weight| < 2**43, so a sum over up to 2**19 columns cannot overflow int64
        _weights[key] = torch.randint(1, 2**12, (vocab,), generator=gen, dtype=torch.int64).to(device)
    return _weights[key]


def row_outputs(logits: torch.Tensor, targets: torch.Tensor) -> Outputs:
    """Log-probs of `targets` [n] under `logits` [n, vocab] (float32), and each row's fingerprint."""
    if logits.dim() != 2 or logits.dtype != torch.float32 or targets.shape != (logits.shape[0],):
        raise ValueError(
            f"row_outputs: need float32 logits [n, vocab] and targets [n], got "
            f"{tuple(logits.shape)} {logits.dtype} and {tuple(targets.shape)}"
        )
    values = []
    for i in range(logits.shape[0]):  # one row per call: the same ops on the same shape in both runs
        row = logits[i].double()
        top = row.max()
        values.append(row[targets[i]] - (top + torch.log(torch.exp(row - top).sum())))
    logprobs = torch.stack(values).cpu().numpy() if values else np.zeros(0)
    bits = logits.view(torch.int32).to(torch.int64)
    fingerprints = (bits * _fingerprint_weights(logits.shape[1], logits.device)).sum(dim=1)
    return Outputs(logprobs, fingerprints.cpu().numpy())


def gather_outputs(per_index: dict[int, tuple[float, int]], count: int) -> Outputs:
    """A run's outputs recorded one position at a time, as arrays (missing positions read NaN, 0)."""
    logprobs = np.full(count, np.nan)
    fingerprints = np.zeros(count, dtype=np.int64)
    for index, (logprob, fingerprint) in per_index.items():
        if 0 <= index < count:
            logprobs[index], fingerprints[index] = logprob, fingerprint
    return Outputs(logprobs, fingerprints)


def check_request(run: Outputs, replay: Outputs) -> RequestCheck:
    same_bits = np.array_equal(run.logprobs.view(np.int64), replay.logprobs.view(np.int64))
    exact = bool(same_bits and np.array_equal(run.fingerprints, replay.fingerprints))
    d = run.logprobs - replay.logprobs
    if len(d) == 0:
        return RequestCheck(0, exact, 0.0, 0.0)
    if np.isnan(d).any():
        return RequestCheck(len(d), exact, math.inf, math.inf)
    return RequestCheck(len(d), exact, float(np.abs(d).max()), float(np.mean(np.exp(d) - 1.0 - d)))
