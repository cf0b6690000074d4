"""Derived columns (speedup, oracle), the pass/fail targets and the markdown report."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.config import MODES

MB = 1024 * 1024


def _find(rows, **kw) -> dict | None:
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def enrich(rows: list[dict]) -> None:
    """speedup / token ratio over isolated at the same (preset, N, S) and the fig. 6 oracle:
    the frame latency if one decode step for every active request cost a batch-1 decode step."""
    for r in rows:
        if not r["group"].startswith(("grid", "pattern")):
            continue
        iso = _find(rows, preset=r["preset"], group=r["group"], mode="isolated", N=r["N"], S=r["S"])
        if iso is None:
            continue
        r["speedup"] = r["action_hz"] / iso["action_hz"]
        r["token_ratio"] = r["tokens_per_s"] / iso["tokens_per_s"] if iso["tokens_per_s"] else None
        if r["mode"] in ("oxygen", "shared") and iso["decode_step_ms"]:
            oracle = (r["prefill_ms_each"] + r["stage_ms"]["denoise"]
                      + r["decode_steps_per_frame"] * iso["decode_step_ms"])
            r["oracle_frame_ms"] = oracle
            r["oracle_speedup"] = iso["frame_ms_mean"] / oracle


def _replayed(r: dict) -> str:
    if r.get("kv_replayed_ms") is None:
        return "not recorded"
    return (f"{r['kv_replayed_ms'] * 1e3:.0f} us/frame = {r['kv_replayed_ms'] / r['frame_ms_mean'] * 100:.2f}% "
            f"(in the frames: {r['kv_calls_ms'] * 1e3:.0f} us)")


def _t(name: str, status: str, detail: str, **values: Any) -> dict:
    return {"name": name, "status": status, "detail": detail, "values": values}


def build_targets(rows: list[dict], micro: dict, memory: list[dict], args) -> list[dict]:
    enrich(rows)
    out = []
    grid = [r for r in rows if r["group"] == "grid"]
    # 1. headline
    ox = _find(grid, preset="balanced", mode="oxygen", k=1, N=30, S=10)
    iso = _find(grid, preset="balanced", mode="isolated", N=30, S=10)
    if ox and iso:
        ratio = ox["action_hz"] / iso["action_hz"]
        out.append(_t("oxygen_4x_isolated", "pass" if ratio >= 4 else "fail",
                      f"balanced k=1 N=30 S=10: oxygen {ox['action_hz']:.2f} Hz vs isolated "
                      f"{iso['action_hz']:.2f} Hz = {ratio:.2f}x (target >= 4x)", ratio=ratio))
    else:
        out.append(_t("oxygen_4x_isolated", "skip", "balanced k=1 N=30 S=10 not in this run"))
    # 2. latency predicted from stage costs micro-benchmarked apart from the runs
    checked = [r for r in grid if r["mode"] != "parallel" and r.get("predicted_ms")]
    if checked:
        bad = [r for r in checked if r["predicted_error"] > 0.10]
        worst = max(checked, key=lambda r: r["predicted_error"])
        out.append(_t(
            "latency_within_10pct_of_prediction", "fail" if bad else "pass",
            f"{len(checked) - len(bad)}/{len(checked)} grid runs within 10% of the frame latency "
            f"predicted from separately micro-benchmarked prefill, denoise and decode-step costs "
            f"(worst {worst['predicted_error'] * 100:.1f}%: {_label(worst)}, measured "
            f"{worst['frame_ms_mean']:.1f} ms vs predicted {worst['predicted_ms']:.1f} ms); "
            f"parallel excluded (its two threads overlap)",
            failing=[_label(r) for r in bad], worst=worst["predicted_error"]))
    else:
        out.append(_t("latency_within_10pct_of_prediction", "skip",
                      "no grid run with micro-benchmarked stage costs"))
    # 3. batched decode cost
    cpu_presets = {p: m for p, m in micro.items() if p != "pi05" or args.device == "cpu"}
    if cpu_presets:
        ratios = {p: m["ratio_30_over_1"] for p, m in cpu_presets.items()}
        det = ", ".join(f"{p} {m['ms_per_step']['1']:.2f} -> {m['ms_per_step'][max(m['ms_per_step'], key=int)]:.2f} "
                        f"ms/step = {ratios[p]:.2f}x" for p, m in cpu_presets.items())
        out.append(_t("decode_batch30_le_3.5x_batch1", "pass" if max(ratios.values()) <= 3.5 else "fail",
                      f"ModelRunner.decode batch 1 -> 30: {det} (target <= 3.5x)", ratios=ratios))
    # 4. KV manager overhead at batch ~30
    b30 = [r for r in grid if r["mode"] == "oxygen" and r["mean_batch"] >= 25]
    if b30:
        worst = max(b30, key=lambda r: r["kv_share"])
        out.append(_t("kv_manager_lt_0.5pct_at_batch30",
                      "pass" if worst["kv_share"] < 0.005 else "fail",
                      f"worst {worst['kv_share'] * 100:.2f}% ({worst['kv_ms']:.2f} ms of "
                      f"{worst['frame_ms_mean']:.1f} ms, {_label(worst)}, batch {worst['mean_batch']:.0f}); "
                      f"{len(b30)} runs at batch >= 25. The same KVManager calls replayed back to "
                      f"back (hot caches): {_replayed(worst)}. Scheduling and request bookkeeping, "
                      f"timed apart: worst {max(r['sched_share'] for r in b30) * 100:.2f}%",
                      shares=[r["kv_share"] for r in b30],
                      sched_shares=[r["sched_share"] for r in b30]))
    else:
        out.append(_t("kv_manager_lt_0.5pct_at_batch30", "skip", "no oxygen run at batch ~30"))
    # 5. memory at batch 4
    out.append(_memory_target(rows, memory, args))
    # 6. fluctuating workload
    fl = _find(rows, group="fluctuating")
    if fl:
        out.append(_fluct_target(fl))
    # 7. the GPU targets (pi05 preset; gpu.sh runs it in bf16 on CUDA)
    out.extend(gpu_targets(grid))
    # 8. where the method loses
    losses = [r for r in grid if r["mode"] == "oxygen" and r.get("speedup", 2) < 1.0]
    n10k10 = [r for r in grid if r["mode"] == "oxygen" and r["N"] == 10 and r["k"] == 10 and "speedup" in r]
    det = "; ".join(f"{_label(r)} {r['speedup']:.2f}x" for r in losses) or "oxygen never slower than isolated"
    if n10k10:
        det += " | N=10 k=10: " + ", ".join(f"{r['preset']} S={r['S']} {r['speedup']:.2f}x" for r in n10k10)
    out.append(_t("where_the_method_loses", "info", det, losses=[_label(r) for r in losses]))
    return out


def gpu_targets(grid: list[dict]) -> list[dict]:
    """>= 6x isolated at k=1 N=30 S=10, and >= 100 Hz actions with >= 400 tokens/s at once (any k)."""
    ox = _find(grid, preset="pi05", mode="oxygen", k=1, N=30, S=10)
    iso = _find(grid, preset="pi05", mode="isolated", N=30, S=10)
    if not (ox and iso):
        return [_t("pi05_6x_isolated", "skip", "pi05 k=1 N=30 S=10 not in this run (benchmarks/gpu.sh)"),
                _t("pi05_100hz_with_400_tokens_per_s", "skip", "no pi05 oxygen run")]
    ratio = ox["action_hz"] / iso["action_hz"]
    out = [_t("pi05_6x_isolated", "pass" if ratio >= 6 else "fail",
              f"pi05 k=1 N=30 S=10: oxygen {ox['action_hz']:.1f} Hz vs isolated {iso['action_hz']:.1f} Hz "
              f"= {ratio:.2f}x (target >= 6x)", ratio=ratio)]
    runs = sorted((r for r in grid if r["preset"] == "pi05" and r["mode"] == "oxygen"),
                  key=lambda r: r["k"])
    both = [r for r in runs if r["action_hz"] >= 100 and r["tokens_per_s"] >= 400]
    det = "; ".join(f"k={r['k']} N={r['N']} S={r['S']}: {r['action_hz']:.1f} Hz, "
                    f"{r['tokens_per_s']:.0f} tokens/s" for r in runs)
    out.append(_t("pi05_100hz_with_400_tokens_per_s", "pass" if both else "fail",
                  f"{det} (target: one setting with >= 100 Hz and >= 400 tokens/s)",
                  settings=[_label(r) for r in both]))
    return out


def _label(r: dict) -> str:
    k = "" if r["k"] is None else f" k={r['k']}"
    return f"{r['preset']} {r['mode']}{k} N={r['N']} S={r['S']}"


def _memory_target(rows, memory, args) -> dict:
    name = "peak_memory_batch4_le_1.10x_isolated"
    if memory:
        iso = _find(memory, mode="isolated")
        b4 = min((m for m in memory if m["mode"] == "oxygen"), key=lambda m: abs(m["mean_batch"] - 4),
                 default=None)
        if iso and b4:
            ratio = b4["rss_maxrss_bytes"] / iso["rss_maxrss_bytes"]
            kv_ratio = b4["kv_peak_bytes"] / iso["kv_peak_bytes"]
            return _t(name, "pass" if ratio <= 1.10 else "fail",
                      f"process peak RSS (fresh process per mode) oxygen batch {b4['mean_batch']:.1f} "
                      f"{b4['rss_maxrss_bytes'] / MB:.0f} MiB vs isolated {iso['rss_maxrss_bytes'] / MB:.0f} MiB "
                      f"= {ratio:.3f}x (target <= 1.10x); KV pool blocks in use at peak "
                      f"{b4['kv_peak_bytes'] / MB:.2f} vs {iso['kv_peak_bytes'] / MB:.2f} MiB = {kv_ratio:.2f}x "
                      f"(the pool itself is allocated once, the same size in every mode)",
                      ratio=ratio, kv_ratio=kv_ratio)
    grid = [r for r in rows if r["group"] == "grid" and r.get("cuda_peak_bytes")]
    ox = [r for r in grid if r["mode"] == "oxygen" and 3 <= r["mean_batch"] <= 5]
    for r in ox:
        iso = _find(grid, preset=r["preset"], mode="isolated", N=r["N"], S=r["S"])
        if iso:
            ratio = r["cuda_peak_bytes"] / iso["cuda_peak_bytes"]
            return _t(name, "pass" if ratio <= 1.10 else "fail",
                      f"torch.cuda.max_memory_allocated oxygen batch {r['mean_batch']:.1f} ({_label(r)}) "
                      f"{r['cuda_peak_bytes'] / MB:.0f} MiB vs isolated {iso['cuda_peak_bytes'] / MB:.0f} MiB "
                      f"= {ratio:.3f}x (target <= 1.10x)", ratio=ratio)
    return _t(name, "skip", "no memory probes (--memory-probes off) and no CUDA peaks at batch ~4")


def _fluct_target(fl: dict) -> dict:
    """KV blocks in use after a frame belong to the requests still unfinished then (running +
    waiting); the batch a frame advanced also counts the requests it retired."""
    tr = fl["trace"]
    kv, batch, arr = np.array(tr["kv_bytes"], float), np.array(tr["batch"], float), tr["arrivals"]
    live = np.array(tr["running"], float) + np.array(tr["waiting"], float)
    corr = float(np.corrcoef(kv, live)[0, 1]) if kv.std() and live.std() else float("nan")
    corr_b = float(np.corrcoef(kv, batch)[0, 1]) if kv.std() and batch.std() else float("nan")
    first = next((i for i, a in enumerate(arr) if a), 0)
    base_start = kv[:first].max() if first else kv[0]
    peak_at = int(np.argmax(live))
    idle_end = [i for i in range(peak_at, len(arr)) if live[i] == 0]
    base_end = kv[idle_end[-1]] if idle_end else float("nan")
    ok = bool(corr >= 0.9 and idle_end and base_end <= base_start)
    return _t("memory_follows_fluctuating_load", "pass" if ok else "fail",
              f"corr(KV bytes in use, unfinished requests) = {corr:.3f} over {len(kv)} frames "
              f"(target >= 0.9; vs the batch advanced that frame {corr_b:.3f}); KV in use while idle "
              f"before the load {base_start / MB:.2f} MiB, idle after it {base_end / MB:.2f} MiB "
              f"(target: back to baseline), peak {kv.max() / MB:.2f} MiB at {live.max():.0f} requests",
              corr=corr, corr_batch=corr_b, baseline_start=float(base_start),
              baseline_end=float(base_end))


# ---------------------------------------------------------------------------------------------
def _f(x, nd=1, unit=""):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{nd}f}{unit}"


def _table(head: list[str], body: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(lines) + "\n"


def write_report(results: dict, plots: list[str], out: Path) -> None:
    env, rows, targets = results["env"], results["rows"], results["targets"]
    micro, memory = results["decode_micro"], results["memory_probes"]
    grid = [r for r in rows if r["group"] == "grid"]
    md = ["# oxygen-bench report\n",
          f"- date: {env['date']}\n- CPU: {env['cpu']} ({env['cpu_count']} cores), torch threads "
          f"{env['threads']}\n- torch {env['torch']}, python {env['python']}, device {env['device']}"
          f"{' (' + env['gpu'] + ')' if env.get('gpu') else ''}, dtype {env['dtype']}\n"
          f"- energy: {env.get('energy_source') or 'no power reading on this machine (columns empty)'}\n"
          f"- command: `{env['command']}`\n- wall time: {env['wall_s'] / 60:.1f} min\n",
          "\nSame weights for every mode (one init_model per preset), same synthetic observation "
          "stream, same request arrivals (fixed seed). Warm-up frames (ceil(N/k)+1 for oxygen, 1 "
          "otherwise) are excluded. isolated, parallel and shared finish each request inside its "
          "frame, so they do not depend on k and run once per (N, S).\n",
          "\n## Targets\n", _table(["status", "target", "measured"],
                                    [[t["status"].upper(), t["name"], t["detail"]] for t in targets])]
    for preset in dict.fromkeys(r["preset"] for r in grid):
        pr = [r for r in grid if r["preset"] == preset]
        n, s = max(r["N"] for r in pr), max(r["S"] for r in pr)
        sel = sorted([r for r in pr if r["N"] == n and r["S"] == s],
                     key=lambda r: (MODES.index(r["mode"]), r["k"] or 0))
        md.append(f"\n## {preset}: latency breakdown at N={n}, S={s} (cf. paper table 6)\n")
        md.append(f"{pr[0]['params_m']:.1f} M parameters, {pr[0]['frames']} measured frames per run. "
                  "Stage columns are mean ms per frame (isolated: every request's own prefill is in "
                  "vision+prefill); KV mgr = the KV manager and copy-on-write copies; sched = "
                  "scheduling and request bookkeeping; detok = streaming text; glue = frame - stages "
                  "(the rest of the Python around them).\n\n")
        md.append(_table(
            ["mode", "k", "batch", "vision+prefill", "denoise", "decode", "KV mgr", "sched", "detok",
             "glue",
             "frame mean", "p50", "p99", "action Hz", "tokens/s", "speedup"],
            [[r["mode"], r["k"] or "-", _f(r["mean_batch"]), _f(r["stage_ms"]["vision_prefill"]),
              _f(r["stage_ms"]["denoise"]), _f(r["stage_ms"]["decode"]), _f(r["stage_ms"]["kv"], 2),
              _f(r["stage_ms"]["sched"], 2), _f(r["stage_ms"]["detokenize"], 2), _f(r["glue_ms"]), _f(r["frame_ms_mean"]), _f(r["frame_ms_p50"]),
              _f(r["frame_ms_p99"]), _f(r["action_hz"], 2), _f(r["tokens_per_s"]),
              _f(r.get("speedup"), 2, "x")] for r in sel]))
        if preset in micro:
            m = micro[preset]
            md.append("\nOne batched decode step (ModelRunner.decode micro-benchmark, "
                      f"{m['context_tokens']}-token context): " + ", ".join(
                          f"batch {b}: {v:.2f} ms" for b, v in m["ms_per_step"].items())
                      + f" (batch 30 / batch 1 = {m['ratio_30_over_1']:.2f}x)\n")
            if "prefill_ms" in m:
                md.append(f"\nMicro-benchmarked apart from the runs: one observation prefill "
                          f"{m['prefill_ms']:.2f} ms; denoise " + ", ".join(
                              f"S={k}: {v:.2f} ms" for k, v in m["denoise_ms"].items()) + "\n")
        cuts = []
        for nn in sorted({r["N"] for r in pr}):
            sh = _find(pr, mode="shared", N=nn, S=s)
            iso = _find(pr, mode="isolated", N=nn, S=s)
            if sh and iso:
                cuts.append(f"N={nn}: {(1 - sh['frame_ms_mean'] / iso['frame_ms_mean']) * 100:.1f}%")
        if cuts:
            md.append("\nLatency cut by sharing the prefill alone (shared vs isolated, S="
                      f"{s}; paper: 36.4% N=1 ... 9.4% N=30): " + ", ".join(cuts) + "\n")
    rate_rows = results.get("rate_targets") or []
    if rate_rows:
        from .rate import table as rate_table

        r0 = rate_rows[0]
        md.append(f"\n## Action-rate targets (beyond the paper: target_action_hz chooses k)\n\n"
                  f"oxygen, N={r0['N']} S={r0['S']}, k in [{r0['k_min']}, {r0['k_max']}], one "
                  f"memory request per frame, {r0['warmup']} warm-up + {r0['frames']} measured "
                  f"frames per target. met: achieved within 10% of the target (or faster with k at "
                  f"k_max); infeasible: not even k_min fits (FrameOutput.target_feasible). The "
                  f"controller aims the mean frame at 95% of 1/target; a single frame may run "
                  f"over 1/target by about one decode step (the carried credit; target_strict "
                  f"turns it off).\n\n")
        md.append(rate_table(rate_rows))
    # table 4
    md.append("\n## Cross-setting speedups over isolated (cf. paper tables 1, 4)\n")
    body = []
    ks = sorted({r["k"] for r in grid if r["mode"] == "oxygen"})
    for preset in dict.fromkeys(r["preset"] for r in grid):
        pr = [r for r in grid if r["preset"] == preset]
        n, s = max(r["N"] for r in pr), max(r["S"] for r in pr)
        iso = _find(pr, mode="isolated", N=n, S=s)
        line = [preset, f"N={n} S={s}", _f(iso and iso["frame_ms_mean"])]
        for mode in ("parallel", "shared"):
            r = _find(pr, mode=mode, N=n, S=s)
            line.append(_f(r and r.get("speedup"), 2, "x"))
        for k in ks:
            r = _find(pr, mode="oxygen", k=k, N=n, S=s)
            line.append(_f(r and r.get("speedup"), 2, "x") + (f" (oracle {r['oracle_speedup']:.2f}x)"
                                                              if r and r.get("oracle_speedup") else ""))
        body.append(line)
    md.append(_table(["preset", "setting", "isolated ms/frame", "parallel", "shared (w/o batching)"]
                     + [f"oxygen k={k}" for k in ks], body))
    # full grid
    gp = results["args"]["grid_presets"]
    for preset in gp:
        pr = [r for r in grid if r["preset"] == preset and r["mode"] in ("oxygen", "isolated", "shared")]
        if not pr:
            continue
        md.append(f"\n## {preset}: full grid (cf. paper figs. 4, 5, 6, 10)\n")
        md.append("speedup = action Hz / isolated's at the same (N, S); oracle = speedup if one "
                  "decode step for the whole batch cost a batch-1 step (fig. 6); predicted = frame "
                  "ms from the micro-benchmarked stage costs (prefill, denoise, decode step at each "
                  "frame's batch) and this run's schedule, never its own timings; err = "
                  "|measured - predicted| / predicted.\n\n")
        pr.sort(key=lambda r: (r["S"], r["N"], r["mode"] != "isolated", r["mode"], r["k"] or 0))
        md.append(_table(["S", "N", "mode", "k", "batch", "action Hz", "tokens/s", "p50 ms", "p99 ms",
                          "speedup", "oracle", "predicted ms", "measured ms", "err"],
                         [[r["S"], r["N"], r["mode"], r["k"] or "-", _f(r["mean_batch"]),
                           _f(r["action_hz"], 2), _f(r["tokens_per_s"]), _f(r["frame_ms_p50"]),
                           _f(r["frame_ms_p99"]), _f(r.get("speedup"), 2, "x"),
                           _f(r.get("oracle_speedup"), 2, "x"), _f(r.get("predicted_ms")),
                           _f(r["frame_ms_mean"]),
                           _f(r.get("predicted_error") and r["predicted_error"] * 100, 1, "%")]
                          for r in pr]))
    # table 7
    ox = sorted([r for r in grid if r["mode"] == "oxygen"], key=lambda r: (r["preset"], r["mean_batch"]))
    md.append("\n## KV-manager overhead (cf. paper table 7: 1.24%-6.63% in PyTorch, batch 6-30)\n")
    md.append("KV mgr = FrameOutput.timings_ms['kv']: the KV manager's own calls (block allocation, "
              "forks, frees, block tables, prefix-cache hashing; timed inside KVManager) and the "
              "copy-on-write copies of partial blocks; no cache is stacked or split (paged in place). "
              "sched = FrameOutput.timings_ms['sched']: scheduling policy and request bookkeeping "
              "around it (admission order, token accounting, finish checks), reported beside it.\n\n")
    md.append("KV calls = the KVManager's own calls in the frames; replayed = the same calls, "
              "from the same state, replayed back to back after the run, i.e. with the "
              "interpreter's data hot in the CPU caches instead of evicted by the model's kernels "
              "between calls.\n\n")
    md.append(_table(["preset", "k", "N", "S", "batch", "KV mgr ms", "frame ms", "KV share",
                      "KV calls ms", "replayed ms", "replayed share", "sched ms", "sched share"],
                     [[r["preset"], r["k"], r["N"], r["S"], _f(r["mean_batch"]), _f(r["kv_ms"], 3),
                       _f(r["frame_ms_mean"]), _f(r["kv_share"] * 100, 2, "%"),
                       _f(r.get("kv_calls_ms"), 3), _f(r.get("kv_replayed_ms"), 3),
                       _f(r.get("kv_replayed_ms") and r["kv_replayed_ms"] / r["frame_ms_mean"] * 100, 2, "%"),
                       _f(r["sched_ms"], 3), _f(r["sched_share"] * 100, 2, "%")]
                      for r in ox if r["N"] == max(x["N"] for x in ox if x["preset"] == r["preset"])]))
    # table 3
    md.append("\n## Memory and energy (cf. paper table 3)\n")
    mem_rows = memory or [r for r in grid if r["N"] == max(x["N"] for x in grid)]
    src = ("each mode in a fresh process (peak RSS = ru_maxrss of that process)" if memory else
           "in-process runs (RSS sampled per frame; on CUDA torch.cuda.max_memory_allocated reset per run)")
    md.append(f"Measured {src}. KV peak = the paged pool's blocks in use at peak "
              "(FrameOutput.kv.peak_bytes); the pool is allocated once at engine start, the same "
              "size for every mode. Energy per request = measured-frame energy / (tokens / N).\n\n")
    iso_m = _find(mem_rows, mode="isolated")
    md.append(_table(["mode", "k", "N", "batch", "peak RSS MiB", "vs isolated", "KV peak MiB",
                      "KV vs isolated", "CUDA peak MiB", "J/request"],
                     [[r["mode"], r["k"] or "-", r["N"], _f(r["mean_batch"]),
                       _f(r["rss_maxrss_bytes" if memory else "rss_peak_bytes"] / MB, 0),
                       _f(iso_m and r["rss_maxrss_bytes" if memory else "rss_peak_bytes"]
                          / iso_m["rss_maxrss_bytes" if memory else "rss_peak_bytes"], 3, "x"),
                       _f(r["kv_peak_bytes"] / MB, 2),
                       _f(iso_m and r["kv_peak_bytes"] / iso_m["kv_peak_bytes"], 2, "x"),
                       _f(r["cuda_peak_bytes"] and r["cuda_peak_bytes"] / MB, 0),
                       _f(r["energy_j_per_request"], 1)] for r in mem_rows]))
    # patterns
    pt = [r for r in rows if r["group"].startswith("pattern:")]
    if pt:
        r0 = pt[0]
        md.append(f"\n## Arrival patterns (cf. paper fig. 7; {r0['preset']} k={r0['k']} N={r0['N']} S={r0['S']})\n")
        md.append(_table(["pattern", "mode", "requests/frame", "action Hz", "tokens/s", "mean batch",
                          "max batch", "p50 ms", "p99 ms", "speedup"],
                         [[r["group"].split(":")[1], r["mode"], _f(r["requests_asked"] / r["frames"], 2),
                           _f(r["action_hz"], 2), _f(r["tokens_per_s"]), _f(r["mean_batch"]),
                           r["max_batch"], _f(r["frame_ms_p50"]), _f(r["frame_ms_p99"]),
                           _f(r.get("speedup"), 2, "x")] for r in pt]))
    fl = _find(rows, group="fluctuating")
    if fl:
        tr = fl["trace"]
        md.append(f"\n## Fluctuating workload (cf. paper fig. 12; oxygen k={fl['k']} N={fl['N']} "
                  f"S={fl['S']}, {len(tr['batch'])} frames)\n")
        md.append(f"Requests asked {sum(tr['arrivals'])}, batch max {max(tr['batch'])}, KV in use "
                  f"max {max(tr['kv_bytes']) / MB:.2f} MiB, last frame {tr['kv_bytes'][-1] / MB:.2f} MiB, "
                  f"frame ms min/mean/max {min(tr['frame_ms']):.1f}/{np.mean(tr['frame_ms']):.1f}/"
                  f"{max(tr['frame_ms']):.1f}, RSS max {max(tr['rss']) / MB:.0f} MiB "
                  f"last {tr['rss'][-1] / MB:.0f} MiB.\n")
    loss = next((t for t in targets if t["name"] == "where_the_method_loses"), None)
    if loss:
        md.append(f"\n## Where the method loses\n{loss['detail']}\n")
    profiled = [r for r in rows if r.get("profile")]
    if profiled:
        md.append("\n## Frame profiles (torch.profiler)\n")
        md.append("One extra frame per preset and mode, after that run's measured frames (so the "
                  "profiler's overhead is in no other number); the op tables are in the files.\n\n")
        md.append(_table(
            ["preset", "mode", "k", "N", "S", "wall ms (profiled)", "frame ms (measured)",
             "CPU self ms", "device self ms", "kernel launches", "aten ops", "file"],
            [[r["preset"], r["mode"], r["k"] or "-", r["N"], r["S"]]
             + ([r["profile"]["error"]] + [""] * 6 if "error" in r["profile"] else
                [_f(r["profile"]["wall_ms"], 2), _f(r["frame_ms_mean"], 2),
                 _f(r["profile"]["cpu_self_ms"], 2), _f(r["profile"]["device_self_ms"], 2),
                 r["profile"]["kernel_launches"] if r["profile"]["kernel_launches"] is not None else "-",
                 r["profile"]["ops"],
                 f"[profile_{r['preset']}_{r['mode']}.txt](profile_{r['preset']}_{r['mode']}.txt)"])
             for r in profiled]))
    if plots:
        md.append("\n## Plots\n")
        md += [f"\n![{p}]({p})\n" for p in plots]
    (out / "report.md").write_text("".join(md))
