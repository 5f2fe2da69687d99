"""Batch formation: pure Python, no time, no SimPy.

``request`` is a request's one record from trace line to table row (``RequestState``); ``batch`` one step's
batch; ``interface`` the ``Scheduler`` protocol the engine loop drives (``schedule() -> run() ->
postprocess()``); ``default`` the default strategy (decodes first, then FCFS prefill chunks under one token
budget). Each engine names its scheduler on its registry entry (``sim/engines/``).
"""
