"""The card's own ceilings, measured in the process that compares against them: the memory bandwidth
a decode step is bound by and the bf16 matrix rate an update is bound by.

    python bench/ceilings.py [--device cuda] [--json F]

- copy bandwidth: a device-to-device copy of 2 GiB, bytes read plus bytes written over the time (the median of 10
  after 3 warm-ups);
- matmul: an 8192 x 8192 x 8192 product on random data, 2 x 8192^3 FLOP over the time (the median of 10 after 3),
  in bf16 (the update's rate under mixed precision) and fp32 (TF32 off, as rlvr leaves it by default).
The vendor's figures for an H200 SXM (4.8 TB/s, ~989 TFLOP/s dense bf16, ~67 TFLOP/s fp32) are printed beside them:
a measured ceiling below the datasheet's is the honest bound for a step measured on the same card.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

DATASHEET = {"NVIDIA H200": {"bandwidth_tb_s": 4.8, "bf16_tflops": 989.0, "fp32_tflops": 67.0},
             "NVIDIA H100 80GB HBM3": {"bandwidth_tb_s": 3.35, "bf16_tflops": 989.0, "fp32_tflops": 67.0}}


def _median_seconds(fn, device: str, repeat: int = 10, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        torch.cuda.synchronize() if device.startswith("cuda") else None
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize() if device.startswith("cuda") else None
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_bandwidth(device: str, gib: float = 2.0) -> float:
    """Bytes a second a device-to-device copy moves (read + written)."""
    count = int(gib * 2**30) // 4
    source, target = torch.rand(count, device=device), torch.empty(count, device=device)
    seconds = _median_seconds(lambda: target.copy_(source), device)
    return 2 * count * 4 / seconds


def matmul_rate(device: str, dtype: torch.dtype, n: int = 8192) -> float:
    """FLOP a second of an n x n x n product on random data."""
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 stays fp32, as rlvr's default model.tf32=false leaves it
    try:
        a, b = torch.rand(n, n, device=device, dtype=dtype), torch.rand(n, n, device=device, dtype=dtype)
        seconds = _median_seconds(lambda: a @ b, device)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved
    return 2 * n**3 / seconds


def measure(device: str, small: bool = False) -> dict:
    """small: sizes for a smoke test on a CPU (bf16 products there are ~600x slower), not a ceiling."""
    name = torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"
    n, gib = (128, 0.01) if small else (8192, 2.0)
    return {"device": name, "bandwidth_tb_s": copy_bandwidth(device, gib) / 1e12,
            "bf16_tflops": matmul_rate(device, torch.bfloat16, n) / 1e12,
            "fp32_tflops": matmul_rate(device, torch.float32, n) / 1e12, "datasheet": DATASHEET.get(name)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--small", action="store_true", help="tiny sizes: a smoke test of the script on a CPU")
    args = parser.parse_args()
    result = measure(args.device, args.small)
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
