"""What several commands share: the help texts of the common options and the policy knobs' options."""

from __future__ import annotations

from commands.options import pools_as_config, spec_options
from sim.engines.registry import CLI_KNOBS
from sim.run.config import POOL_KNOBS

POLICY_HELP = "the cache policy preset (`cli.py policies` lists them and what each models)"
MODEL_HELP = "the model preset: layer kinds, window, state sizes (sim/models/presets.py)"
GPU_HELP = "the GPU preset of the cost model (sim/cost/gpus.py)"
MODE_HELP = "timed: the SimPy engine with batching and time; replay: requests one after another, no time"
SLO_HELP = (
    "service-level objectives in seconds, e.g. ttft=2,tpot=0.1 (also e2e=; attainment=0.99 sets the share "
    "of requests that must meet them, 0.9 by default): the summary gains slo_attainment and "
    "goodput_requests_per_s (sim/run/slo.py)"
)
CALIBRATION_HELP = "fitted cost coefficients (`cli.py calibrate`) instead of the GPU preset's roofline"


def knob_option_names() -> tuple[str, ...]:
    """The knob and pool options by parameter name (a library message naming one is shown with the option);
    read when called: an engine registered later adds its knobs."""
    return (*CLI_KNOBS, *POOL_KNOBS)


def knob_options(fn):
    """The policy knobs every simulation command takes (not given: the preset's value)."""
    return spec_options(CLI_KNOBS, preset_default=True)(fn)


def config_from_options(options: dict) -> dict:
    """The SimConfig fields the knob and pool options give: ``knobs`` and the pools' sizes."""
    return {
        "knobs": {
            k: options.get(k) for k in CLI_KNOBS
        },  # a knob registered after the options were made: none
        **pools_as_config({k: options[k] for k in POOL_KNOBS}),
    }
