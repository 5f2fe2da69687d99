"""Running a trace through a policy: the SimPy engine (timed) and the one-request-at-a-time replay.

``config`` the ``SimConfig`` and ``setup`` what it builds (model, policy, pool sizes); ``simulate`` runs one
mode and makes the ``SimResult``; ``engine`` the SimPy process (``schedule() -> run() -> postprocess()``; the
scheduler is the engine's, ``sim/sched/``), ``backend`` what a step costs (predicted, or the real executor's),
``replay`` the untimed mode; ``metrics`` / ``summary`` / ``step_log`` the request table, the summary's
sections, the typed ``Summary`` and the step table;
``why`` / ``miss_tracker`` why tokens were recomputed; ``resolved`` the configuration as it really runs;
``tables_io`` writes the tables.
"""
