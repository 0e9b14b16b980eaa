#!/usr/bin/env python3
"""test/docs/extract_blocks.py: turns every C++ block of the given Markdown files into a
translation unit, so that the test build compiles what the docs show.

  extract_blocks.py OUT_DIR FILE.md...

A block is a fence that opens with ```cpp (or ```c++), indented or not (inside a list item,
its indent is removed). The n-th block of docs/x.md becomes x_n.cpp:
  * a program, as written, when it defines `int main(`: the build links it;
  * otherwise a fragment: its leading `#include`, `namespace x = ...;` and `using ...;` lines
    go to file scope, and the rest becomes the body of a coroutine whose
    parameters (SBX_DOC_PARAMETERS, test/docs/prelude.hpp) are the names the docs use without
    declaring them (`runner`, `req`, `ex`, `shell`, ...).
A block whose fence follows the line `<!-- doc: sketch -->` is a synopsis, not code, and is
skipped. Prints one line per block: `program PATH`, `fragment PATH` or `sketch FILE:LINE`.
Files are rewritten only when their text changes, so an unchanged block is not rebuilt.
"""
import os
import re
import sys

FENCE_OPEN = re.compile(r"^(\s*)```(cpp|c\+\+)\s*$")
SKETCH = "<!-- doc: sketch -->"
FILE_SCOPE = re.compile(r"^\s*(#include\b|namespace\s+\w+\s*=|using\s+namespace\b|using\s+[\w:]+\s*;)")


def blocks(path):
    """Yields (line, is_sketch, lines) for each C++ block of a Markdown file."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        opened = FENCE_OPEN.match(lines[i])
        if opened:
            indent = opened.group(1)  # a block inside a list item is indented
            start = i + 1
            sketch = i > 0 and lines[i - 1].strip() == SKETCH
            j = start
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            if j == len(lines):
                sys.exit(f"{path}:{start}: a C++ block is never closed")
            body = [l[len(indent):] if l.startswith(indent) else l.lstrip() for l in lines[start:j]]
            yield start, sketch, body
            i = j + 1
        else:
            i += 1


def fragment_unit(source, line, name, body):
    head = []
    while body and (FILE_SCOPE.match(body[0]) or not body[0].strip()):
        head.append(body.pop(0))
    text = [f"// Generated from {source}:{line} by test/docs/extract_blocks.py.",
            '#include "prelude.hpp"', f'#line {line + 1} "{source}"', *head, "",
            f"boost::asio::awaitable<void> sbx_doc_{name}(SBX_DOC_PARAMETERS)",
            "{",
            "    using namespace sandbox;",
            "    {",
            f'#line {line + 1 + len(head)} "{source}"',
            *body,
            "    }",
            "    co_return;",
            "}"]
    return "\n".join(text) + "\n"


def program_unit(source, line, name, body):
    return "\n".join([f'#line {line + 1} "{source}"', *body]) + "\n"


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: extract_blocks.py OUT_DIR FILE.md...")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    written = set()
    for md in sys.argv[2:]:
        stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(md))[0])
        for index, (line, sketch, body) in enumerate(blocks(md), 1):
            if sketch:
                print(f"sketch {md}:{line}")
                continue
            is_program = any(re.match(r"^int\s+main\s*\(", l) for l in body)
            # Named by order in the file, so an edit above a block does not rename it.
            name = os.path.join(out, f"{stem}_{index}.cpp")
            unit = program_unit if is_program else fragment_unit
            write_if_changed(name, unit(md, line, f"{stem}_{index}", list(body)))
            written.add(os.path.basename(name))
            print(f"{'program' if is_program else 'fragment'} {name}")
    for stale in os.listdir(out):  # blocks that moved or went away
        if stale.endswith(".cpp") and stale not in written:
            os.remove(os.path.join(out, stale))


if __name__ == "__main__":
    main()
