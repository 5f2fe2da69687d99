"""Roofline cost model and calibration files: hand-worked steps, monotonicity, the bound switch, round trips."""
import json

import pytest

from sim.cost import GPUS, CostModel, GPUSpec, StepShape, attended_sum, get_gpu, step_bytes, step_flops
from sim.cost.calibration import Calibration, CalibrationFit, load_calibration, save_calibration
from sim.cost.calibration_fit import fit_calibration
from sim.models import FULL, ModelSpec, get_model

# one FULL layer, dense: attention 2*8*2*4 + 2*8*1*4 = 192, MLP 3*8*16 = 384, LM head 32*8 = 256
TOY = ModelSpec(name="toy", layer_kinds=(FULL,), d_model=8, num_q_heads=2, num_kv_heads=1, head_dim=4, window=0,
                mamba_num_heads=0, mamba_head_dim=0, mamba_state_dim=0, mamba_conv_kernel=0, mamba_chunk=0,
                d_ff=16, vocab_size=32)
TOY_PARAMS = 192 + 384 + 256
SLOW_MEMORY = GPUSpec("slow-memory", peak_flops=1e30, mem_bandwidth=1000.0, mfu=1.0, bw_efficiency=1.0,
                      step_overhead_s=0.5)
SLOW_COMPUTE = GPUSpec("slow-compute", peak_flops=1000.0, mem_bandwidth=1e30, mfu=0.5, bw_efficiency=1.0,
                       step_overhead_s=0.25)


def test_toy_model_figures_by_hand():
    assert TOY.active_param_count() == TOY_PARAMS
    assert TOY.full_kv_bytes_per_token() == 2 * 1 * 4 * 2


def test_memory_bound_decode_is_bytes_over_bandwidth():
    shape = StepShape(decode=(99,))  # reads 99 cached tokens' KV and writes the new one
    expected_bytes = TOY_PARAMS * 2 + 100 * 16
    cost = CostModel(TOY, SLOW_MEMORY).roofline(shape)
    assert cost.bytes_read == expected_bytes == 3264
    assert cost.bound == "memory"
    assert CostModel(TOY, SLOW_MEMORY).step_time(shape) == pytest.approx(0.5 + 3264 / 1000.0)


def test_compute_bound_decode_is_flops_over_peak():
    shape = StepShape(decode=(99,))
    expected_flops = 2 * TOY_PARAMS + 4 * 2 * 4 * 100  # the new token attends to 100 keys
    assert step_flops(TOY, shape) == expected_flops == TOY.flops_per_token(100)
    assert CostModel(TOY, SLOW_COMPUTE).step_time(shape) == pytest.approx(0.25 + expected_flops / 500.0)


def test_prefill_chunk_flops_sum_per_token_flops():
    model = get_model("small")
    shape = StepShape(prefill=((600, 300),))
    assert step_flops(model, shape) == sum(model.flops_per_token(p + 1) for p in range(600, 900))


def test_attended_sum_matches_brute_force():
    for start in (0, 1, 5, 63, 64, 100):
        for count in (1, 2, 40, 70):
            for window in (None, 1, 64):
                brute = sum(min(p + 1, window or p + 1) for p in range(start, start + count))
                assert attended_sum(start, count, window) == brute, (start, count, window)


def test_step_mixes_prefill_and_decode():
    model = get_model("inkling")
    mixed = StepShape(prefill=((0, 512),), decode=(1000, 2000))
    assert mixed.num_tokens == 514
    alone = StepShape(prefill=((0, 512),))
    assert step_flops(model, mixed) == step_flops(model, alone) + model.flops_per_token(1001) + \
        model.flops_per_token(2001)
    assert step_bytes(model, mixed) > step_bytes(model, alone)


@pytest.mark.parametrize("name", ["small", "inkling", "gemma-4-26b-a4b", "qwen3-next", "gpt-oss-20b"])
def test_more_prefill_tokens_never_take_less_time(name):
    cost = CostModel(get_model(name), get_gpu("h200"))
    times = [cost.step_time(StepShape(prefill=((256, n),), decode=(512,) * 8)) for n in (1, 2, 16, 128, 1024, 8192)]
    assert times == sorted(times) and times[0] < times[-1]


@pytest.mark.parametrize("name", ["small", "inkling", "gemma-4-26b-a4b", "qwen3-next", "gpt-oss-20b"])
def test_longer_context_never_takes_less_time(name):
    cost = CostModel(get_model(name), get_gpu("h200"))
    decode = [cost.step_time(StepShape(decode=(ctx,) * 32)) for ctx in (0, 100, 1000, 10_000, 100_000)]
    prefill = [cost.step_time(StepShape(prefill=((cached, 512),))) for cached in (0, 1000, 10_000, 100_000)]
    assert decode == sorted(decode) and prefill == sorted(prefill)


