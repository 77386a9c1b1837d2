// solder: deep-learning maths as C++ expressions that the compiler fuses into kernels.
// The one header users include. Layers, top to bottom (DESIGN.md §2):
//   core/     tensors, extents, dtypes, errors, views, factories
//   expr/     expression nodes and the functions that build them
//   plan/     the fusion planner: kernel_count, the run-time configuration, explain
//   backend/  executors that run one planned kernel (host: OpenMP; cuda: with nvcc), eager
//   nn/       modules (torch.nn's), state_dicts with PyTorch's keys; the models of
//             torchvision and Hugging Face are headers of their own (solder/nn/models/*.hpp),
//             included where used: each compiles its blocks' kernels
//   io/       safetensors files, read and written as PyTorch's
//   runtime/  sd::compile: signatures, guards, recompiles, dynamic shapes, padding; the logs,
//             traces, sd::explain of a call, sd::compare
#pragma once

#include "core/config.hpp"
#include "core/error.hpp"
#include "core/dtype.hpp"
#include "core/extents.hpp"
#include "core/device.hpp"
#include "core/threads.hpp"
#include "core/tensor.hpp"
#include "core/random.hpp"
#include "core/factories.hpp"
#include "core/print.hpp"
#include "core/views.hpp"
#include "core/any_tensor.hpp"

#include "expr/node.hpp"
#include "expr/map.hpp"
#include "expr/functions.hpp"
#include "expr/reduce.hpp"
#include "expr/rows.hpp"
#include "expr/view.hpp"
#include "expr/memory_format.hpp"
#include "expr/contract.hpp"
#include "expr/conv.hpp"
#include "expr/attention.hpp"
#include "expr/embedding.hpp"
#include "expr/results.hpp"

#include "plan/plan.hpp"
#include "plan/common_reductions.hpp"
#include "plan/explain.hpp"

#include "backend/eval.hpp"
#include "backend/host/evaluators.hpp"
#include "backend/host/executor.hpp"
#if defined(__CUDACC__)
#include "backend/cuda/runtime.hpp"
#include "backend/cuda/evaluators.hpp"
#include "backend/cuda/executor.hpp"
#include "backend/cuda/contract.hpp"
#include "backend/cuda/conv.hpp"
#include "backend/cuda/pool.hpp"
#include "backend/cuda/embedding.hpp"
#include "backend/cuda/attention.hpp"
#endif
#include "backend/assign.hpp"
#include "backend/results.hpp"
#include "backend/eager.hpp"

#include "nn/module.hpp"
#include "nn/layers.hpp"
#include "nn/block.hpp"
#include "nn/containers.hpp"
#include "nn/transformer.hpp"

#include "io/safetensors.hpp"

#include "runtime/logs.hpp"
#include "runtime/dynamic.hpp"
#include "runtime/trace.hpp"
#include "runtime/compile.hpp"
#include "runtime/explain.hpp"
#include "runtime/compare.hpp"
