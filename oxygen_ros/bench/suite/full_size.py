"""A full-size pi0.5 checkpoint in LeRobot's layout through oxygen-inspect and the node's build
path on the CPU: peak memory and configure time (load, warmup) and one frame.

    oxygen-bench full-size                      # writes ~9.35 GB under a temporary folder
    oxygen-bench full-size --dir /data/tmp --keep

The checkpoint: random weights of the pi05 preset's shape, written as LeRobot 0.6.1 writes a
bf16 policy (its `to_bfloat16_for_selected_params`: the vision tower, the projector and every RMS
norm stay float32, the rest bfloat16) with the two lm_heads LeRobot also stores (PaliGemma's
beside embed_tokens, the action expert's), its config.json / processor files / statistics, and a
257152-token tokenizer.json next to it (LeRobot ships none; a PaliGemma-sized vocabulary stands in
for google/paligemma-3b-pt-224). The safetensors file is streamed tensor by tensor in row blocks
(8-byte header length, JSON header, data: the format's specification), so the writer holds one
block at a time; safetensors' own reader opens it.

The node's part runs in a fresh process (its peak resident set is its own): node/build.build on
the node's default parameters plus the checkpoint, bfloat16 on the CPU, then one frame of the
engine on a synthetic observation; or, with --node, the lifecycle node itself (OxygenNode
in-process: configure, activate, its camera and joint-state topics fed by a publisher in the
same process, spun by an executor) until its first chunk arrives on ~/action_chunk. Peak RSS (ru_maxrss, touched pages of the file's mapping
included) is compared with the engine's parameter bytes: the goal is within 1.2x. The folder is
deleted afterwards unless --keep. Timings depend on the machine's load: the command line and
/proc/loadavg are printed before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRESET = "pi05"
STATE_DIM = ACTION_DIM = 7  # a 7-joint arm: the node's joint_names
# LeRobot 0.6.1 keeps parameters whose name contains one of these in float32 in a bf16 policy
KEEP_FLOAT32 = ("vision_tower", "multi_modal_projector", "input_layernorm",
                "post_attention_layernorm", "model.norm")
_ROW_BLOCK_VALUES = 1 << 24  # values drawn and written at a time (64 MiB in float32)


def lerobot_tensors() -> dict[str, tuple[tuple[int, ...], str]]:
    """LeRobot key -> (shape, safetensors dtype) of a full-size pi05 file written in bf16."""
    import torch

    from oxygen_ros.engine.config import PRESETS
    from oxygen_ros.engine.families.pi05.checkpoint import LM_HEAD, PWE, to_lerobot_name
    from oxygen_ros.engine.families.pi05.model import MoTModel

    config = PRESETS[PRESET]
    with torch.device("meta"):
        shapes = {to_lerobot_name(n): tuple(t.shape) for n, t in MoTModel(config).state_dict().items()}
    vocab = config.vocab_size
    shapes[LM_HEAD] = (vocab, config.vlm.width)  # PaliGemma's, stored beside embed_tokens
    shapes[PWE + "gemma_expert.lm_head.weight"] = (vocab, config.action_experts[0].width)
    return {k: (s, "F32" if any(w in k for w in KEEP_FLOAT32) else "BF16")
            for k, s in sorted(shapes.items())}


def write_weights(path: Path, tensors: dict[str, tuple[tuple[int, ...], str]], seed: int = 0) -> int:
    """Stream random weights into a safetensors file; returns its data bytes. Matrices ~
    N(0, 1/fan_in) (activations stay O(1)), vectors (norms: Gemma's are 1 + w; biases) ~ N(0, 0.02)."""
    import torch

    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16}
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for key, (shape, dt) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        nbytes = n * dtypes[dt].itemsize
        header[key] = {"dtype": dt, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    gen = torch.Generator().manual_seed(seed)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for key, (shape, dt) in tensors.items():
            rows = shape[0] if shape else 1
            numel = 1
            for d in shape:
                numel *= d
            per_row = numel // rows  # a matrix's (or a convolution's) fan-in
            std = per_row ** -0.5 if len(shape) >= 2 else 0.02
            step = max(1, _ROW_BLOCK_VALUES // per_row)
            for lo in range(0, rows, step):
                hi = min(rows, lo + step)
                block = torch.randn((hi - lo) * per_row, generator=gen).mul_(std).to(dtypes[dt])
                f.write(block.view(torch.uint8).numpy().tobytes())
    return offset


class _SmallFilesOnly:
    """save_lerobot_checkpoint's model when only its small files are wanted: no tensors (the
    weights file it writes is then replaced by the streamed one), the policy's dtype."""

    def __init__(self, dtype) -> None:
        self.dtype = dtype

    def state_dict(self) -> dict:
        return {}


def write_checkpoint(folder: Path, seed: int = 0) -> dict:
    """The LeRobot folder (config, processors, statistics, weights) and tokenizer/; sizes."""
    import numpy as np
    import torch

    from oxygen_ros.engine.config import PRESETS
    from oxygen_ros.engine.model import NormStats
    from oxygen_ros.engine.families.pi05.writer import save_lerobot_checkpoint
    from oxygen_ros.engine.families.pi05.checkpoint import WEIGHTS
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    config = PRESETS[PRESET]
    stats = NormStats.quantiles(np.full(STATE_DIM, -1.0), np.full(STATE_DIM, 1.0),
                                np.full(ACTION_DIM, -1.0), np.full(ACTION_DIM, 1.0))
    save_lerobot_checkpoint(_SmallFilesOnly(torch.bfloat16), config, folder, norm_stats=stats,
                            embed_config=False)  # LeRobot's own fields only
    tensors = lerobot_tensors()
    t0 = time.perf_counter()
    data = write_weights(folder / WEIGHTS, tensors, seed)
    seconds = time.perf_counter() - t0
    build_tiny_tokenizer(config.vocab_size).save(folder.parent / "tokenizer")
    return {"tensors": len(tensors), "data_bytes": data, "file_bytes": (folder / WEIGHTS).stat().st_size,
            "float32_tensors": sum(dt == "F32" for _, dt in tensors.values()), "write_s": seconds}


def _child(folder: str, tokenizer: str, threads: int, frames: int, params: dict) -> None:
    """Configure the node's engine from its parameters (node/build.build), then run frames."""
    import torch

    from oxygen_ros.bench.timing import peak_rss_bytes, rss_bytes
    from oxygen_ros.engine.core.synthetic import SyntheticStream
    from oxygen_ros.node import params as P
    from oxygen_ros.node.build import build

    from oxygen_ros.engine.core.engine import Engine

    warmup, at_warmup = Engine.warmup, {}

    def measured_warmup(self, *args, **kwargs):  # the peak of reading the weights and making the engine
        at_warmup["peak"] = peak_rss_bytes()
        return warmup(self, *args, **kwargs)

    Engine.warmup = measured_warmup
    p = {s.name: s.default for s in P.PARAMETERS}  # the node's defaults (config/oxygen.yaml)
    p.update({"model.checkpoint": folder, "model.tokenizer": tokenizer, "model.device": "cpu",
              "model.dtype": "bfloat16", "joint_names": [f"joint_{i}" for i in range(STATE_DIM)]})
    if threads:
        p["model.num_threads"] = threads
    p.update(params)
    before = rss_bytes()
    t0 = time.perf_counter()
    built = build(p)
    configure_s = time.perf_counter() - t0
    peak_configure = peak_rss_bytes()
    engine = built.engine
    stream = SyntheticStream(built.model_config)
    stream.instruction = p["instruction"]
    frame_s = []
    for i in range(frames):
        t1 = time.perf_counter()
        out = engine.step(stream.frame(i))
        frame_s.append(time.perf_counter() - t1)
    params = list(engine.model.parameters())
    param_bytes = sum(t.numel() * t.element_size() for t in params)
    peak = peak_rss_bytes()
    pool = engine.runner.pool  # the KV pool, sized from max_active_requests and the prompt lengths
    print(json.dumps({
        "warmup_note": built.warmup_note, "kv_pool_bytes": pool.numel() * pool.element_size(),
        "max_active_requests": engine.config.max_active_requests, "peak_rss_before_warmup": at_warmup["peak"],
        "threads": torch.get_num_threads(), "params": sum(t.numel() for t in params),
        "param_bytes": param_bytes, "param_dtypes": sorted({str(t.dtype) for t in params}),
        "rss_before": before, "peak_rss_configure": peak_configure, "peak_rss": peak,
        "peak_over_param_bytes": peak / param_bytes,
        "configure_s": configure_s, "load_s": built.load_s, "warmup_s": built.warmup_s,
        "frame_s": frame_s, "actions_finite": bool(torch.isfinite(torch.as_tensor(out.actions)).all()),
    }))


CHUNK_WAIT_S = 600.0  # --node: how long to wait for the first chunk after activation
INPUT_HZ = 5.0  # --node: the rate the cameras and joint states are published at


def _node_child(folder: str, tokenizer: str, threads: int, params: dict) -> None:
    """The lifecycle node in this process: configure (the engine built and warmed up as
    node/build.build does), activate, cameras and joint states published on its topics until
    its first chunk arrives on ~/action_chunk."""
    import threading

    import numpy as np
    import rclpy
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.lifecycle import TransitionCallbackReturn
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Image, JointState
    from trajectory_msgs.msg import JointTrajectory

    from oxygen_ros.bench.timing import peak_rss_bytes, rss_bytes
    from oxygen_ros.node.oxygen_node import NODE_NAME, OxygenNode

    joints = [f"joint_{i}" for i in range(STATE_DIM)]
    cams = [f"/full_size/camera{i}/image_raw" for i in range(3)]  # the pi05 preset's 3 cameras
    values = {"model.checkpoint": folder, "model.tokenizer": tokenizer, "model.device": "cpu",
              "model.dtype": "bfloat16", "joint_names": joints, "camera_topics": cams, **params}
    if threads:
        values["model.num_threads"] = threads
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    before = rss_bytes()
    node = OxygenNode(context=ctx, parameter_overrides=[Parameter(k, value=v) for k, v in values.items()])
    feed = rclpy.create_node("full_size_feed", context=ctx)
    got: list[tuple[float, JointTrajectory]] = []
    feed.create_subscription(JointTrajectory, f"/{NODE_NAME}/action_chunk",
                             lambda m: got.append((time.perf_counter(), m)), 10)
    image_pubs = [feed.create_publisher(Image, c, 10) for c in cams]
    joint_pub = feed.create_publisher(JointState, "/joint_states", 10)
    rng = np.random.default_rng(0)
    pixels = [rng.integers(0, 255, (224, 224, 3), dtype=np.uint8).tobytes() for _ in cams]

    def publish() -> None:
        stamp = feed.get_clock().now().to_msg()
        for pub, data in zip(image_pubs, pixels):
            msg = Image(height=224, width=224, encoding="rgb8", step=224 * 3, data=data)
            msg.header.stamp = stamp
            pub.publish(msg)
        js = JointState(name=joints, position=[0.0] * len(joints))
        js.header.stamp = stamp
        joint_pub.publish(js)

    t0 = time.perf_counter()
    ok = node.trigger_configure() == TransitionCallbackReturn.SUCCESS
    configure_s = time.perf_counter() - t0
    peak_configure = peak_rss_bytes()
    if not ok:
        raise RuntimeError("the node's configure failed (its log above says why)")
    built, rt = node.rt.built, node.rt
    executor = MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    executor.add_node(feed)
    feed.create_timer(1.0 / INPUT_HZ, publish)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    ok = node.trigger_activate() == TransitionCallbackReturn.SUCCESS
    t1 = time.perf_counter()
    while ok and not got and time.perf_counter() - t1 < CHUNK_WAIT_S:
        time.sleep(0.05)
    first_chunk_s = got[0][0] - t1 if got else None
    params_ = list(built.engine.model.parameters())
    param_bytes = sum(t.numel() * t.element_size() for t in params_)
    peak = peak_rss_bytes()
    pool = built.engine.runner.pool
    chunk = got[0][1] if got else None
    print(json.dumps({
        "via": "node", "activated": ok, "warmup_note": built.warmup_note,
        "kv_pool_bytes": pool.numel() * pool.element_size(),
        "max_active_requests": built.engine.config.max_active_requests,
        "threads": built.threads, "params": sum(t.numel() for t in params_),
        "param_bytes": param_bytes, "param_dtypes": sorted({str(t.dtype) for t in params_}),
        "rss_before": before, "peak_rss_configure": peak_configure, "peak_rss": peak,
        "peak_over_param_bytes": peak / param_bytes, "configure_s": configure_s,
        "load_s": built.load_s, "warmup_s": built.warmup_s, "first_chunk_s": first_chunk_s,
        "chunk_points": len(chunk.points) if chunk else 0,
        "chunk_joints": list(chunk.joint_names) if chunk else [],
        "actions_finite": bool(chunk and all(np.isfinite(pt.positions).all() for pt in chunk.points)),
        "step_errors": rt.worker.step_errors,
    }), flush=True)
    os._exit(0)  # the executor's threads and a 9 GB heap: no orderly teardown needed to report


def report(r: dict, params: dict, wall: float) -> tuple[list[str], bool]:
    """The child's JSON `r` as the report's lines, and whether both goals are met (peak RSS
    within 1.2x the parameter bytes, configure under a minute; --node: a chunk published)."""
    gib = 2 ** 30
    ratio = r["peak_over_param_bytes"]
    extra = "".join(f", {k} {v}" for k, v in params.items())
    node = r.get("via") == "node"
    what = ("the lifecycle node (OxygenNode in-process, topics fed)" if node
            else "node build path (node/build.build")
    lines = [
        f"{what}, cpu, bfloat16, {r['threads']} threads{extra}{'' if node else ')'}, a fresh "
        f"process ({wall:.0f} s with imports):",
        f"parameters      {r['params']:,}, {r['param_bytes'] / gib:.2f} GiB in memory "
        f"{r['param_dtypes']}",
        f"KV pool         {r['kv_pool_bytes'] / gib:.2f} GiB (max_active_requests "
        f"{r['max_active_requests']})",
        f"peak RSS        {r['peak_rss'] / gib:.2f} GiB = {ratio:.2f}x the parameter bytes: "
        f"{'within' if ratio <= 1.2 else 'OVER'} 1.2x; {r['rss_before'] / gib:.2f} GiB before "
        f"configure (interpreter, torch)"
        + (f", {r['peak_rss_before_warmup'] / gib:.2f} GiB when the weights were read and the "
           f"engine made" if "peak_rss_before_warmup" in r else "")
        + f", {r['peak_rss_configure'] / gib:.2f} after configure",
        f"configure       {r['configure_s']:.1f} s: load {r['load_s']:.1f} s, warmup "
        f"{r['warmup_s']:.1f} s: {'under' if r['configure_s'] < 60 else 'OVER'} a minute",
        f"warmup          {r.get('warmup_note') or '(not reported)'}",
    ]
    met = ratio <= 1.2 and r["configure_s"] < 60
    if node:
        published = r["first_chunk_s"] is not None
        lines.append(
            "first chunk     " + (f"on ~/action_chunk {r['first_chunk_s']:.1f} s after activate: "
                                   f"{r['chunk_points']} points x {len(r['chunk_joints'])} joints"
                                   if published else "NONE published")
            + f"; actions finite: {r['actions_finite']}; inference errors {r['step_errors']}")
        met = met and published and r["actions_finite"]
    else:
        lines.append("frames          " + ", ".join(f"{x:.1f} s" for x in r["frame_s"])
                     + f"; actions finite: {r['actions_finite']}")
    return lines, met


def _node_params(ap: argparse.ArgumentParser, items: list[str]) -> dict:
    """--param NAME=JSON items -> {name: value}, each checked as the node checks it."""
    from oxygen_ros.node import params as P

    out = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            value = json.loads(text) if sep else None
        except json.JSONDecodeError:
            value = None
        if name not in P.SPECS or value is None:
            ap.error(f"--param {item!r}: expected NAME=JSON with NAME a node parameter")
        reason = P.validate_value(P.SPECS[name], value)
        if reason:
            ap.error(f"--param {item!r}: {reason}")
        out[name] = value
    return out


def _machine() -> str:
    with open("/proc/loadavg") as f:
        return f.read().strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=None, help="where to write (default: a new folder under $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the checkpoint afterwards")
    ap.add_argument("--threads", type=int, default=0,
                    help="model.num_threads of the node (0: the node's default)")
    ap.add_argument("--frames", type=int, default=1, help="frames run after configure")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--param", action="append", default=[], metavar="NAME=JSON",
                    help="another node parameter, e.g. --param max_active_requests=4 (repeatable)")
    ap.add_argument("--reuse", action="store_true",
                    help="use the checkpoint a --keep run left in --dir instead of writing one")
    ap.add_argument("--node", action="store_true",
                    help="run the lifecycle node (configure, activate, topics) to its first "
                         "published chunk instead of the build path and --frames engine frames")
    ap.add_argument("--child", nargs=2, metavar=("CKPT", "TOKENIZER"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.frames < 1 or args.threads < 0:
        ap.error("--frames must be >= 1 and --threads >= 0")
    if args.reuse and not args.dir:
        ap.error("--reuse needs --dir")
    params = _node_params(ap, args.param)
    if args.child and args.node:
        _node_child(args.child[0], args.child[1], args.threads, params)
        return 0
    if args.child:
        _child(args.child[0], args.child[1], args.threads, args.frames, params)
        return 0
    from oxygen_ros.bench.registry import child_command
    from oxygen_ros.bench.timing import peak_rss_bytes

    print(f"$ oxygen-bench full-size {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"loadavg before: {_machine()}; {os.cpu_count()} CPUs", flush=True)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="oxygen-full-size-"))
    folder, tokenizer = root / "pi05_lerobot", root / "tokenizer"
    status = 1
    try:
        if args.reuse:
            w = {"reused": str(folder)}
            print(f"reusing {folder}", flush=True)
        else:
            w = write_checkpoint(folder, args.seed)
            print(f"wrote {folder}: {w['tensors']} tensors ({w['float32_tensors']} float32), "
                  f"model.safetensors {w['file_bytes'] / 1e9:.2f} GB in {w['write_s']:.0f} s; the "
                  f"writer's peak RSS {peak_rss_bytes() / 2**30:.2f} GiB", flush=True)
        print(f"\n$ oxygen-inspect {folder} --tokenizer {tokenizer}", flush=True)
        # the command itself (cli/ is the commands' layer, not a library to import)
        inspect_status = subprocess.run([sys.executable, "-m", "oxygen_ros.cli.inspect_checkpoint",
                                         str(folder), "--tokenizer", str(tokenizer)]).returncode
        cmd = [*child_command("oxygen_ros.bench.suite.full_size:main", "--child", str(folder), str(tokenizer)),
               "--threads", str(args.threads), "--frames", str(args.frames), *(["--node"] if args.node else []), *(f"--param={item}" for item in args.param)]
        t0 = time.perf_counter()
        # the child's stderr holds the loader's progress bar: shown only when the child fails
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            print(proc.stderr[-4000:], file=sys.stderr)
            raise RuntimeError(f"the node's build path failed (exit status {proc.returncode})")
        out = proc.stdout
        r = json.loads(out.strip().splitlines()[-1])
        lines, met = report(r, params, wall)
        print("\n" + "\n".join(lines))
        print(json.dumps({**w, **r, "inspect_status": inspect_status}))
        status = 0 if inspect_status == 0 and met else 1
    finally:
        print(f"loadavg after: {_machine()}")
        if not args.keep:
            shutil.rmtree(root if not args.dir else folder, ignore_errors=True)
            if args.dir:
                shutil.rmtree(tokenizer, ignore_errors=True)
    return status