def test_small_decode_is_memory_bound_and_big_prefill_compute_bound():
    cost = CostModel(get_model("small"), get_gpu("h200"))
    assert cost.roofline(StepShape(decode=(1000,))).bound == "memory"
    assert cost.roofline(StepShape(prefill=((0, 8192),))).bound == "compute"


def test_prefill_time_sums_its_chunks():
    cost = CostModel(get_model("small"), get_gpu("h100"))
    one_step = cost.step_time(StepShape(prefill=((1000, 3000),)))
    assert cost.prefill_time(4000, cached_len=1000) == pytest.approx(one_step)
    chunks = [StepShape(prefill=((1000, 1024),)), StepShape(prefill=((2024, 1024),)),
              StepShape(prefill=((3048, 952),))]
    assert cost.prefill_time(4000, 1000, chunk_size=1024) == pytest.approx(sum(map(cost.step_time, chunks)))
    assert cost.prefill_time(4000, cached_len=3000) < cost.prefill_time(4000)


@pytest.mark.parametrize("args", [(100, 100), (100, 150), (0, 0), (100, -1)])
def test_prefill_time_rejects_impossible_lengths(args):
    with pytest.raises(ValueError, match="cached_len"):
        CostModel(get_model("small"), get_gpu("h200")).prefill_time(*args)


@pytest.mark.parametrize("kwargs, words", [
    ({}, "neither prefill nor decode"),
    ({"prefill": ((0, 0),)}, r"prefill\[0\]"),
    ({"prefill": ((-1, 4),)}, r"prefill\[0\]"),
    ({"decode": (5, -2)}, r"decode\[1\]"),
    ({"decode": (True,)}, r"decode\[0\]"),
])
def test_bad_step_shapes_are_named(kwargs, words):
    with pytest.raises(ValueError, match=words):
        StepShape(**kwargs)


def test_gpu_presets():
    assert set(GPUS) == {"h200", "h100", "rtx4090", "cpu"}
    assert (GPUS["h200"].peak_flops, GPUS["h200"].mem_bandwidth) == (790e12, 4.3e12)
    with pytest.raises(ValueError, match="unknown gpu 'b300'"):
        get_gpu("b300")
    with pytest.raises(ValueError, match="mfu"):
        GPUSpec("bad", peak_flops=1.0, mem_bandwidth=1.0, mfu=0.0, bw_efficiency=1.0, step_overhead_s=0.0)


# ---- calibration ----

CAL = Calibration(model="small", gpu="h200", overhead_s=0.002, s_per_prefill_token=3e-6, s_per_decode_token=5e-5,
                  s_per_context_token=1e-9, fit=CalibrationFit(mape=0.04, num_samples=12))


def _synthetic_shapes() -> list[StepShape]:
    shapes = [StepShape(prefill=((c, n),)) for c in (0, 512, 4096) for n in (64, 1024, 8192)]
    shapes += [StepShape(decode=(ctx,) * b) for ctx in (100, 3000) for b in (1, 16, 128)]
    return shapes + [StepShape(prefill=((2048, 256),), decode=(5000,) * 4)]


def test_calibration_predicts_its_linear_model():
    shape = StepShape(prefill=((10, 5),), decode=(20,))
    attended = (11 + 12 + 13 + 14 + 15) + 21
    assert CAL.predict_s(shape) == pytest.approx(0.002 + 5 * 3e-6 + 5e-5 + attended * 1e-9)
    assert CostModel(get_model("small"), get_gpu("h200"), CAL).step_time(shape) == CAL.predict_s(shape)


def test_calibration_must_match_model_and_gpu():
    with pytest.raises(ValueError, match="calibration is for model 'small'"):
        CostModel(get_model("tiny"), get_gpu("h200"), CAL)
    with pytest.raises(ValueError, match="calibration is for gpu 'h200'"):
        CostModel(get_model("small"), get_gpu("h100"), CAL)


def test_calibration_round_trip_is_exact_and_deterministic(tmp_path):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    save_calibration(CAL, first)
    save_calibration(load_calibration(first), second)
    assert load_calibration(first) == CAL
    assert first.read_bytes() == second.read_bytes()
    no_fit = Calibration("tiny", "cpu", 0.0, 0.25, 0.5, 0.75)  # within the bounds load_calibration checks
    save_calibration(no_fit, first)
    assert load_calibration(first) == no_fit


def test_fit_recovers_known_coefficients():
    truth = (0.0015, 2.5e-6, 4e-5, 3e-10)
    samples = [(s, Calibration("m", "g", *truth).predict_s(s)) for s in _synthetic_shapes()]
    fitted = fit_calibration(samples, model="small", gpu="h200")
    assert fitted.coefficients() == pytest.approx(truth, rel=1e-6)
    assert fitted.fit.num_samples == len(samples) and fitted.fit.mape < 1e-9
    assert (fitted.model, fitted.gpu) == ("small", "h200")


