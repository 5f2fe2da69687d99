"""Compile every executor kernel ahead of time for sm_90 (H100/H200) with triton 3.6, without a GPU.

Triton's wheel ships ptxas, so this runs on a CPU-only machine and catches what the interpreter
accepts but the GPU compiler rejects (e.g. `tl.dot` with K < 16). By default: one signature per kernel,
shapes of the `small` preset, float32 and bfloat16, the GPU's tile constants. With --from-run: exactly
the specialised variants the GPU check's `execute` launches (scripts/capture_variants.py runs it on this
CPU with every launch intercepted), which is what the GPU's JIT will compile. Exits non-zero if any
variant fails.

    python scripts/compile_sm90.py [--model small] [--dtypes fp32,bf16]
    python scripts/compile_sm90.py --from-run [--output-len N]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

# must precede every import of a @triton.jit kernel: interpreted kernels cannot be compiled
os.environ["TRITON_INTERPRET"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import click  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from executor.kernels import config  # noqa: E402
from executor.kernels.attention import paged_attention_kernel  # noqa: E402
from executor.kernels.conv import causal_conv_kernel  # noqa: E402
from executor.kernels.matmul import bi_matmul_kernel  # noqa: E402
from executor.kernels.rmsnorm import rmsnorm_kernel  # noqa: E402
from executor.kernels.scan import ssm_scan_kernel  # noqa: E402
from executor.kernels.silu_mul import silu_mul_kernel  # noqa: E402
from sim.models import ModelSpec, get_model  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)
_pow2 = triton.next_power_of_2
I32, F32 = "i32", "fp32"


def _sig(kernel, ptrs: dict[str, str], scalars: dict[str, str], constexprs: dict) -> dict[str, str]:
    """Signature in the kernel's argument order; a name in none of the three maps is an error."""
    sig = {}
    for name in kernel.arg_names:
        kind = ptrs.get(name) or scalars.get(name) or ("constexpr" if name in constexprs else None)
        if kind is None:
            raise KeyError(f"{kernel.__name__}: no type for argument {name!r}")
        sig[name] = kind
    return sig


def variants(spec: ModelSpec, act: str) -> list[tuple[str, object, dict, dict]]:
    """(label, kernel, signature, constexprs) for every kernel the model launches."""
    ptr, i32p = "*" + act, "*i32"
    bm, bn, bk = config.MATMUL_TILE
    out = []

    def add(label, kernel, ptrs, scalars, consts):
        out.append((f"{label}[{act}]", kernel, _sig(kernel, ptrs, scalars, consts), consts))

    add(
        "matmul",
        bi_matmul_kernel,
        dict(x_ptr=ptr, w_ptr=ptr, o_ptr=ptr),
        dict.fromkeys(["M", "N", "K", "s_xm", "s_wn", "s_om"], I32),
        dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, BY_SUM=False),
    )
    add(
        "rmsnorm",
        rmsnorm_kernel,
        dict(x_ptr=ptr, w_ptr=ptr, o_ptr=ptr),
        {**dict.fromkeys(["M", "D", "s_xm", "s_om"], I32), "eps": F32},
        dict(BLOCK_R=config.ROW_BLOCK, BLOCK_D=triton.next_power_of_2(spec.d_model)),
    )
    add(
        "silu_mul",
        silu_mul_kernel,
        dict(g_ptr=ptr, u_ptr=ptr, o_ptr=ptr),
        dict.fromkeys(["M", "F", "s_gm", "s_um", "s_om"], I32),
        dict(BLOCK_R=config.ROW_BLOCK, BLOCK_C=config.COL_BLOCK),
    )
    add(
        "causal_conv",
        causal_conv_kernel,
        dict(ext_ptr=ptr, item_ptr=i32p, w_ptr=ptr, b_ptr=ptr, o_ptr=ptr),
        dict.fromkeys(["T", "C", "s_e", "s_o"], I32),
        dict(KSIZE=spec.mamba_conv_kernel, BLOCK_T=config.ROW_BLOCK, BLOCK_C=config.COL_BLOCK),
    )
    scan_ptrs = {
        **dict.fromkeys(["x_ptr", "dt_ptr", "b_ptr", "c_ptr", "y_ptr", "beta_ptr"], ptr),
        **dict.fromkeys(["a_ptr", "d_ptr", "dtb_ptr", "st_ptr"], "*fp32"),
        **dict.fromkeys(
            [
                "q_off_ptr",
                "start_ptr",
                "end_ptr",
                "sid_ptr",
                "ck_off_ptr",
                "ck_cnt_ptr",
                "ck_pos_ptr",
                "ck_dst_ptr",
            ],
            i32p,
        ),
    }
    for gdn in (False, True):  # Mamba2's update and GatedDeltaNet's
        add(
            "ssm_scan" + ("-gdn" if gdn else ""),
            ssm_scan_kernel,
            scan_ptrs,
            dict.fromkeys(
                [
                    "H",
                    "P",
                    "N",
                    "heads_per_group",
                    "s_xt",
                    "s_dtt",
                    "s_bt",
                    "s_ct",
                    "s_yt",
                    "s_betat",
                    "s_ss",
                ],
                I32,
            ),
            dict(BLOCK_H=1, BLOCK_P=_pow2(spec.mamba_head_dim), BLOCK_N=_pow2(spec.mamba_state_dim), GDN=gdn),
        )
    group = spec.num_q_heads // spec.num_kv_heads
    attn_ptrs = {
        **dict.fromkeys(["q_ptr", "k_ptr", "v_ptr", "o_ptr"], ptr),
        **dict.fromkeys(
            [
                "slots_ptr",
                "tile_item_ptr",
                "tile_lo_ptr",
                "q_off_ptr",
                "start_ptr",
                "end_ptr",
                "slot_off_ptr",
            ],
            i32p,
        ),
    }
    add(
        "paged_attention",
        paged_attention_kernel,
        attn_ptrs,
        {
            **dict.fromkeys(["s_qt", "s_qh", "s_kt", "s_kh", "s_ot", "s_oh", "window", "head_dim"], I32),
            "sm_scale": F32,
        },
        dict(
            GROUP=group,
            BLOCK_G=triton.next_power_of_2(group),
            BLOCK_M=config.ATTN_BLOCK_M,
            BLOCK_N=config.ATTN_BLOCK_N,
            BLOCK_D=triton.next_power_of_2(spec.head_dim),
            BY_SUM=False,
        ),
    )
    return out


