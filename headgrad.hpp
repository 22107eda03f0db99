// headgrad.hpp - the umbrella header: every public header of the installed package, for
// `#include <headgrad/headgrad.hpp>`. (Each header can also be included alone, e.g.
// <headgrad/framework/ops/ops.hpp>.) The install test checks that this list names every
// installed header; docs/cpp-guide.md is the tour of what they hold.
#pragma once

// ---- tensors and autograd ------------------------------------------------------------------
#include "framework/core/dims.hpp"      // Dims: a shape or strides (up to 8 axes)
#include "framework/core/dtype.hpp"     // DType: f32, f64, i64, bool8
#include "framework/core/storage.hpp"   // the bytes behind tensors, from the engine
#include "framework/core/tensor.hpp"    // Tensor
#include "framework/core/random.hpp"    // Generator: seeded, the same stream everywhere
#include "framework/core/autograd.hpp"  // record(), Node, NoGradGuard: writing an op's backward
#include "framework/core/broadcast.hpp" // NumPy broadcasting shapes, for ops of your own
#include "framework/core/gradcheck.hpp" // gradcheck(): float64 central differences

// ---- ops -----------------------------------------------------------------------------------
#include "framework/ops/ops.hpp"      // elementwise, reductions, matmul, shape ops, indexing
#include "framework/ops/compare.hpp"  // comparisons, logical ops, argmax (no gradient)
#include "framework/ops/nn_ops.hpp"   // fused: attention, linear, layer norm, cross-entropy, ...

// ---- modules, optimizers, files --------------------------------------------------------------
#include "framework/nn/module.hpp"         // nn::Module: parameters by dotted name
#include "framework/nn/layers.hpp"         // Linear, LayerNorm, Embedding, Dropout, ReLU, GELU
#include "framework/optim/optimizer.hpp"   // SGD, Adam, AdamW, clipping, schedules
#include "framework/io/safetensors.hpp"    // checkpoints PyTorch reads and writes
#include "framework/io/restore.hpp"        // a checkpoint read back into a module and an optimizer
#include "framework/io/crc32c.hpp"         // CRC-32C, the checksum of each tensor in headgrad's files
#include "framework/io/regular_file.hpp"   // opening a named file for reading only if it is a regular one
#include "framework/engine/runtime/clock.hpp"     // seconds_now(): the monotonic clock headgrad times with
#include "framework/engine/runtime/cpu_isa.hpp"   // the instruction set of the vector kernels (HEADGRAD_ISA)
#include "framework/engine/runtime/startup.hpp"   // configure(argc, argv): the BLAS kernel and OpenMP wait policy
#include "framework/engine/runtime/threads.hpp"   // set_threads, BLAS info

// ---- the engine: what the book calls, and what makes it fast --------------------------------------
#include "framework/engine/kernels.hpp"  // the kernels' entry points, parallel_for, reference mode
#include "framework/engine/autocast.hpp" // runtime::Autocast: bf16 mixed precision for a scope
#include "framework/engine/alloc/caching_allocator.hpp"  // AllocatorStats: the storage cache

// ---- tools -----------------------------------------------------------------------------------
#include "framework/engine/profiler.hpp"  // per-op timing
#include "framework/io/graph_dot.hpp" // the autograd graph as Graphviz DOT

// ---- data parallelism (MPI when headgrad was built with it) -----------------------------------
#include "framework/distributed/communicator.hpp"
#include "framework/distributed/consistency.hpp"
#include "framework/distributed/shard_tree.hpp"       // the one order shards' sums are added in
#include "framework/distributed/tree_allreduce.hpp"   // the all-reduce that keeps it across ranks
#include "framework/distributed/shard_gradients.hpp"  // a rank's shards summed in it
#include "framework/distributed/bucketed_allreduce.hpp"
#include "framework/distributed/grad_ready_hooks.hpp"   // a leaf's gradient final in a backward: its hook runs
#include "framework/distributed/data_parallel.hpp"
#include "framework/distributed/replica_parameters.hpp" // thread replicas: shared values, own gradients

// ---- models and toy data (headgrad::models) ------------------------------------------------------
#include "models/attention.hpp"   // DotProductAttention, MultiHeadAttention (d2l and PyTorch forms)
#include "models/stack_config.hpp"  // the sizes both models share, checked in one place
#include "models/transformer.hpp" // the Transformer encoder model
#include "models/token_model.hpp" // TokenModel: tokens (B, T) -> logits (B, T, V), what train/ trains
#include "models/gpt.hpp"         // GPT: a decoder-only causal language model (nanoGPT's names)
#include "data/tasks.hpp"         // copy / reverse / sort batches and accuracy
#include "data/text.hpp"          // a text corpus: tokenizers, split, random windows
#include "data/token_files.hpp"   // nanoGPT's train.bin / val.bin, memory-mapped: a data source
#include "data/windows.hpp"       // (input, target) windows cut from a token stream (get_batch), for any source

// ---- generation: drawing tokens (the `headgrad sample` command's) ------------------------------
#include "train/sample/sampling.hpp"  // multinomial, sample_logits (int64 draws, no gradient)
#include "train/sample/kv_cache.hpp"  // GPT's forward on a key/value cache: one position per new token
#include "train/sample/generate.hpp"  // text generation with a key/value cache

// ---- training a model of your own (headgrad::train) ---------------------------------------------
#include "train/fit/data_source.hpp"   // train::Batch, the DataSource concept: batch i of a stream
#include "train/fit/trainer.hpp"       // train::Trainer: checkpoints, exact resume, signals, shards, ranks
#include "train/loop/stop_signal.hpp"  // install_interrupt_handler(): a signal saves and stops the run
#include "train/loop/train_step.hpp"   // the textbook step; NonFiniteError
