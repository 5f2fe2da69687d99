"""The generators' parameter checks: each refusal names the generator and the parameter."""

from __future__ import annotations

from sim.trace.checks import MAX_LEN, MAX_TIME_S, shown

MAX_GENERATED_REQUESTS = 1_000_000  # about 1 GB of requests in memory


def require(kind: str, condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(f"{kind}: {message}")


def require_positive(kind: str, **values: int) -> None:
    for name, value in values.items():
        require(
            kind,
            isinstance(value, int) and 1 <= value <= MAX_LEN,
            f"{name} must be a positive integer <= {MAX_LEN}, got {shown(value)}",
        )


def require_count(kind: str, num_requests: int, what: str) -> None:
    """A trace is built in memory: refuse, before building it, one that would not fit."""
    require(
        kind,
        num_requests <= MAX_GENERATED_REQUESTS,
        f"{what} = {num_requests} requests; at most {MAX_GENERATED_REQUESTS} are generated",
    )


def require_time(kind: str, name: str, value: float) -> None:
    require(
        kind,
        isinstance(value, (int, float)) and 0 <= value < MAX_TIME_S,
        f"{name} must be a finite number >= 0 and < {MAX_TIME_S:g} s, got {shown(value)}",
    )
