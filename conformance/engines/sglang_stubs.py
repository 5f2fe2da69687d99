"""The stand-ins for what SGLang's ``Scheduler`` reports to and sends through that is not cache policy:
metrics, the output streamer and the tokenizer socket."""

from __future__ import annotations


class NoMetrics:
    """metrics_reporter / metrics_collector / load_publisher: counters and log sinks only."""

    def __init__(self) -> None:
        self.enable_metrics = False
        self.num_generated_tokens = 0
        self.num_retracted_reqs = 0
        self.forward_ct_decode = 0

    def _ignore(self, *args, **kwargs) -> None:
        return None

    log_batch_result_stats = report_prefill_stats = report_decode_stats = update_device_timer = _ignore
    record_scheduler_active = record_scheduler_idle = _maybe_log_idle_metrics = publish_load_stat = _ignore
    increment_retracted_reqs = _ignore


class OutputSink:
    """output_streamer: where finished requests would be sent to the detokenizer; records who finished."""

    def __init__(self) -> None:
        self.finished: set[str] = set()

    def stream_output(self, reqs, return_logprob=False, skip_req=None) -> None:
        self.finished.update(req.rid for req in reqs if req.finished() and req is not skip_req)


class TokenizerSocket:
    """ipc_channels.send_to_tokenizer: where an abort (a request SGLang gives up on) is sent; records it."""

    def __init__(self, sink: OutputSink) -> None:
        self.sink = sink

    def send_output(self, output, req=None) -> None:
        if req is not None:
            self.sink.finished.add(req.rid)
