#!/usr/bin/env python3
"""fit_conv_curves.py: fits the convolution and pooling curves of a GPU
performance file (models/gpus/*.json: conv.efficiency.tf32, pool.fraction,
launch.us) to DeepPool's measured per-layer A100 profile of
VGG-16 (traces/reference/deeppool/vggLayerGpuProfileA100.txt), through the
stagger binary itself, so the fit and the model are one code.

    scripts/fit_conv_curves.py [STAGGER] [--write]

For a candidate, the batch sizes training uses (8 to 128 of the profile's 1
to 128) are simulated with `--compute-model estimate` on one A100; each
measured row (forward +
backward of one layer, in a CUDA graph) is set against stagger's forward and
backward of the same layer (a convolution with the in-place ReLU that
follows it, which the authors' rows include; a max pool alone). The first
convolution is left out (whether its row computes an input gradient is not
known) and so are the linear layers (their curve is the GEMM's, from a
published matmul measurement, not fitted here). The loss is the mean square
of log(predicted / measured) over the rows: every row weighs the same
whatever its size. Coordinate descent over a grid of each parameter, three
rounds. conv.k_half stays the GEMM's (128, a tile's pipeline depth): fitted
too it goes to 400, which VGG's reductions (K >= 576) cannot tell from a
lower efficiency but which would make ResNet's 1x1 convolutions over 64
channels run at 14 % of the peak. Prints the fit and its error per batch; --write stores the values
in models/gpus/a100-sxm4.json (and default.json, which takes the A100's).

Held out of the fit, and reported apart in docs/VALIDATION.md: WRN-101-2
(the other DeepPool profile), ResNet-50 and GPT (NVIDIA's and Megatron-LM's
published throughputs).
"""
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROFILE = os.path.join(SRC, "traces/reference/deeppool/vggLayerGpuProfileA100.txt")
GPU = os.path.join(SRC, "models/gpus/a100-sxm4.json")
CLUSTER = os.path.join(SRC, "models/clusters/dgx-a100.json")
# Below this batch DeepPool's rows carry 0.2-0.4 ms per layer that no kernel
# explains (2-3 kernels of a few tiles each): left out of the fit, and
# reported as a limit of the model in docs/VALIDATION.md.
MIN_BATCH = 8


def measured():
    """{batch: [(kind, ms)]} in row order: kind 'conv', 'pool' or 'other'."""
    out, batch = {}, None
    for line in open(PROFILE):
        m = re.match(r"\s*(conv2d|maxPool2d|flatten|linear)\{.*\}\[(\d+)\]\S*\s+([\d.]+)", line)
        if not m:
            continue
        kind = {"conv2d": "conv", "maxPool2d": "pool"}.get(m.group(1), "other")
        batch = int(m.group(2))
        out.setdefault(batch, []).append((kind, float(m.group(3))))
    return out


