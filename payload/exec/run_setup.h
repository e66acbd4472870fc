// What every run kind that builds the model sets up the same way, as small steps in the
// order the kinds call them: threads and device (by data-parallel rank), the data set and
// its checks, the seeded model placed on the device in the precision (train.precision) and
// with the attention implementation (train.attention) of the config, a start checkpoint
// (resume or parent) restored, checkpoints saved, and the provenance fields that name all
// of these. Used by train, flops, mqar, passkey and the bench kinds. Included only by
// LibTorch translation units.
#pragma once

#include <torch/torch.h>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/checkpoint.h"
#include "payload/exec/data.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/manifest.h"
#include "payload/exec/model.h"

namespace headlab {

// Sets the intra-op threads (train.threads > 0) and resolves train.device (auto = cuda when
// available) for data-parallel rank `rank` into *device: rank r takes the r-th visible GPU.
// Unavailable when cuda is asked for and absent, or when fewer GPUs than ranks are visible.
Status PickDevice(const TrainConfig& t, int rank, torch::Device* device);

// Loads data.source and checks it against the model: the tokenizer (CheckDataFitsModel),
// data.calib_fraction held out, model.vocab large enough, and train and held-out splits of
// more than model.context tokens. InvalidArgument naming the config field otherwise.
StatusOr<Dataset> LoadRunData(const ExecConfig& c);

// Provenance of the data: source, path, SHA-256, split sizes and DatasetProvenance.
Json DataProvenance(const Dataset& d, const ExecConfig& c);

// The model of `c` on the CPU with its parameters in `weights` (GptImpl), its initial
// weights drawn after torch::manual_seed(c.seed) and then replaced by model.init_from's
// when set (its provenance into *init_prov, which may be null).
StatusOr<Gpt> SeededModel(const ExecConfig& c, Json* init_prov,
                          torch::ScalarType weights = torch::kFloat);

// Moves `model` to `device` and configures its execution (ConfigureExecution).
Status PlaceModel(Gpt& model, const TrainConfig& t, const torch::Device& device);

// Reads the checkpoint `from` names, checks its SHA-256 and step against the manifest's and
// restores it onto `model` and `opt` (built as the checkpoint's run built them) and
// *progress. Corruption on a mismatch.
Status RestoreStartCheckpoint(const ResumePoint& from, Gpt& model, torch::optim::Optimizer& opt,
                              TrainProgress* progress);

// Writes the checkpoint of progress.step to CheckpointPath(out_dir, step) atomically, the
// normalized config `config_json` stored with it for the record, and reports it as a
// "checkpoint" artifact.
Status SaveCheckpoint(const std::string& out_dir, const Json& config_json, Gpt& model,
                      torch::optim::Optimizer& opt, const TrainProgress& progress,
                      EventSink* events);

// Provenance every kind that builds a model reports: libtorch_version, device, threads and
// ExecutionProvenance.
Json RunProvenance(const Gpt& model, const torch::Device& device);

// Resolves train.precision for `device` and sets it on `model`; sets the process's
// attention mode from train.attention. InvalidArgument naming the key on bad values.
Status ConfigureExecution(Gpt& model, const TrainConfig& t, const torch::Device& device);

// Provenance of the execution set up above: precision, attention (mode), attention_backend,
// the compute dtype and the dtype the weights are held in.
Json ExecutionProvenance(const Gpt& model, const torch::Device& device);

// Per-layer attention paths after a forward (attention_cuda.h LayerPathLabel), grouped:
// {"<label>": [layers...]}, e.g. {"sdpa[9] fixed_gemm[3]": [0, 1, ...]}.
Json AttentionPaths(Gpt& model);

// Per-layer measured backend choices (train.attention = auto; attention_cuda.h
// LayerPlanChoices): [{"layer": l, "shape": "B=8 T=4096 BFloat16 fwd+bwd", "chosen": label,
// "candidates_ms": {label: median ms, ...}, "samples_ms": {label: [ms per repetition], ...}},
// ...], layers ascending; [] where nothing was measured.
Json AttentionChoices(Gpt& model);

// The layers' plans as provenance records them: {"attention_paths": AttentionPaths,
// "attention_choices": AttentionChoices}.
Json AttentionPlanProvenance(Gpt& model);

}  // namespace headlab
