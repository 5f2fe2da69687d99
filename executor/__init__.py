"""The real executor: runs the batches the simulator schedules on a small hybrid model (Triton kernels in
``kernels/``), with KV pages and MAMBA states in tensors indexed by the cache manager's own ids, so that a
wrong cache decision shows up as a wrong output (docs/executor.md). ``backend.py`` is its ``Backend``."""
