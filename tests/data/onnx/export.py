#!/usr/bin/env python3
"""export.py: the ONNX networks of tests/data/onnx and torch's own counts of them.

Run once, from anywhere, where Debian's python3-torch, python3-torchvision and
python3-onnx are installed (stagger's CI does not install them: it reads the
files this writes, which are committed):

    python3 tests/data/onnx/export.py

For each network it writes NAME.onnx: exported by torch.onnx with the model in
training mode (batch norms and dropout stay in the graph as a training step
runs them), constant folding off (a tied LM head stays a Transpose of the
embedding's table instead of a second copy of it), opset 17, batch 1. Its
weights are then moved out to external data (NAME.onnx.data, deleted: stagger
reads shapes, never weight bytes), which keeps the committed files small.
One small network, tiny_gpt_folded, is exported with torch.onnx's defaults
instead (eval mode, constant folding) and keeps its weights: its tied head
is a folded copy of the table that only the bytes reveal.

It also writes, with onnx.helper, the small graphs of tests/data/onnx/cases/
that the tests feed the importer to see it refuse or handle what it must:
an operator it does not know, two inputs, a symbolic dim.

counts.json gets, per network, torch's own counts, independent of stagger:
  params       sum of numel() over model.parameters() (tied weights once)
  dense_flops  forward FLOPs of the matrix products (convolutions, mm, addmm,
               bmm) that the forward really runs, seen by a dispatch-level hook
               on the aten operators: 2 per multiply-add, bias adds not
               counted (torch.utils.flop_counter's convention).
"""
import json
import math
import os
import sys

import onnx
import torch
import torch.nn as nn
import torchvision
from torch.utils._python_dispatch import TorchDispatchMode

HERE = os.path.dirname(os.path.abspath(__file__))
aten = torch.ops.aten


