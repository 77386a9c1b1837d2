// solder: deep-learning maths as C++ expressions that the compiler fuses into kernels.
// The one header users include. Two headers split it by layer, as Eigen's modules do:
// solder/expressions.hpp (core/ to backend/: tensors and expressions) and solder/nn.hpp (nn/,
// io/, runtime/). Layers, top to bottom (DESIGN.md §2):
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

#include "expressions.hpp"
#include "nn.hpp"
