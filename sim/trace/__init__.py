"""Request traces: the records, the JSONL format, generators, importers of public traces, statistics.

``records`` the ``Request`` / ``Segment`` / ``Trace`` types; ``checks`` the rules every trace obeys and
``TraceError``; ``jsonl`` load and write; ``files`` opening (gzip, zstd, stdin) and naming inputs; ``generate``
the synthetic and seed traces; ``*_import`` the public formats (``formats`` lists them); ``stats`` sizes,
sharing and ideal reuse. The names below are the package's interface; modules inside it import each other
directly.
"""

from __future__ import annotations

from sim.trace.checks import TraceError
from sim.trace.jsonl import load_trace, request_to_dict, write_trace
from sim.trace.records import Request, Segment
from sim.trace.trace import Trace

__all__ = ["Request", "Segment", "Trace", "TraceError", "load_trace", "request_to_dict", "write_trace"]
