"""oxygen-bench: the four execution modes (isolated, parallel, shared, oxygen) on one model and
one synthetic observation stream, swept over k, N, S, presets and request arrival patterns.
`oxygen-bench <name> ...` runs a registered benchmark instead (bench/registry.py, listed below).

Writes report.md (paper-style tables + pass/fail targets), results.json (every row) and PNG
plots into --out. --json: one JSON object (summary + targets) on the last stdout line.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from ..engine import (MODES, PRESETS, RUNNABLE_PRESETS, build_tiny_tokenizer, check_device,
                      frame_unsupported_reason, init_model, load_model_config)
from .commands import run_main, usage
from .engine_args import add_knob_args
from ..bench import patterns as pat
from ..bench import registry
from ..bench.power import PowerMeter
from ..bench.rate import rates_arg, run_targets
from ..bench.rate import target as rate_target
from ..bench.sweep import (Context, RunSpec, default_warmup, micro_costs, probe_in_subprocess, run,
                    stage_micro)

# measured frames per run when --frames is not given (the big presets get fewer)
DEFAULT_FRAMES = {"tiny": 8, "balanced": 8, "small": 3, "pi05": 5}


def _ints(text: str) -> list[int]:
    vals = [int(x) for x in text.split(",") if x.strip()]
    if not vals or min(vals) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return vals


def _names(choices):
    def parse(text: str) -> list[str]:
        vals = [x.strip() for x in text.split(",") if x.strip()]
        if vals == ["none"]:
            return []
        bad = [v for v in vals if v not in choices]
        if bad:
            raise argparse.ArgumentTypeError(f"unknown {bad}; choose from {list(choices)} or none")
        return vals
    return parse


def _presets(text: str) -> list[str]:
    """Runnable presets (every preset runs today); one its family cannot run gets the reason."""
    for name in (x.strip() for x in text.split(",")):
        if name in PRESETS and frame_unsupported_reason(PRESETS[name]):
            raise argparse.ArgumentTypeError(
                f"{frame_unsupported_reason(PRESETS[name])}; runnable: {list(RUNNABLE_PRESETS)}")
    return _names(RUNNABLE_PRESETS)(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="oxygen-bench [<benchmark>]", description=__doc__,
                                epilog=usage("benchmarks (oxygen-bench <name> --help)", registry.BENCHMARKS),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", type=_presets, default=None,
                   help="comma list of presets (default tiny,small,balanced on cpu; pi05 on cuda)")
    p.add_argument("--grid-presets", type=_presets, default=None,
                   help="presets swept over the whole k x N x S grid (default: balanced, or the "
                        "last --preset); the others run every k at max N, max S")
    p.add_argument("--model-config", default=None, help="JSON/YAML overriding preset fields")
    p.add_argument("--modes", type=_names(MODES), default=list(MODES))
    p.add_argument("--k", type=_ints, default=[1, 5, 10], help="decode steps per frame (list)")
    p.add_argument("--N", type=_ints, default=[5, 10, 15, 20, 30], help="tokens per request (list)")
    p.add_argument("--S", type=_ints, default=[5, 10], help="denoising steps (list)")
    p.add_argument("--frames", type=int, default=None,
                   help=f"measured frames per run (default per preset: {DEFAULT_FRAMES})")
    p.add_argument("--warmup", type=int, default=None,
                   help="frames before measuring (default: ceil(N/k)+1 for oxygen, 1 otherwise)")
    p.add_argument("--patterns", type=_names(pat.PATTERNS), default=list(pat.PATTERNS),
                   help="arrival patterns to run (comma list or none)")
    p.add_argument("--pattern-modes", type=_names(MODES), default=["oxygen", "isolated"])
    p.add_argument("--pattern-frames", type=int, default=30)
    p.add_argument("--pattern-setting", type=_ints, default=[5, 20, 10], metavar="k,N,S")
    p.add_argument("--fluct-frames", type=int, default=pat.FLUCT_CYCLE,
                   help="frames of the fluctuating workload (0: skip); one cycle is 119")
    p.add_argument("--fluct-setting", type=_ints, default=[5, 30, 10], metavar="k,N,S")
    p.add_argument("--fluct-peak", type=float, default=2.0, help="peak requests per frame")
    p.add_argument("--memory-probes", choices=("auto", "on", "off"), default="auto",
                   help="per-mode peak RSS from fresh subprocesses (auto: on for cpu)")
    p.add_argument("--memory-setting", type=_ints, default=[20, 10], metavar="N,S")
    p.add_argument("--rate-targets", type=rates_arg, default=[],
                   help="action-rate targets in Hz (comma list): oxygen with target_action_hz on "
                        "the first grid preset, target vs achieved table (bench/rate.py)")
    p.add_argument("--rate-setting", type=_ints, default=[1, 30, 30, 10], metavar="k_min,k_max,N,S")
    p.add_argument("--rate-only", action="store_true",
                   help="run only the --rate-targets runs (no grid, patterns or probes)")
    p.add_argument("--profile", choices=("on", "off"), default="on",
                   help="one extra frame per preset and mode (largest N, S; smallest k) under "
                        "torch.profiler -> profile_<preset>_<mode>.txt")
    p.add_argument("--quick", action="store_true", help="small grid for CI smoke tests")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    # the engine knobs every run of the sweep shares, as their Knob declares them (all modes alike)
    add_knob_args(p, ("max_active_requests", "device", "dtype", "attention_backend",
                      "compile_denoise", "cuda_graphs", "linear_layout", "seed"))
    p.add_argument("--bandwidth-gbs", type=float, default=None,
                   help="memory bandwidth for the floor section (default: known devices: Thor 273, "
                        "H200 4800, RTX 4090 1008)")
    p.add_argument("--out", default=None, help="output folder (default benchmarks/results/<device>-<date>)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--json", action="store_true", help="last stdout line: one JSON object")
    p.add_argument("--from-json", default=None, metavar="RESULTS",
                   help="re-render report.md, plots and targets from a results.json (no runs)")
    a = p.parse_args(argv)
    if a.quick:
        a.preset = a.preset or ["tiny"]
        a.k, a.N, a.S = [1, 5], [5, 10], [5]
        a.frames = a.frames or 3
        a.pattern_frames, a.pattern_setting = 8, [2, 5, 5]
        a.fluct_frames, a.fluct_setting, a.fluct_peak = 40, [5, 10, 5], 1.0
        a.memory_setting = [5, 5]
        if a.memory_probes == "auto":
            a.memory_probes = "off"
    cuda = a.device.startswith("cuda")
    a.preset = a.preset or (["pi05"] if cuda else ["tiny", "small", "balanced"])
    if a.grid_presets is None:
        a.grid_presets = ["balanced"] if "balanced" in a.preset else a.preset[-1:]
    if a.memory_probes == "auto":
        a.memory_probes = "off" if cuda else "on"
    if a.rate_only:
        if not a.rate_targets:
            p.error("--rate-only needs --rate-targets")
        a.preset = a.grid_presets[:1]
        a.modes, a.patterns, a.fluct_frames, a.memory_probes = [], [], 0, "off"
    for name, val in (("pattern-setting", a.pattern_setting), ("fluct-setting", a.fluct_setting)):
        if len(val) != 3:
            p.error(f"--{name} takes k,N,S")
    if len(a.rate_setting) != 4:
        p.error("--rate-setting takes k_min,k_max,N,S")
    if len(a.memory_setting) != 2:
        p.error("--memory-setting takes N,S")
    if a.frames is not None and a.frames < 1:
        p.error("--frames must be >= 1")
    try:
        check_device(a.device)  # one line with what to install, not argparse's usage block
    except ValueError as exc:
        p.exit(2, f"oxygen-bench: {exc}\n")
    if a.from_json and a.out is None:
        a.out = str(Path(a.from_json).parent)
    a.out = Path(a.out or f"benchmarks/results/{'cuda' if cuda else 'cpu'}-{dt.date.today().isoformat()}")
    return a


def plan(a: argparse.Namespace) -> dict[str, list[RunSpec]]:
    """Every run, grouped by preset. k-independent modes (isolated, parallel and shared all
    finish each request inside its frame) run once per (N, S) with k recorded as None."""
    out: dict[str, list[RunSpec]] = {}
    for preset in a.preset:
        frames = a.frames or DEFAULT_FRAMES.get(preset, 5)
        full = preset in a.grid_presets
        ns, ss = (a.N, a.S) if full else ([max(a.N)], [max(a.S)])
        specs = []
        for s in ss:
            for n in ns:
                for mode in a.modes:
                    for k in (a.k if mode == "oxygen" else [a.k[0]]):
                        w = a.warmup if a.warmup is not None else default_warmup(mode, k, n)
                        # one frame profile per preset and mode, at the biggest N, S and the
                        # smallest k (the largest batch)
                        prof = (a.profile == "on" and n == max(ns) and s == max(ss)
                                and k == (min(a.k) if mode == "oxygen" else a.k[0]))
                        specs.append(RunSpec(preset, mode, k, n, s, frames, w,
                                             arrivals=[1] * (w + frames), profile=prof))
        if preset == a.grid_presets[0]:
            k, n, s = a.pattern_setting
            # one warm-up length for every mode, so all modes see the same arrivals frame by frame
            w = default_warmup("oxygen", k, n) if a.warmup is None else a.warmup
            for name in a.patterns:
                for mode in a.pattern_modes:
                    arr = pat.arrivals(name, w + a.pattern_frames, seed=a.seed)
                    specs.append(RunSpec(preset, mode, k, n, s, a.pattern_frames, w, arr,
                                         group=f"pattern:{name}", keep_trace=True))
            if a.fluct_frames:
                k, n, s = a.fluct_setting
                arr = pat.fluctuating(a.fluct_frames, a.fluct_peak)
                specs.append(RunSpec(preset, "oxygen", k, n, s, a.fluct_frames, 0, arr,
                                     group="fluctuating", keep_trace=True))
        out[preset] = specs
    return out


def micro_batches(specs: list[RunSpec], max_active: int) -> list[int]:
    """Decode batch sizes to micro-benchmark: a spread for the decode-cost table and the batch
    every oxygen grid run settles at with one request per frame (ceil(N/k), capped)."""
    steady = {min(-(-s.N // s.k), max_active) for s in specs
              if s.mode == "oxygen" and s.group == "grid"}
    return sorted({1, 4, 8, 16, 30} | steady)


def environment(a: argparse.Namespace) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    env = {"date": dt.datetime.now().isoformat(timespec="seconds"), "cpu": cpu,
           "cpu_count": __import__("os").cpu_count(), "torch": torch.__version__,
           "python": platform.python_version(), "threads": a.threads, "device": a.device,
           "dtype": a.dtype, "command": "oxygen-bench " + " ".join(sys.argv[1:])}
    if a.device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(torch.device(a.device))
    return env


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in registry.BENCHMARKS:  # oxygen-bench <name> ...: a registered one
        return run_main(registry.BENCHMARKS[argv[0]].module, f"oxygen-bench {argv[0]}", argv[1:])
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    t_start = time.perf_counter()
    if a.from_json:
        old = json.loads(Path(a.from_json).read_text())
        for key in ("grid_presets", "device"):
            setattr(a, key, old["args"][key])
        return finish(a, old["env"], old["rows"], old["decode_micro"], old["memory_probes"], 0.0,
                      args_json=old["args"], rate_rows=old.get("rate_targets", []))
    try:
        configs = {p: load_model_config(p, a.model_config) for p in a.preset}
    except (ValueError, OSError) as exc:
        print(f"oxygen-bench: {exc}", file=sys.stderr)
        return 2
    runs = plan(a)
    power = PowerMeter.open(a.device)
    total = sum(s.total for specs in runs.values() for s in specs)
    rows: list[dict] = []
    micro: dict[str, dict] = {}
    memory: list[dict] = []
    rate_rows: list[dict] = []
    with tqdm(total=total, desc="oxygen-bench", unit="frame", file=sys.stderr,
              dynamic_ncols=True, mininterval=1.0) as bar:
        for preset, specs in runs.items():
            mc = configs[preset]
            model = init_model(mc, seed=a.seed, device=a.device, dtype=a.dtype)
            tok = build_tiny_tokenizer(min(mc.vocab_size, 2048))
            ctx = Context(mc, model, tok, a.device, a.dtype, a.seed, a.max_active,
                          a.attention_backend, power, a.compile, a.linear_layout, a.cuda_graphs)
            if a.rate_targets and preset == a.grid_presets[0]:
                k_min, k_max, n, s = a.rate_setting
                bar.set_postfix_str(f"{preset} action-rate targets {a.rate_targets}")
                rate_rows = run_targets(ctx, a.rate_targets, k_min, k_max, n, s)
            if not specs:
                continue
            bar.set_postfix_str(f"{preset} stage micro-benchmarks")
            micro[preset] = stage_micro(ctx, sorted({s.S for s in specs}),
                                        micro_batches(specs, a.max_active))
            for spec in specs:
                bar.set_postfix_str(f"{preset} {spec.group} {spec.mode} k={spec.k} N={spec.N} S={spec.S}")
                row, _ = run(ctx, spec, on_frame=bar.update,
                             costs=micro_costs(micro[preset], spec.S))
                if spec.mode != "oxygen" and spec.group == "grid":
                    row["k"] = None  # k-independent mode
                row["params_m"] = sum(p.numel() for p in model.parameters()) / 1e6
                rows.append(row)
            del ctx, model
    if a.memory_probes == "on":
        memory = memory_probes(a)
    env = environment(a)
    env["wall_s"] = time.perf_counter() - t_start
    env["energy_source"] = power.source if power else None
    return finish(a, env, rows, micro, memory, t_start, rate_rows=rate_rows)


def write_profiles(rows: list[dict], out: Path) -> None:
    """profile_<preset>_<mode>.txt for every row that carries a frame profile."""
    for r in rows:
        p = r.get("profile")
        if not p or "table" not in p:
            continue
        k = "" if r["k"] is None else f" k={r['k']}"
        head = (f"# one {r['mode']} frame{k} N={r['N']} S={r['S']} ({r['preset']}) under torch.profiler, "
                f"after the measured frames\n# wall {p['wall_ms']:.2f} ms with the profiler's overhead "
                f"(measured mean without it: {r['frame_ms_mean']:.2f} ms); CPU self {p['cpu_self_ms']:.2f} ms; "
                f"aten ops {p['ops']}")
        if p.get("device_self_ms") is not None:
            head += f"; device self {p['device_self_ms']:.2f} ms; kernel launches {p['kernel_launches']}"
        (out / f"profile_{r['preset']}_{r['mode']}.txt").write_text(head + "\n\n" + p["table"] + "\n")


def finish(a: argparse.Namespace, env: dict, rows: list[dict], micro: dict, memory: list[dict],
           t_start: float, args_json: dict | None = None, rate_rows: list[dict] | None = None) -> int:
    from ..bench.report import build_targets, write_report  # matplotlib import only when needed

    args_json = args_json or {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()}
    results = {"env": env, "args": args_json, "rows": rows, "decode_micro": micro,
               "memory_probes": memory, "rate_targets": rate_rows or [], "targets": []}
    a.out.mkdir(parents=True, exist_ok=True)
    write_profiles(rows, a.out)
    (a.out / "results.json").write_text(json.dumps(results, indent=1))  # raw rows first
    results["targets"] = targets = build_targets(rows, micro, memory, a)
    if rate_rows:
        targets.append(rate_target(rate_rows))
    (a.out / "results.json").write_text(json.dumps(results, indent=1))
    plots: list[str] = []
    if not a.no_plots:
        from ..bench.plots import make_plots

        plots = make_plots(results, a.out)
    write_report(results, plots, a.out)
    from ..bench.floor import report_section

    with open(a.out / "report.md", "a") as f:
        f.write(report_section(results, a.bandwidth_gbs, a.model_config))
    write_table4(results, a.grid_presets, a.out)
    (a.out / "results.json").write_text(json.dumps(results, indent=1))
    if t_start:
        env["wall_s"] = time.perf_counter() - t_start
    summary = {
        "out": str(a.out), "wall_s": env["wall_s"], "runs": len(rows),
        "targets": {t["name"]: t["status"] for t in targets},
        "passed": all(t["status"] != "fail" for t in targets),
        "headline": next((t for t in targets if t["name"] == "oxygen_4x_isolated"), None),
        "rows": [{k: r[k] for k in ("preset", "group", "mode", "k", "N", "S", "action_hz",
                                    "tokens_per_s", "frame_ms_p50", "frame_ms_p99", "mean_batch")}
                 for r in rows if r["group"] == "grid"],
    }
    for t in targets:
        print(f"[{t['status'].upper():4s}] {t['name']}: {t['detail']}")
    print(f"oxygen-bench: {len(rows)} runs in {env['wall_s']:.0f} s -> {a.out}/report.md")
    if a.json:
        print(json.dumps(summary), flush=True)
    return 0


def write_table4(results: dict, presets: list[str], out: Path) -> None:
    """table4.md: the paper's Table 4 layout for every grid preset the run measured (beside the
    paper's numbers for its family; StarVLA presets also compared by heads: bench/table4.py)."""
    from ..bench.table4 import report as table4_report

    measured = [p for p in presets if any(r["preset"] == p and r["group"] == "grid"
                                          and r["mode"] == "isolated" for r in results["rows"])]
    if measured:
        (out / "table4.md").write_text(table4_report(results, measured))


def memory_probes(a: argparse.Namespace) -> list[dict]:
    """Table 3: each mode in a fresh process (its own peak RSS), isolated/parallel/shared and
    oxygen at batch ~2 and ~4 (k = N/2, N/4)."""
    preset = a.grid_presets[0]
    n, s = a.memory_setting
    frames = min(4, a.frames or 4)
    cases = [(m, a.k[0]) for m in MODES if m != "oxygen" and m in a.modes]
    if "oxygen" in a.modes:
        cases += [("oxygen", max(1, -(-n // 2))), ("oxygen", max(1, -(-n // 4)))]
    out = []
    for mode, k in tqdm(cases, desc="memory probes", file=sys.stderr, unit="process"):
        w = default_warmup(mode, k, n) if a.warmup is None else a.warmup
        spec = RunSpec(preset, mode, k, n, s, frames, w, arrivals=[1] * (w + frames), group="memory")
        row = probe_in_subprocess(spec, preset, a.model_config, a.threads, a.device, a.dtype,
                                  a.seed, a.attention_backend, compile_denoise=a.compile,
                                  linear_layout=a.linear_layout, cuda_graphs=a.cuda_graphs)
        out.append(row)
    return out


if __name__ == "__main__":
    sys.exit(main())
