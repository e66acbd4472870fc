// model.init_from: a Hugging Face checkpoint's safetensors weights onto headlab's model
// (model.h), for the families of hf_config.h. Included only by LibTorch translation units.
//
// Name map (HF -> headlab; i = layer):
//   gpt2   wte, wpe (first model.context rows), h.i.ln_1 -> blocks.i.ln1, h.i.attn.c_attn
//          (Conv1D [C, 3C]: transposed, rows q | k | v) -> attn.{q,k,v}_proj, h.i.attn.c_proj
//          -> attn.o_proj, h.i.ln_2 -> ln2, h.i.mlp.c_fc -> fc, h.i.mlp.c_proj -> proj (Conv1D:
//          transposed), ln_f; optional "transformer." prefix; lm_head must equal wte if present
//   llama  model.embed_tokens -> wte, model.layers.i.input_layernorm -> ln1,
//   family self_attn.{q,k,v,o}_proj -> attn.*, self_attn.{q,k}_norm -> attn.{q,k}_norm,
//          post_attention_layernorm -> ln2, mlp.gate_proj -> gate, mlp.up_proj -> fc,
//          mlp.down_proj -> proj, model.norm -> ln_f, lm_head -> head (untied)
// Every headlab parameter must be found with exactly the expected shape, and every tensor
// of the checkpoint must be used (except GPT-2's attention-mask buffers and rotary
// inv_freq buffers); errors name the file, the tensor and both shapes. F32, F16, BF16 and
// F64 tensors are converted to float32.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/model.h"

namespace headlab {

struct ImportInfo {
  std::string source;   // the safetensors file or index read
  std::string sha256;   // of config.json and every weight file, in order
  int64_t tensors = 0;  // checkpoint tensors used
};

// Copies the checkpoint at `dir` into `model` (built from the ModelConfig that
// ReadHfModelConfig made of the same folder).
Status ImportWeights(GptImpl& model, const std::string& dir, ImportInfo* info);

// When c.init_from is set, imports its weights into `model` (just built from `c`) and adds
// init_from, init_from_sha256 and init_from_family to *provenance; otherwise does nothing.
Status InitFromCheckpoint(GptImpl& model, const ModelConfig& c, Json* provenance);

}  // namespace headlab
