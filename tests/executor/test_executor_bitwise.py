"""The bitwise criterion itself: what it catches that KL or a tolerance cannot, and that it is shape-free."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from executor.bitwise import Outputs, check_request, gather_outputs, row_outputs  # noqa: E402


def _logits(rows: int, vocab: int = 300, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed)) * 4


def test_a_row_gives_the_same_outputs_alone_or_among_others():
    logits, targets = _logits(9), torch.arange(9) * 7
    together = row_outputs(logits, targets)
    for i in (0, 4, 8):
        alone = row_outputs(logits[i:i + 1].clone(), targets[i:i + 1])
        assert alone.logprobs.tobytes() == together.logprobs[i:i + 1].tobytes()
        assert alone.fingerprints.tolist() == together.fingerprints[i:i + 1].tolist()
    exact = torch.log_softmax(logits.double(), -1)[torch.arange(9), targets].numpy()
    assert np.allclose(together.logprobs, exact, rtol=0, atol=1e-12)


def test_kl_is_exactly_zero_for_a_difference_the_bitwise_check_catches():
    reference = row_outputs(_logits(4), torch.tensor([1, 2, 3, 4]))
    nudged = Outputs(reference.logprobs + 1e-9, reference.fingerprints)
    check = check_request(nudged, reference)
    assert check.kl == 0.0  # exp(d) - 1 - d underflows to 0 in float64
    assert not check.bit_exact and check.logprob_max_abs_diff == pytest.approx(1e-9, rel=1e-3)
    assert check_request(reference, reference) == (4, True, 0.0, 0.0)


def test_a_change_in_a_negligible_logit_is_caught_by_the_fingerprint():
    logits = _logits(2)
    logits[:, 0] = 40.0  # the target: probability ~1, so every other logit barely moves the log-prob
    logits[:, 1] = -60.0
    changed = logits.clone()
    changed[1, 1] = torch.nextafter(changed[1, 1], torch.tensor(0.0))  # one ulp
    targets = torch.tensor([0, 0])
    before, after = row_outputs(logits, targets), row_outputs(changed, targets)
    assert before.logprobs.tobytes() == after.logprobs.tobytes()
    assert before.fingerprints[0] == after.fingerprints[0] and before.fingerprints[1] != after.fingerprints[1]
    assert not check_request(after, before).bit_exact


def test_nan_or_missing_outputs_are_not_exact_and_read_infinite():
    reference = row_outputs(_logits(3), torch.tensor([0, 1, 2]))
    recorded = {0: (float(reference.logprobs[0]), int(reference.fingerprints[0])),
                2: (float(reference.logprobs[2]), int(reference.fingerprints[2]))}
    check = check_request(gather_outputs(recorded, 3), reference)  # position 1 never computed
    assert not check.bit_exact and check.logprob_max_abs_diff == math.inf and check.kl == math.inf


def test_row_outputs_rejects_bad_shapes():
    with pytest.raises(ValueError, match="row_outputs"):
        row_outputs(_logits(2).double(), torch.tensor([0, 1]))
