"""The real executor: a Triton model run by the simulator's own cache manager, to prove a prediction.

``model`` the network (``kernels/`` beside their torch references), ``pools`` the real KV and state tensors
the manager's page and slot numbers address, ``batch`` a step's inputs, ``backend`` the engine's backend that
runs it and measures time, ``replay`` / ``bitwise`` the from-scratch replay a cached run must equal bit for
bit, ``execute`` / ``report`` the `execute` and `calibrate` commands' work (docs/executor.md).
"""
