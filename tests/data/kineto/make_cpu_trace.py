#!/usr/bin/python3
"""Writes tests/data/kineto/mlp-cpu.json: a torch.profiler trace of three
training steps of models/mlp.json (784-512-512-10, SGD, batch 32) on the CPU,
made with Debian's python3-torch (1.13, whose profiler is the legacy one: the
trace is a bare array of events, without Kineto's categories or sequence
numbers). stagger profile --import-kineto reads it in tests/cli/kineto.sh.

    /usr/bin/python3 tests/data/kineto/make_cpu_trace.py tests/data/kineto/mlp-cpu.json

annotate() is what a user adds to their own training script: every leaf
module's forward runs inside record_function(NAME) and its backward inside
record_function(NAME.backward), NAME being the layer's name in the stagger
model (here the module's name in the nn.Sequential). With Kineto (a GPU
build of PyTorch) the forward ranges are enough: the profiler links each
backward to its forward by sequence numbers.
"""
import sys

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule


def annotate(model):
    for name, module in model.named_modules():
        if name == "" or any(True for _ in module.children()):
            continue

        def forward_pre(mod, inputs, name=name):
            mod._stagger_fwd = record_function(name)
            mod._stagger_fwd.__enter__()

        def forward(mod, inputs, output, name=name):
            mod._stagger_fwd.__exit__(None, None, None)
            # The backward starts when the output's gradient arrives and ends
            # when the gradients of its inputs and parameters are made.
            ends = [t for t in list(inputs) + list(mod.parameters()) if t.requires_grad]
            state = {"left": len(ends), "handles": []}

            def done(grad):
                state["left"] -= 1
                if state["left"] == 0:
                    mod._stagger_bwd.__exit__(None, None, None)
                    for h in state["handles"]:
                        h.remove()

            def start(grad):
                mod._stagger_bwd = record_function(name + ".backward")
                mod._stagger_bwd.__enter__()
                if not ends:
                    mod._stagger_bwd.__exit__(None, None, None)

            output.register_hook(start)
            state["handles"] = [t.register_hook(done) for t in ends]

        module.register_forward_pre_hook(forward_pre)
        module.register_forward_hook(forward)


class Loss(nn.Module):
    """softmax_cross_entropy against fixed targets, as a module so it is a layer."""

    def __init__(self, target):
        super().__init__()
        self.target = target

    def forward(self, x):
        return nn.functional.cross_entropy(x, self.target)


def main(out):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    batch = 32
    model = nn.Sequential()
    for name, m in [("fc1", nn.Linear(784, 512)), ("relu1", nn.ReLU()),
                    ("fc2", nn.Linear(512, 512)), ("relu2", nn.ReLU()),
                    ("fc3", nn.Linear(512, 10)),
                    ("loss", Loss(torch.randint(0, 10, (batch,))))]:
        model.add_module(name, m)
    annotate(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 784)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3),
                 on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
        for _ in range(4):
            loss = model(x)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()


if __name__ == "__main__":
    main(sys.argv[1])
