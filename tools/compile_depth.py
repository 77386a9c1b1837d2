#!/usr/bin/env python3
"""Compile time of deep expressions: an element-wise chain of 25/50/100/200 nested maps and a
residual pattern h = share(h + f(h)) nested 2..16 times, each one assignment alone in a file,
compiled with g++ -O2 like the tests. Prints the seconds per depth and checks the result by
running the program (it compares with a scalar loop). Usage: tools/compile_depth.py [--cxx g++]
"""
import argparse, os, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def chain(depth):
    # depth nested element-wise nodes, alternating * a and + b: each op one level of the tree
    e, ref = "x", "v"
    for i in range(depth):
        if i % 2 == 0:
            e, ref = f"({e} * 0.999f)", f"({ref} * 0.999f)"
        else:
            e, ref = f"({e} + 0.001f)", f"({ref} + 0.001f)"
    return f"""
  sd::Tensor<float, 1> y = {e};
  for (int i = 0; i < 1000; ++i) {{
    float v = x(i), want = {ref};
    if (std::abs(y(i) - want) > 1e-5f * std::abs(want) + 1e-6f) {{ std::printf("wrong at %d\\n", i); return 1; }}
  }}"""

def residual(depth):
    # h = share(h + relu(h) * 0.5f), depth times: without share the tree doubles each time
    body = "\n".join(f"  auto h{i + 1} = sd::share(h{i} + sd::relu(h{i}) * 0.5f);" for i in range(depth))
    refs = "\n".join(f"    v = v + std::max(v, 0.f) * 0.5f;" for _ in range(depth))
    return f"""
  auto h0 = sd::share(x * 1.f);
{body}
  sd::Tensor<float, 1> y = h{depth};
  for (int i = 0; i < 1000; ++i) {{
    float v = x(i);
{refs}
    if (std::abs(y(i) - v) > 1e-4f * std::abs(v) + 1e-6f) {{ std::printf("wrong at %d\\n", i); return 1; }}
  }}"""

def program(body):
    return f"""#include <solder/solder.hpp>
#include <cmath>
#include <cstdio>
namespace sd = solder;
int main() {{
  sd::Tensor<float, 1> x = sd::rand<float>(sd::shape(1000), -1.f, 1.f);
{body}
  std::printf("ok\\n");
  return 0;
}}
"""

def measure(cxx, name, src, tmp):
    path = os.path.join(tmp, name + ".cpp")
    exe = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(src)
    cmd = [cxx, "-std=c++20", "-O2", "-fopenmp", "-fno-math-errno", "-march=native",
           "-I" + os.path.join(ROOT, "include"), path, "-o", exe]
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    secs = time.time() - t
    if r.returncode != 0:
        first = next((l for l in r.stderr.splitlines() if "error" in l), r.stderr[:300])
        return secs, "COMPILE FAILED: " + first.strip()
    run = subprocess.run([exe], capture_output=True, text=True)
    return secs, run.stdout.strip() or "run failed"

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", default="g++")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("element-wise chain (nested maps)")
        for d in (25, 50, 100, 200):
            secs, res = measure(args.cxx, f"chain{d}", program(chain(d)), tmp)
            print(f"  depth {d:4d}: {secs:6.2f} s  {res}", flush=True)
        print("residual h = share(h + relu(h) * 0.5f)")
        for d in (2, 4, 8, 16):
            secs, res = measure(args.cxx, f"res{d}", program(residual(d)), tmp)
            print(f"  depth {d:4d}: {secs:6.2f} s  {res}", flush=True)

if __name__ == "__main__":
    sys.exit(main())
