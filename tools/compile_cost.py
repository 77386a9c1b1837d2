#!/usr/bin/env python3
"""Build cost against an older commit, side by side on this machine: g++ -O2 user seconds of one
assignment alone in a file (a softmax, a layer_norm, DESIGN.md's chain, and the header alone;
the least of --runs compiles each; the older commit includes solder.hpp, this tree both
solder.hpp and solder/expressions.hpp, the header such a file needs), then, with --suite, the CPU seconds of the host test files
that both commits have, compiled two at a time with the release flags and no ccache.
Usage: tools/compile_cost.py [--against c444a8e] [--runs 2] [--suite] [--cxx g++]
"""
import argparse, os, shutil, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FILES = {
    "header": "",
    "softmax": "void f(sd::Tensor<float, 2> const& x, sd::Tensor<float, 2>& y) { y = sd::softmax(x * 2.f, -1); }",
    "layer_norm": "void f(sd::Tensor<float, 2> const& x, sd::Tensor<float, 1> const& w, sd::Tensor<float, 1> const& b,\n"
                  "       sd::Tensor<float, 2>& y) { y = sd::layer_norm(x, w, b); }",
    "chain": "void f(sd::Tensor<float, 2> const& x, sd::Tensor<float, 1> const& b, sd::Tensor<float, 2>& y) {\n"
             "  y = sd::relu(x * 2.f + b) - sd::exp(-x) * 0.5f;\n}",
}
FLAGS = ["-std=c++20", "-O2", "-fopenmp", "-fno-math-errno", "-march=native"]
TEST_FLAGS = ["-std=c++20", "-O3", "-DNDEBUG", "-O2", "-march=native", "-fno-math-errno", "-fopenmp",
              "-DSOLDER_HAVE_DNNL=1", "-DSOLDER_HAVE_EIGEN=1", "-DSOLDER_HAVE_OPENBLAS=1",
              '-DSOLDER_TESTS_BINARY_DIR="/tmp"', '-DSOLDER_TESTS_SOURCE_DIR="/tmp"',
              "-isystem", "/usr/include/eigen3", "-isystem", "/usr/include/x86_64-linux-gnu/openblas-pthread"]


def user_seconds(cmd):
    t = os.times()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    u = os.times()
    return (u.children_user - t.children_user), (u.children_system - t.children_system)


def one_file(cxx, tree, body, tmp, runs, header="solder.hpp"):
    src = os.path.join(tmp, "f.cpp")
    with open(src, "w") as f:
        f.write(f"#include <solder/{header}>\nnamespace sd = solder;\n" + body + "\n")
    cmd = [cxx, *FLAGS, "-I" + os.path.join(tree, "include"), "-c", src, "-o", os.path.join(tmp, "f.o")]
    return min(user_seconds(cmd)[0] for _ in range(runs))


def suite(cxx, tree, names, tmp):
    procs, cpu, start = [], 0.0, time.time()
    pending = list(names)
    while pending or procs:
        while pending and len(procs) < 2:
            n = pending.pop(0)
            cmd = [cxx, *TEST_FLAGS, "-I" + os.path.join(tree, "include"), "-c",
                   os.path.join(tree, "tests", n), "-o", os.path.join(tmp, n + ".o")]
            procs.append(subprocess.Popen(cmd, cwd=os.path.join(tree, "tests")))
        pid, status, usage = os.wait4(-1, 0)
        procs = [p for p in procs if p.pid != pid]
        if status != 0:
            sys.exit(f"compile failed in {tree}")
        cpu += usage.ru_utime + usage.ru_stime
    return cpu, time.time() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default="c444a8e")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--suite", action="store_true")
    ap.add_argument("--cxx", default="g++")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = os.path.join(tmp, "old")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-f", "--detach", old, a.against],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            print(f"g++ -O2 user seconds, least of {a.runs}: {a.against} (solder.hpp) / this tree "
                  "(solder.hpp, ratio) / this tree (solder/expressions.hpp, ratio)")
            for name, body in FILES.items():
                o = one_file(a.cxx, old, body, tmp, a.runs)
                n = one_file(a.cxx, ROOT, body, tmp, a.runs)
                e = one_file(a.cxx, ROOT, body, tmp, a.runs, "expressions.hpp")
                print(f"  {name:11s} {o:6.2f} {n:6.2f} {n / o:5.2f} {e:6.2f} {e / o:5.2f}")
            if a.suite:
                def tests(tree):
                    return {f for f in os.listdir(os.path.join(tree, "tests")) if f.endswith(".cpp")}
                names = sorted(tests(old) & tests(ROOT))
                print(f"the {len(names)} host test files of both, 2 at a time (CPU s, wall s)")
                for label, tree in ((a.against, old), ("this tree", ROOT)):
                    cpu, wall = suite(a.cxx, tree, names, tmp)
                    print(f"  {label:11s} {cpu:6.0f} {wall:6.0f}")
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", old], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
