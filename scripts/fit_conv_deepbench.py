#!/usr/bin/env python3
"""fit_conv_deepbench.py: fits the V100's 16-bit convolution efficiency
(models/gpus/v100-sxm2.json conv.efficiency.16bit) to DeepBench's measured
V100 convolutions (traces/reference/deepbench/v100-conv-fp16.csv: cuDNN
7.6.2, fp16 inputs with fp32 accumulation), through the stagger binary
itself, so the fit and the model are one code.

    scripts/fit_conv_deepbench.py [STAGGER] [--write]

Each row is one convolution: forward, and the gradients of its input and
its weights. It is simulated as a layer of its own (after a ReLU, so that
its input gradient is computed) on one V100 with --compute-model estimate
at the row's batch, and the layer's forward + backward is set against the
row's three times summed. Rows are used when their kernel is square, they
have a measured input gradient (C >= 16) and their time is set by work
rather than by a launch: batch >= 8 and 0.3 ms or more in all; the
1x1 convolutions padded by 3 (an odd face-recognition shape, 10x slower
backward than their FLOPs say) are left out. The efficiency is found by
bisection so that the mean of ln(predicted / measured) over those rows is
0; the spread is printed. --write stores it in the GPU file.
"""
import csv
import json
import math
import os
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = os.path.join(SRC, "traces/reference/deepbench/v100-conv-fp16.csv")
GPU = os.path.join(SRC, "models/gpus/v100-sxm2.json")
MIN_MS = 0.3


def rows():
    out = []
    for r in csv.DictReader(open(ROWS)):
        n, c = int(r["n"]), int(r["c"])
        if r["s"] != r["r"] or r["pad_w"] != r["pad_h"] or r["stride_w"] != r["stride_h"]:
            continue
        if n < 8 or c < 16 or not r["bwd_inputs_ms"]:
            continue
        if int(r["r"]) == 1 and int(r["pad_h"]) > 0:
            continue
        ms = float(r["fwd_ms"]) + float(r["bwd_inputs_ms"]) + float(r["bwd_params_ms"])
        if ms >= MIN_MS:
            out.append((r, ms))
    return out


def simulate(stagger, data, r):
    """Forward + backward of the row's convolution, in ms."""
    model = {"name": "deepbench", "input": [int(r["c"]), int(r["h"]), int(r["w"])],
             "layers": [{"name": "pre", "type": "relu"},
                        {"name": "conv", "type": "conv2d", "out_channels": int(r["k"]),
                         "kernel": int(r["r"]), "stride": int(r["stride_h"]),
                         "padding": int(r["pad_h"]), "bias": False}]}
    mpath = os.path.join(data, "model.json")
    json.dump(model, open(mpath, "w"))
    out = os.path.join(data, "run")
    subprocess.run([stagger, "sim", "--model", mpath,
                    "--cluster", os.path.join(data, "models/clusters/dgx-v100.json"),
                    "--gpus", "1", "--precision", "mixed", "--optimizer", "sgd",
                    "--micro-batch", r["n"], "--memory-format", "nhwc",
                    "--calibration", "none", "--out", out],
                   check=True, capture_output=True, env=dict(os.environ, STAGGER_DATA_DIR=data))
    ms = 0.0
    for op in csv.DictReader(open(os.path.join(out, "ops.csv"))):
        if op["layer"] == "conv" and op["kind"] == "COMP":
            ms += float(op["duration_us"]) / 1000
    return ms


def mean_log(stagger, data, selected, eff):
    gpu = json.load(open(GPU))
    gpu["conv"]["efficiency"]["16bit"] = eff
    json.dump(gpu, open(os.path.join(data, "models/gpus/v100-sxm2.json"), "w"))
    logs = [math.log(simulate(stagger, data, r) / ms) for r, ms in selected]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    return mean, sd


def main():
    args = [a for a in sys.argv[1:] if a != "--write"]
    stagger = args[0] if args else os.path.join(SRC, "build/stagger")
    selected = rows()
    with tempfile.TemporaryDirectory() as data:
        os.makedirs(os.path.join(data, "models/gpus"))
        os.makedirs(os.path.join(data, "models/clusters"))
        for sub in ("clusters", "gpus"):
            for name in os.listdir(os.path.join(SRC, "models", sub)):
                with open(os.path.join(SRC, "models", sub, name)) as f:
                    open(os.path.join(data, "models", sub, name), "w").write(f.read())
        lo, hi = 0.3, 1.0
        for _ in range(12):
            mid = (lo + hi) / 2
            mean, sd = mean_log(stagger, data, selected, mid)
            lo, hi = (lo, mid) if mean < 0 else (mid, hi)
        eff = round((lo + hi) / 2, 3)
        mean, sd = mean_log(stagger, data, selected, eff)
    print(f"{len(selected)} DeepBench V100 convolutions of {MIN_MS} ms or more: "
          f"conv.efficiency.16bit {eff}, ln(predicted/measured) mean {mean:+.3f} sd {sd:.3f}")
    if "--write" in sys.argv:
        gpu = json.load(open(GPU))
        gpu["conv"]["efficiency"]["16bit"] = eff
        with open(GPU, "w") as f:
            json.dump(gpu, f, indent=2)
            f.write("\n")
        print(f"wrote {GPU}")


if __name__ == "__main__":
    main()
