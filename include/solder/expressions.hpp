// solder's tensors and expressions: the layers core/ to backend/ (DESIGN.md §2) — tensors,
// views, factories, every expression, the planner (kernel_count, explain of an expression) and
// the executors (host; CUDA under nvcc), sd::eval, sd::assign, sd::eager. A file that writes
// expressions and no modules includes this alone: it parses in about half the time of
// solder.hpp (tools/compile_cost.py measures it).
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
#include "expr/losses.hpp"

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

#include "autograd/derivatives.hpp"
#include "autograd/value_and_grad.hpp"
#include "autograd/gradcheck.hpp"
