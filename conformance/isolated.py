"""An engine driven in a process of its own: its imports and global state (Triton set up its own way, tensor
parallel info, compiled kernels) stay out of the caller's process.

``isolate(module)`` swaps ``module.run`` for a proxy that sends each call to one spawned worker, which imports
the module afresh and calls its real ``run``; exceptions come back as they were raised. ``close()`` stops
the workers.
"""

from __future__ import annotations

import importlib
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

_POOLS: dict[str, ProcessPoolExecutor] = {}


def _call(module_name: str, args: tuple, kwargs: dict):
    return importlib.import_module(module_name).run(*args, **kwargs)


def isolate(module) -> None:
    name = module.__name__
    if name not in _POOLS:
        _POOLS[name] = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    pool = _POOLS[name]

    def run(*args, **kwargs):
        return pool.submit(_call, name, args, kwargs).result()

    module.run = run


def close() -> None:
    for pool in _POOLS.values():
        pool.shutdown(cancel_futures=True)
    _POOLS.clear()
