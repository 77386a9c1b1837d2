// solder's modules, files and runtime: the layers nn/, io/ and runtime/ (DESIGN.md §2) over
// expressions.hpp — torch.nn's modules and state_dicts, safetensors, sd::compile with its
// guards, logs, traces and explain of a call. The models are headers of their own
// (solder/nn/models/*.hpp).
#pragma once
#include "expressions.hpp"

#include "nn/module.hpp"
#include "nn/layers.hpp"
#include "nn/block.hpp"
#include "nn/containers.hpp"
#include "nn/transformer.hpp"

#include "optim/optimizers.hpp"

#include "io/safetensors.hpp"

#include "runtime/logs.hpp"
#include "runtime/dynamic.hpp"
#include "runtime/trace.hpp"
#include "runtime/compile.hpp"
#include "runtime/explain.hpp"
#include "runtime/compare.hpp"
