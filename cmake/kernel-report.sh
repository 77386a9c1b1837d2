#!/usr/bin/env bash
# kernel-report.sh <report> <command...>: the compiler launcher of a CUDA target built with
# KERNEL_REPORT (cmake/SolderCuda.cmake). Runs the command (nvcc with -Xptxas=-v, or ccache
# in front of it, which replays the compiler's output on a hit), writes all its output to
# <report>, passes on every line that is not ptxas's report, and exits with its status.
set -uo pipefail
report=$1
shift
output=$("$@" 2>&1)
status=$?
printf '%s\n' "$output" >"$report"
rest=$(printf '%s\n' "$output" | grep -Ev '^(ptxas info +:|    [0-9]+ bytes stack frame)')
if [ -n "$rest" ]; then printf '%s\n' "$rest" >&2; fi
exit "$status"
