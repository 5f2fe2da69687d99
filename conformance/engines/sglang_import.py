"""Importing SGLang 0.5.23 on CPU: placeholders for the CUDA-only image library it imports at module level,
and no pinned memory (a CUDA call)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import sys
import types
import warnings

_STUBBED = ("torchvision", "torchvision.transforms", "torchvision.transforms.functional")


def import_sglang() -> None:
    """Import SGLang's scheduler and cache modules on a CPU-only torch.

    sglang.srt.configs imports torchvision (image preprocessing for VLM configs) at module level; the only
    torchvision wheel for this torch is a CUDA build whose ops do not load on CPU. transformers is asked
    first (and caches) that torchvision is absent, then empty modules take its place.
    """
    if "sglang.srt.managers.scheduler" in sys.modules:
        return
    if importlib.util.find_spec("sglang") is None:
        raise ImportError(
            "sglang is not installed (pip install --no-deps -c constraints-cpu.txt "
            "-r conformance/requirements.txt)"
        )
    from transformers.utils import import_utils

    if import_utils.is_torchvision_available():
        raise RuntimeError("a real torchvision is installed: the CPU driver expects none (see docs)")
    for name in _STUBBED:
        sys.modules.setdefault(name, _placeholder_module(name))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import sglang.srt.managers.scheduler  # noqa: F401
    except BaseException:
        for name in _STUBBED:  # leave no placeholder behind for whoever imports next
            sys.modules.pop(name, None)
        raise
    _no_pinned_memory()
    logging.getLogger("sglang").setLevel(logging.ERROR)  # retraction and pool warnings stay visible at ERROR


def _placeholder_module(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__path__ = []
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)

    def attribute(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return type(attr, (), {})  # a name to import; never called by the cache path

    module.__getattr__ = attribute  # type: ignore[method-assign]  # a stand-in module answers any name
    return module


def _no_pinned_memory() -> None:
    """prepare_for_decode stages the MAMBA track mask with ``pin_memory()``, which needs a CUDA device."""
    import torch

    torch.set_num_threads(1)  # tiny tensors: threads only contend with each other
    if not torch.cuda.is_available():
        torch.Tensor.pin_memory = lambda self, *args, **kwargs: self  # type: ignore[method-assign]  # no CUDA
