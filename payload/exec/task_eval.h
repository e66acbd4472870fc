// Run kinds "mqar" and "passkey": the synthetic tasks of tasks.h run on the LM of model.h.
// Torch-free header.
//
// mqar     trains (train.steps updates of train.batch_size x grad_accum generated sequences,
//          AdamW with train.cc's schedule) and evaluates on mqar.eval_examples held-out
//          sequences; loss and accuracy at query positions only (SAF App. C.3.6). Training
//          examples are GenerateMqar(spec, 2 * seed, i), evaluation examples
//          GenerateMqar(spec, 2 * seed + 1, i): deterministic per seed and disjoint streams.
//          Starts from a parent checkpoint when the manifest names one (the step counter
//          continues from it; train.steps at or below it = evaluation only; mqar.updates > 0
//          trains that many updates past it instead, whatever step it holds) and writes
//          checkpoints as kind train does, so a requeued attempt resumes exactly.
// passkey  evaluates the model (a parent checkpoint's, else the seed's fresh init) on
//          passkey retrieval (AoH §3): passkey.samples prompts per (length, depth) cell,
//          greedy decoding, exact match of the answer; no training.
#pragma once

#include "common/status.h"
#include "payload/exec/events.h"
#include "payload/exec/train.h"

namespace headlab {

// Runs kind "mqar" as described by `req` (its hooks are ignored). Returns InvalidArgument
// for an MQAR spec the model cannot hold, Cancelled on a stop request, Corruption for a bad
// parent or resume checkpoint.
Status RunMqar(const TrainRequest& req, EventSink* events);

// Runs kind "passkey". InvalidArgument for a vocabulary below 256 (byte-level prompts) or a
// prompt plus answer longer than the context.
Status RunPasskey(const TrainRequest& req, EventSink* events);

}  // namespace headlab