def test_fit_keeps_coefficients_non_negative():
    # times that fall with context: plain least squares would give a negative context coefficient
    samples = [(s, 0.01 + 1e-5 * s.num_tokens - 1e-9 * s.attended_context()) for s in _synthetic_shapes()]
    samples = [(s, t) for s, t in samples if t > 0]
    fitted = fit_calibration(samples)
    assert min(fitted.coefficients()) >= 0 and fitted.s_per_context_token == 0
    assert fitted.fit.mape > 0


def test_fit_reports_held_out_error_on_contiguous_folds():
    truth = Calibration("m", "g", 0.0015, 2.5e-6, 4e-5, 3e-10)
    shapes = _synthetic_shapes()
    exact = fit_calibration([(s, truth.predict_s(s)) for s in shapes])
    assert exact.fit.num_folds == 4 and exact.fit.holdout_mape < 1e-9
    # the last quarter of the run is 30% slower than the rest: in-sample the fit averages it away,
    # held out it is predicted by the other three quarters alone
    slow_tail = [(s, truth.predict_s(s) * (1.3 if i >= 3 * len(shapes) // 4 else 1.0)) for i, s in enumerate(shapes)]
    fitted = fit_calibration(slow_tail)
    assert fitted.fit.holdout_mape > fitted.fit.mape > 0


def test_fit_skips_the_held_out_error_with_too_few_samples():
    samples = [(StepShape(decode=(n,)), 0.01 + 1e-5 * n) for n in (1, 2, 3)]
    fitted = fit_calibration(samples, num_folds=2)
    assert fitted.fit.holdout_mape is None and fitted.fit.num_folds is None
    with pytest.raises(ValueError, match="num_folds"):
        fit_calibration(samples, num_folds=1)


def test_calibration_with_held_out_error_round_trips(tmp_path):
    cal = Calibration("small", "h200", 0.002, 3e-6, 5e-5, 1e-9, CalibrationFit(0.04, 12, 0.07, 4))
    path = tmp_path / "cal.json"
    save_calibration(cal, path)
    assert load_calibration(path) == cal
    assert json.loads(path.read_text())["fit"] == {"mape": 0.04, "num_samples": 12, "holdout_mape": 0.07,
                                                   "num_folds": 4}


@pytest.mark.parametrize("samples, words", [([], "at least one"), ([(StepShape(decode=(1,)), 0.0)], "> 0"),
                                            ([("shape", 1.0)], "not StepShape")])
def test_fit_rejects_bad_samples(samples, words):
    with pytest.raises(ValueError, match=words):
        fit_calibration(samples)


def _good_file() -> dict:
    return {"model": "small", "gpu": "h200", "overhead_s": 0.001, "s_per_prefill_token": 1e-6,
            "s_per_decode_token": 1e-5, "s_per_context_token": 0.0, "fit": {"mape": 0.1, "num_samples": 3}}


@pytest.mark.parametrize("edit, field", [
    (lambda d: d.pop("s_per_decode_token"), "s_per_decode_token"),
    (lambda d: d.update(overhead_s=-1.0), "overhead_s"),
    (lambda d: d.update(s_per_prefill_token="1e-6"), "s_per_prefill_token"),
    (lambda d: d.update(s_per_context_token=True), "s_per_context_token"),
    (lambda d: d.update(model=""), "model"),
    (lambda d: d.update(gpu=7), "gpu"),
    (lambda d: d.update(overheads=1.0), "overheads"),
    (lambda d: d.update(fit={"mape": 0.1}), "fit"),
    (lambda d: d.update(fit={"mape": 0.1, "num_samples": 0}), "fit.num_samples"),
    (lambda d: d.update(fit={"mape": -0.1, "num_samples": 2}), "fit.mape"),
    (lambda d: d.update(fit={"mape": 0.1, "num_samples": 2, "holdout_mape": 0.2}), "fit"),
    (lambda d: d.update(fit={"mape": 0.1, "num_samples": 2, "holdout_mape": 0.2, "num_folds": 1}), "fit.num_folds"),
    (lambda d: d.update(fit={"mape": 0.1, "num_samples": 2, "holdout_mape": None, "num_folds": 4}),
     "fit.holdout_mape"),
])
def test_bad_calibration_files_name_file_and_field(tmp_path, edit, field):
    data = _good_file()
    edit(data)
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=f"field '{field}'") as info:
        load_calibration(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text, words", [("{not json", "not valid JSON"), ("[1, 2]", "JSON object")])
def test_unreadable_calibration_files(tmp_path, text, words):
    path = tmp_path / "cal.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=words) as info:
        load_calibration(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match="cannot read"):
        load_calibration(tmp_path / "missing.json")