def simulate(stagger, perf, batch, tmp):
    """{layer name: us} of one step's forward + backward, from ops.csv."""
    gpu = os.path.join(tmp, "gpu.json")
    json.dump(perf, open(gpu, "w"))
    cluster = json.load(open(CLUSTER))
    cluster["gpu"]["performance"] = gpu
    cpath = os.path.join(tmp, "cluster.json")
    json.dump(cluster, open(cpath, "w"))
    out = os.path.join(tmp, "run%d" % batch)
    subprocess.run([stagger, "sim", "--model", os.path.join(SRC, "models/vgg16.json"),
                    "--cluster", cpath, "--gpus", "1", "--micro-batch", str(batch),
                    "--steps", "1", "--compute-model", "estimate", "--force", "--out", out],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = {}
    with open(os.path.join(out, "ops.csv")) as f:
        for r in csv.DictReader(f):
            if r["kind"] == "COMP" and r["what"] in ("fwd", "bwd"):
                times[r["layer"]] = times.get(r["layer"], 0) + float(r["duration_us"])
    return times


def pairs(stagger, perf, meas, tmp):
    """[(batch, predicted ms, measured ms, kind)] for the rows fitted."""
    shown = subprocess.run([stagger, "model", "show", "--json",
                            os.path.join(SRC, "models/vgg16.json")],
                           check=True, capture_output=True, text=True).stdout
    layers = [l["name"] for l in json.loads(shown)["layers"]]
    out = []
    for batch, rows in sorted(meas.items()):
        t = simulate(stagger, perf, batch, tmp)
        convs = [i for i, n in enumerate(layers) if n.startswith("conv")]
        pools = [n for n in layers if n.startswith("pool")]
        ci = pi = 0
        for kind, ms in rows:
            if kind == "conv":
                i = convs[ci]
                ci += 1
                if i == 0:
                    continue
                pred = (t[layers[i]] + t.get(layers[i + 1], 0)) / 1000
                out.append((batch, pred, ms, "conv"))
            elif kind == "pool":
                out.append((batch, t[pools[pi]] / 1000, ms, "pool"))
                pi += 1
    return out


def loss(ps):
    return sum(math.log(p / m) ** 2 for _, p, m, _ in ps) / len(ps)


def with_params(base, x, scale=1.0):
    """The file with the fitted numbers: the convolution efficiency the same
    share of every peak (the A100's TF32 one was measured), times `scale` for
    a GPU whose GEMMs reach a different share (the V100's), per dtype."""
    perf = json.loads(json.dumps(base))
    perf["conv"]["k_half"] = x["k_half"]
    for dtype in ("fp32", "tf32", "16bit"):
        s = scale if isinstance(scale, (int, float)) else scale[dtype]
        perf["conv"]["efficiency"][dtype] = round(x["eff"] * s, 3)
    perf["pool"]["fraction"] = x["pool"]
    perf["launch"]["us"] = x["launch"]
    return perf


def main():
    stagger = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") \
        else os.path.join(SRC, "build/stagger")
    base = json.load(open(GPU))
    meas = {b: rows for b, rows in measured().items() if b >= MIN_BATCH}
    grid = {"eff": [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 1.0],
            "pool": [0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6],
            "launch": [2, 4, 6, 8, 10, 15, 20]}
    x = {"k_half": base["conv"]["k_half"], "eff": base["conv"]["efficiency"]["tf32"],
         "pool": base["pool"]["fraction"], "launch": base["launch"]["us"]}
    with tempfile.TemporaryDirectory() as tmp:
        best = loss(pairs(stagger, with_params(base, x), meas, tmp))
        for _ in range(3):
            for key, values in grid.items():
                for v in values:
                    y = dict(x, **{key: v})
                    l = loss(pairs(stagger, with_params(base, y), meas, tmp))
                    if l < best - 1e-12:
                        best, x = l, y
        ps = pairs(stagger, with_params(base, x), meas, tmp)
    print("fit: conv tf32 efficiency %g, pool fraction %g, launch %g us (conv k_half %g)"
          % (x["eff"], x["pool"], x["launch"], x["k_half"]))
    print("rms log error %.3f over %d rows (%.1f %% typical)"
          % (math.sqrt(best), len(ps), 100 * (math.exp(math.sqrt(best)) - 1)))
    for b in sorted({p[0] for p in ps}):
        pred = sum(p for bb, p, _, _ in ps if bb == b)
        mm = sum(m for bb, _, m, _ in ps if bb == b)
        print("batch %4d: predicted %8.3f ms, measured %8.3f ms, %+.1f %%"
              % (b, pred, mm, 100 * (pred / mm - 1)))
    if "--write" in sys.argv:
        a100 = json.load(open(GPU))["gemm"]["efficiency"]["16bit"]
        for name in ("a100-sxm4.json", "default.json", "h100-sxm.json", "h200-sxm.json",
                     "v100-sxm2.json"):
            path = os.path.join(SRC, "models/gpus", name)
            perf = json.load(open(path))
            # The V100 takes the A100's share scaled by its GEMMs' share of
            # their peak against the A100's (no profile of its own).
            scale = 1.0
            if name == "v100-sxm2.json":
                g = perf["gemm"]["efficiency"]
                scale = {"fp32": g["fp32"] / a100, "tf32": 1.0, "16bit": g["16bit"] / a100}
            json.dump(with_params(perf, x, scale), open(path, "w"), indent=2)
            open(path, "a").write("\n")
        print("written to models/gpus/{a100-sxm4,default,h100-sxm,h200-sxm,v100-sxm2}.json")


if __name__ == "__main__":
    main()
