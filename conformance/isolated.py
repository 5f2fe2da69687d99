"""An engine driven in a process of its own: its imports and global state (Triton set up its own way, tensor
parallel info, compiled kernels) stay out of the caller's process.

``isolate(module)`` swaps ``module.run`` (and ``module.run_steps``, the concurrent run, where the driver has one)
for a proxy that sends each call to one spawned worker, which imports the module afresh and calls the real
function; exceptions come back as they were raised. ``call_beside(module, target, function, *args)`` runs
another function where ``module`` runs (a test's instrumented run of the engine). ``close()`` stops the workers.
"""

from __future__ import annotations

import importlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

_POOLS: dict[str, ProcessPoolExecutor] = {}


def _call(module_name: str, function: str, args: tuple, kwargs: dict):
    return getattr(importlib.import_module(module_name), function)(*args, **kwargs)


def isolate(module) -> None:
    name = module.__name__
    if name not in _POOLS:
        _POOLS[name] = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    pool = _POOLS[name]

    def proxy(function: str):
        def call(*args, **kwargs):
            return pool.submit(_call, name, function, args, kwargs).result()

        return call

    module.run = proxy("run")
    if hasattr(module, "run_steps"):
        module.run_steps = proxy("run_steps")


def call_beside(module, target: str, function: str, *args):
    """``target.function(*args)`` in the process that runs ``module``: its worker if isolated, else here."""
    pool = _POOLS.get(module.__name__)
    if pool is None:
        return _call(target, function, args, {})
    return pool.submit(_call, target, function, args, {}).result()


def close() -> None:
    for pool in _POOLS.values():
        pool.shutdown(cancel_futures=True)
    _POOLS.clear()