def compile_one(source: ASTSource, options: dict) -> tuple[int, int]:
    """Compile for sm_90; returns (shared memory bytes, cubin bytes)."""
    compiled = triton.compile(source, target=TARGET, options=options)
    return compiled.metadata.shared, len(compiled.asm["cubin"])


def captured_variants(output_len: int | None) -> list[tuple[str, ASTSource, dict]]:
    """The variants scripts/gpu_check.sh's `execute` launches, from the same run on this CPU (pools cut
    down to fit here: their sizes change no launch's specialisation)."""
    from capture_variants import intercepted_launches
    from gpu_check_profiles import GPU

    from cli import cli

    trace_args = list(GPU.trace)
    if output_len is not None:
        trace_args[trace_args.index("--output-len") + 1] = str(output_len)
    knobs = list(GPU.knobs)
    knobs[knobs.index("--pool-tokens") + 1], knobs[knobs.index("--mamba-states") + 1] = "12800", "64"
    with tempfile.TemporaryDirectory() as folder, intercepted_launches() as found:
        trace = str(Path(folder) / "s1.jsonl")
        cli.main(["trace", "gen", "s1", *trace_args, "-o", trace], standalone_mode=False)
        cli.main(
            [
                "execute",
                "--trace",
                trace,
                "--model",
                GPU.model,
                "--shrink",
                "none",
                "--device",
                "cpu",
                "--kernels",
                "triton",
                "--gpu",
                GPU.gpu,
                *knobs,
                "--format",
                "json",
            ],
            standalone_mode=False,
        )
    return [(v.label, v.source(), v.options) for v in found]


def unspecialised_variants(model_name: str, dtypes: str) -> list[tuple[str, ASTSource, dict]]:
    spec, options = get_model(model_name), {"num_warps": config.NUM_WARPS}
    return [
        (label, ASTSource(fn=kernel, signature=signature, constexprs=constexprs), options)
        for act in dtypes.split(",")
        for label, kernel, signature, constexprs in variants(spec, act.strip())
    ]


@click.command()
@click.option("--model", "model_name", default="small", show_default=True, help="model preset for shapes")
@click.option("--dtypes", default="fp32,bf16", show_default=True, help="activation dtypes to compile")
@click.option("--from-run", is_flag=True, help="compile the variants the GPU check's execute launches")
@click.option(
    "--output-len", type=click.IntRange(min=1), help="with --from-run: shorter outputs than the check's"
)
def main(model_name: str, dtypes: str, from_run: bool, output_len: int | None) -> None:
    todo = captured_variants(output_len) if from_run else unspecialised_variants(model_name, dtypes)
    failures = 0
    for label, source, options in todo:
        began = time.perf_counter()
        try:
            shared, cubin = compile_one(source, options)
        except Exception:  # report every failing variant, then fail once at the end
            failures += 1
            click.echo(f"FAIL {label}\n{traceback.format_exc()}", err=True)
            continue
        click.echo(f"ok   {label}: shared {shared} B, cubin {cubin} B, {time.perf_counter() - began:.1f} s")
    if failures:
        raise SystemExit(f"{failures} kernel variant(s) failed to compile for sm_90")


if __name__ == "__main__":
    main()
