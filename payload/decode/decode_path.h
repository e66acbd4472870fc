// How the KV-cache decoder (decoder.h) runs decode steps on CUDA. Torch-free: the run
// kinds' options carry it (payload/methods/aoh/aoh_options.h; names in aoh_schema.h's
// kDecodePathNames).
#pragma once

namespace headlab::decode {

// kGraph: the split-K decode kernel with each step replayed from one captured CUDA graph;
// kFused: the same kernel, every operation launched from the host; kReference: matmul +
// softmax over the cache (also every path's prefill and the CPU).
enum class DecodePath { kGraph, kFused, kReference };

}  // namespace headlab::decode
