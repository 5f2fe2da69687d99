"""SGLang 0.5.23's ``processed_tokens_counter``, the clock the ``hrrn`` schedule policy ages waiting requests by.

``run_batch`` adds the launched batch's ``extend_num_tokens``: a prefill batch's new tokens (a mixed one's with a
token per decode row, ``mix_with_running``). A decode batch is the running batch object itself, and nothing
resets that field when a batch turns to decoding (``prepare_for_decode``), so a decode step adds what the
prefill batch that became the running batch had: the object is replaced only when a prefill batch's requests
join a running batch that is empty (``get_next_batch_to_run``: ``running_batch = last_batch``; else
``merge_batch``, which keeps it), and a mixed step leaves an empty one behind. A request is stamped with the
clock when it enters the waiting queue, retracted ones again (``_add_request_to_queue``).
"""

from __future__ import annotations

from sim.sched.batch import Batch


class TokenClock:
    def __init__(self) -> None:
        self.processed = 0  # processed_tokens_counter
        self._last_extend = 0  # the last prefill batch's extend_num_tokens
        self._running_extend = 0  # the running batch object's (stale) extend_num_tokens
        self._entered: dict[str, int] = {}  # arrival_processed_tokens, by request id

    def entered(self, request_id: str) -> None:
        self._entered[request_id] = self.processed

    def waited(self, request_id: str) -> int:
        return max(0, self.processed - self._entered.get(request_id, 0))

    def joined_running(self, running_was_empty: bool) -> None:
        """The last prefill batch's requests join the running batch: it becomes the running batch if that
        was empty."""
        if running_was_empty:
            self._running_extend = self._last_extend

    def launched(self, batch: Batch) -> None:
        if not batch.items:
            return
        if any(item.is_prefill for item in batch.items):
            self._last_extend = sum(item.plan.end - item.plan.start for item in batch.items)
            self.processed += self._last_extend
        else:
            self.processed += self._running_extend

    def decode_steps_launched(self, num_steps: int) -> None:
        """``num_steps`` decode batches launched (the running batch's stale count, each)."""
        self.processed += self._running_extend * num_steps