class DenseFlops(TorchDispatchMode):
    """Counts 2 x multiply-adds of every convolution and matrix product run."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        packet = func.overloadpacket
        if packet is aten.convolution:
            weight = args[1]
            self.flops += 2 * out.numel() * (weight.numel() // weight.shape[0])
        elif packet is aten.mm:
            self.flops += 2 * args[0].shape[0] * args[0].shape[1] * args[1].shape[1]
        elif packet is aten.addmm:
            self.flops += 2 * args[1].shape[0] * args[1].shape[1] * args[2].shape[1]
        elif packet in (aten.bmm, aten.baddbmm):
            a, b = (args[0], args[1]) if packet is aten.bmm else (args[1], args[2])
            self.flops += 2 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
        return out


class Block(nn.Module):
    """A pre-LN GPT-2 block: causal attention with a fused QKV projection,
    then a GELU MLP, dropout on the probabilities and both residuals."""

    def __init__(self, d, heads, ffn, p):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(d)
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, ffn)
        self.proj = nn.Linear(ffn, d)
        self.attn_drop = nn.Dropout(p)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // self.heads))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = self.attn_drop(torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.drop(self.c_proj(y))
        return x + self.drop(self.proj(nn.functional.gelu(self.fc(self.ln_2(x)))))


class TinyGPT(nn.Module):
    """GPT-2's shape at toy size: token and learned position embeddings, pre-LN
    blocks, a final LayerNorm and an LM head tied to the token embedding."""

    def __init__(self, vocab=512, tokens=64, d=128, heads=4, layers=2, p=0.1):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Parameter(torch.zeros(tokens, d))
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(Block(d, heads, 4 * d, p) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids):
        x = self.drop(self.wte(ids) + self.wpe)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class RMSNorm(nn.Module):
    """x / rms(x) * g, written out as LLaMA's reference code does."""

    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope(x, theta=10000.0):
    """Rotary positions on [b, heads, t, head_dim], tables made in the forward
    (a registered buffer would be an initializer, counted as a weight)."""
    t, hd = x.shape[2], x.shape[3]
    inv = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
    angles = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cos(angles).repeat(1, 2), torch.sin(angles).repeat(1, 2)
    return x * cos + torch.cat((-x[..., hd // 2:], x[..., : hd // 2]), dim=-1) * sin


class LlamaBlock(nn.Module):
    """LLaMA's decoder layer: RMSNorm, GQA attention with RoPE, RMSNorm, SwiGLU."""

    def __init__(self, d, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
        self.input_layernorm = RMSNorm(d)
        self.post_attention_layernorm = RMSNorm(d)
        self.q_proj = nn.Linear(d, heads * self.hd, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.hd, bias=False)
        self.o_proj = nn.Linear(heads * self.hd, d, bias=False)
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.input_layernorm(x)
        q = self.q_proj(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k = self.k_proj(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        v = self.v_proj(h).view(b, t, self.kv_heads, self.hd).transpose(1, 2)
        q, k = rope(q), rope(k)
        shape = (b, self.kv_heads, self.heads // self.kv_heads, t, self.hd)
        k = k[:, :, None].expand(shape).reshape(b, self.heads, t, self.hd)
        v = v[:, :, None].expand(shape).reshape(b, self.heads, t, self.hd)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        x = x + self.o_proj((att @ v).transpose(1, 2).reshape(b, t, d))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class TinyLlama(nn.Module):
    """LLaMA's shape at toy size: grouped-query heads, an untied head."""

    def __init__(self, vocab=512, d=128, heads=4, kv_heads=2, ffn=344, layers=2):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(LlamaBlock(d, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def networks():
    """(name, model, sample input, input name, exported as for training)"""
    torch.manual_seed(0)
    yield "resnet50", torchvision.models.resnet50(), torch.randn(1, 3, 224, 224), "image", True
    yield ("mobilenet_v2", torchvision.models.mobilenet_v2(), torch.randn(1, 3, 224, 224),
           "image", True)
    yield "tiny_gpt", TinyGPT(), torch.randint(0, 512, (1, 64)), "tokens", True
    # torch.onnx.export's defaults (eval mode, constant folding), weights kept in
    # the file: the tied head becomes a transposed copy of the table, which
    # only the weights' bytes tell apart from a head of its own. Weights drawn
    # at random, as trained ones would be: the exporter merges initializers of
    # equal values, and fresh LayerNorms are all ones.
    folded = TinyGPT(vocab=64, tokens=16, d=32, heads=2, layers=1)
    with torch.no_grad():
        for p in folded.parameters():
            p.normal_()
    yield "tiny_gpt_folded", folded, torch.randint(0, 64, (1, 16)), "tokens", False
    yield "vit_b_16", torchvision.models.vit_b_16(), torch.randn(1, 3, 224, 224), "image", True
    yield "tiny_llama", TinyLlama(), torch.randint(0, 512, (1, 64)), "tokens", True


def export(name, model, sample, input_name, training):
    path = os.path.join(HERE, name + ".onnx")
    if training:
        model.train()
        torch.onnx.export(model, sample, path, training=torch.onnx.TrainingMode.TRAINING,
                          do_constant_folding=False, opset_version=17,
                          input_names=[input_name], output_names=["logits"])
        proto = onnx.load(path)
        onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=name + ".onnx.data", size_threshold=1024)
        os.remove(path + ".data")
    else:
        model.eval()
        torch.onnx.export(model, sample, path, opset_version=17, input_names=[input_name],
                          output_names=["logits"])
    counter = DenseFlops()
    with counter:
        model(sample)
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "dense_flops": counter.flops // sample.shape[0],
        "bytes": os.path.getsize(path),
    }


def cases():
    """Small hand-built graphs, each showing one thing the importer must handle."""
    from onnx import TensorProto, helper
    folder = os.path.join(HERE, "cases")
    os.makedirs(folder, exist_ok=True)
    weight = helper.make_tensor("w", TensorProto.FLOAT, [8, 8], [0.0] * 64)
    opset = [helper.make_opsetid("", 17)]

    def save(name, nodes, inputs, initializers=()):
        out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        graph = helper.make_graph(nodes, name, inputs, [out], list(initializers))
        onnx.save(helper.make_model(graph, opset_imports=opset, producer_name="export.py"),
                  os.path.join(folder, name + ".onnx"))

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    save("unsupported_op", [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Hardmax", ["r"], ["y"], name="hardmax")], [x])
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 8])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 8])
    save("two_inputs", [helper.make_node("Add", ["a", "b"], ["y"], name="add")], [a, b])
    seq = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])
    save("symbolic_dim", [helper.make_node("MatMul", ["x", "w"], ["y"], name="proj")], [seq],
         [weight])


def main():
    cases()
    counts = {"torch": torch.__version__, "torchvision": torchvision.__version__,
              "onnx": onnx.__version__, "networks": {}}
    for name, model, sample, input_name, training in networks():
        counts["networks"][name] = export(name, model, sample, input_name, training)
        print(name, counts["networks"][name], file=sys.stderr)
    with open(os.path.join(HERE, "counts.json"), "w") as out:
        json.dump(counts, out, indent=2, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main()
