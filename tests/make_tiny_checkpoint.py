#!/usr/bin/python3
"""Writes a tiny Llama-shaped Hugging Face checkpoint for the system tests (standard
library only): config.json, model.safetensors (random float32 weights, seeded) and GPT-2's
tokenizer (encoder.json + vocab.bpe copied from GPT2_DIR), so its vocabulary (50257) and
tokenizer match the default corpus. Usage: make_tiny_checkpoint.py OUT_DIR GPT2_DIR"""
import json
import os
import random
import shutil
import struct
import sys

out, gpt2 = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
V, C, L, H, KV, D, I = 50257, 32, 2, 4, 2, 8, 64
config = {"model_type": "llama", "vocab_size": V, "hidden_size": C, "num_hidden_layers": L,
          "num_attention_heads": H, "num_key_value_heads": KV, "intermediate_size": I,
          "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
          "tie_word_embeddings": True, "rope_scaling": None, "max_position_embeddings": 2048}
rng = random.Random(7)
tensors = [("model.embed_tokens.weight", [V, C], 0.02), ("model.norm.weight", [C], None)]
for i in range(L):
    p = "model.layers.%d." % i
    tensors += [(p + "input_layernorm.weight", [C], None),
                (p + "self_attn.q_proj.weight", [H * D, C], 0.2),
                (p + "self_attn.k_proj.weight", [KV * D, C], 0.2),
                (p + "self_attn.v_proj.weight", [KV * D, C], 0.2),
                (p + "self_attn.o_proj.weight", [C, H * D], 0.2),
                (p + "post_attention_layernorm.weight", [C], None),
                (p + "mlp.gate_proj.weight", [I, C], 0.2),
                (p + "mlp.up_proj.weight", [I, C], 0.2),
                (p + "mlp.down_proj.weight", [C, I], 0.2)]
header, blobs, offset = {}, [], 0
for name, shape, std in tensors:
    n = 1
    for d in shape:
        n *= d
    values = [1.0] * n if std is None else [rng.gauss(0.0, std) for _ in range(n)]
    blob = struct.pack("<%df" % n, *values)
    header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
    blobs.append(blob)
    offset += len(blob)
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
for name in ("encoder.json", "vocab.bpe"):
    shutil.copy(os.path.join(gpt2, name), os.path.join(out, name))
