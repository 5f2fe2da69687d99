"""The kernel variants a GPU run will compile, found on a CPU by running it with every launch intercepted.

Triton compiles one variant per specialisation of a launch's arguments: an int equal to 1 becomes a
constant, ints and pointers divisible by 16 carry a divisibility hint, and those change the code. So the
variants that matter are the ones the real run launches. Here the run goes through for real on a CPU,
except that each launch only records its specialisation, computed by triton's own binder for an sm_90
target, and launches nothing (kernel outputs stay uninitialised; only shapes and layouts are real).

Must be imported with TRITON_INTERPRET=0 set before any kernel module (compile_sm90.py does that).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.compiler.compiler import make_backend
from triton.runtime import jit

TARGET = GPUTarget("cuda", 90, 32)


@dataclass(frozen=True)
class Variant:
    kernel: jit.JITFunction
    signature: dict
    constexprs: dict
    attrs: dict
    options: dict

    @property
    def label(self) -> str:
        """The kernel, the runtime ints it was specialised to 1 on, and how many divisibility hints it has."""
        ones = [
            self.kernel.arg_names[path[0]]
            for path, value in self.constexprs.items()
            if not self.kernel.params[path[0]].is_constexpr and value == 1
        ]
        hints = sum(bool(value) for value in self.attrs.values())
        return f"{self.kernel.__name__}[{''.join(f'{name}=1 ' for name in ones)}{hints} hints]"

    def source(self) -> ASTSource:
        return ASTSource(
            fn=self.kernel, signature=self.signature, constexprs=self.constexprs, attrs=self.attrs
        )


def _key(kernel, signature: dict, constexprs: dict, attrs: dict) -> tuple:
    return (
        kernel.__name__,
        tuple(signature.items()),
        tuple(sorted(constexprs.items(), key=str)),
        tuple(sorted((k, str(v)) for k, v in attrs.items())),
    )


@contextmanager
def intercepted_launches():
    """Within the block, kernel launches record their variant instead of running; yields the list."""
    from executor.kernels import config

    backend, binders, found, seen = make_backend(TARGET), {}, [], set()
    original_run, original_check = jit.JITFunction.run, config.check_device

    def record(self, *args, grid, warmup, **kwargs):
        if self not in binders:
            binders[self] = jit.create_function_from_signature(self.signature, self.params, backend)
        bound, specialization, options = binders[self](*args, **kwargs)
        options, signature, constexprs, attrs = self._pack_args(
            backend, kwargs, bound, specialization, options
        )
        key = _key(self, signature, constexprs, attrs)
        if key not in seen:
            seen.add(key)
            found.append(Variant(self, signature, constexprs, attrs, options.__dict__))
        return None

    jit.JITFunction.run, config.check_device = record, lambda *tensors: None  # CPU tensors stand in
    try:
        yield found
    finally:
        jit.JITFunction.run, config.check_device = original_run, original_check
