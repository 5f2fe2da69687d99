"""Running a trace through a policy: the SimPy engine (timed) and the one-request-at-a-time replay.

``config`` the ``SimConfig``; ``simulate`` builds the model, policy, pools and manager and runs one mode;
``engine`` the SimPy process (``schedule() -> run() -> postprocess()``), ``scheduler`` its admission and
batching, ``backend`` what a step costs (predicted, or the real executor's), ``replay`` the untimed mode;
``metrics`` / ``step_log`` / ``why`` the request and step tables and why tokens were recomputed;
``resolved`` the configuration as it really runs; ``tables_io`` writes the tables.
"""
