"""Triton 3.6's interpreter with numpy >= 2.4: a runtime loop bound is converted with ``int(ndarray)``, which
numpy 2.4 turned from a deprecation into ``TypeError: only 0-dimensional arrays can be converted to Python
scalars`` (triton issue #9171, fixed upstream in PR #9172 for triton 3.8). The GPU path never runs the
interpreter; this lets a CPU with the device's numpy (2.5) run the same kernels. A no-op unless the
interpreter is on and the installed triton still has the old conversion."""

from __future__ import annotations


def _index(self) -> int:
    return int(self.handle.data.reshape(-1)[0])


def patch_interpreter() -> None:
    from triton.runtime import interpreter

    original = interpreter._patch_lang_tensor
    if getattr(original, "_numpy_scalar_safe", False):
        return

    def patched(tensor, scope) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", _index)  # restored with the rest when the scope closes

    patched._numpy_scalar_safe = True  # type: ignore[attr-defined]
    interpreter._patch_lang_tensor = patched
