#!/usr/bin/env python3
"""Lay out the READMEs' Rust examples as scratch crates, for `.ci/readme-examples`.

Usage: readme_examples.py REPO_ROOT OUT_DIR

The files read are every `README.md`, `RECIPES.md` and `POSTGRES.md` (a crate's further
examples, beside its README) of the workspace; "README" below means any of them.

A README example is checked against the `[dependencies]` block a reader sees above it: each
```toml block holding `[dependencies]` opens a group, which runs until the next ```toml block;
every ```rust block in the group that is a complete program (it has `fn main`), or that the
README marks as an example (`<!-- example: … -->` on the line before), or that rustdoc would
compile (no `ignore`), is one example. `ignore` fragments are skipped (they are pieces of a
program the text completes); `compile_fail` blocks are skipped too. Fragments are completed as
rustdoc completes them: `# ` hidden lines are kept, and code without `fn main` goes inside one.
A block marked `<!-- example: test -->` is a test file of the reader's crate (`tests/…`, with
the block's `[dev-dependencies]`), checked as it stands, without a `fn main`.

Each group becomes one crate under OUT_DIR (outside the workspace, and a workspace of its own,
so that nothing of the workspace's manifest leaks in; files are rewritten only when they
change, so that a second run checks nothing again): its Cargo.toml is the block as written, with the
workspace's `svc-*` crates pointed at their folders through `[patch.crates-io]` (they are not
published), and each example is one binary, `src/bin/line-N.rs`, N being the line of its fence
in the README, or one integration test, `tests/line-N.rs`, for a test example. The workspace's Cargo.lock is copied in so that versions resolve as the
workspace's do.

Prints one line per crate: `DIR<TAB>README<TAB>TOML_LINE<TAB>N,N,…`. Exits 1, naming the README
and line, for a complete program that has no `[dependencies]` block above it.
"""

import pathlib
import re
import shutil
import sys
import tomllib

FENCE = re.compile(r"^(`{3,})(.*)$")
EXAMPLE_MARK = re.compile(r"^<!--\s*example:")
# A test of the reader's crate (`tests/…`), not a program.
TEST_MARK = re.compile(r"^<!--\s*example:\s*test\b")
# The files whose examples are checked, wherever they stand in the workspace.
DOC_NAMES = ("README.md", "RECIPES.md", "POSTGRES.md")


def blocks(text):
    """(line of the opening fence, info string, body lines, line before the fence)."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i].strip())
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        start = i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i])
            i += 1
        before = lines[start - 1].strip() if start > 0 else ""
        yield start + 1, info, body, before
        i += 1


def rust_attrs(info):
    """The attributes of a rust block (`rust,no_run` -> {"no_run"}), or None if not rust."""
    words = [w.strip() for w in info.replace(" ", ",").split(",") if w.strip()]
    if not words or words[0] != "rust":
        return None
    return set(words[1:])


def has_main(code):
    return re.search(r"\bfn\s+main\s*\(", code) is not None


def unhide(body):
    """rustdoc's hidden lines (`# code`, a lone `#`) are part of the program."""
    out = []
    for line in body:
        stripped = line.lstrip()
        if stripped == "#":
            out.append("")
        elif stripped.startswith("# "):
            out.append(line[: len(line) - len(stripped)] + stripped[2:])
        elif stripped.startswith("##"):
            out.append(line[: len(line) - len(stripped)] + stripped[1:])
        else:
            out.append(line)
    return out


def as_program(body):
    """The block as a file: itself when it has `fn main`, else inside one, as rustdoc does."""
    lines = unhide(body)
    code = "\n".join(lines)
    if has_main(code):
        return code + "\n"
    inner = [line for line in lines if line.strip()]
    if inner and inner[-1].strip().endswith("(())"):
        # rustdoc: a doctest ending in `Ok(())` may use `?`.
        return (
            "fn main() {\n    #[allow(unreachable_code)]\n"
            "    fn _inner() -> Result<(), Box<dyn std::error::Error>> {\n"
            + code
            + "\n    }\n    _inner().unwrap()\n}\n"
        )
    return "#[allow(unused)]\nfn main() {\n" + code + "\n}\n"


def workspace_crates(root):
    """{package name: folder} of the workspace's own `svc-*` crates."""
    manifest = tomllib.loads((root / "Cargo.toml").read_text())
    crates = {}
    for member in manifest["workspace"]["members"]:
        package = tomllib.loads((root / member / "Cargo.toml").read_text())["package"]
        if package["name"].startswith("svc-"):
            crates[package["name"]] = (root / member).resolve()
    return crates


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    out = pathlib.Path(sys.argv[2]).resolve()
    crates = workspace_crates(root)
    profile = tomllib.loads((root / "Cargo.toml").read_text()).get("profile", {}).get("dev")
    readmes = sorted(
        p for name in DOC_NAMES for p in root.rglob(name)
        if not any(part in ("target", ".git", "node_modules") for part in p.relative_to(root).parts)
    )
    errors = []
    groups = []  # (readme, toml line, toml text, [(line, program, is_test)])
    for readme in readmes:
        rel = readme.relative_to(root)
        group = None
        for line, info, body, before in blocks(readme.read_text()):
            if info.split(",")[0].strip() == "toml":
                text = "\n".join(body)
                group = None
                if re.search(r"^\s*\[dependencies\]\s*$", text, re.M):
                    group = (str(rel), line, text, [])
                    groups.append(group)
                continue
            attrs = rust_attrs(info)
            if attrs is None or "compile_fail" in attrs:
                continue
            code = "\n".join(unhide(body))
            marked = EXAMPLE_MARK.match(before) is not None
            if "ignore" in attrs and not (has_main(code) or marked):
                continue
            if group is None:
                if has_main(code) or marked:
                    errors.append(
                        f"{rel}:{line}: a complete example with no ```toml [dependencies] block "
                        "above it: a reader cannot tell what it needs"
                    )
                continue
            if TEST_MARK.match(before):
                group[3].append((line, code + "\n", True))
            else:
                group[3].append((line, as_program(body), False))
    if errors:
        print("\n".join(errors), file=sys.stderr)
        sys.exit(1)

    lock = root / "Cargo.lock"
    made = set()
    for readme, toml_line, text, examples in groups:
        if not examples:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", f"{readme.lower()}-{toml_line}").strip("-")
        crate = out / slug
        made.add(crate)
        (crate / "src" / "bin").mkdir(parents=True, exist_ok=True)
        (crate / "tests").mkdir(parents=True, exist_ok=True)
        deps = tomllib.loads(text)
        named = set()
        for table in ("dependencies", "dev-dependencies", "build-dependencies"):
            named |= set(deps.get(table, {}))
        patch = [f'{name} = {{ path = "{crates[name]}" }}' for name in sorted(named) if name in crates]
        manifest = [
            "[package]",
            f'name = "readme-{slug}"',
            'version = "0.0.0"',
            'edition = "2024"',
            "publish = false",
            "autoexamples = false",
            "autotests = false",
            "",
            text,
            "",
        ]
        for line, _, is_test in examples:
            if is_test:
                manifest += ["[[test]]", f'name = "line-{line}"', f'path = "tests/line-{line}.rs"', ""]
        if patch:
            manifest += ["[patch.crates-io]", *patch, ""]
        if profile:
            # The workspace's dev profile, so that dependencies its own builds checked in the
            # same target directory are reused, not checked again.
            manifest.append("[profile.dev]")
            manifest += [f"{k} = {toml_value(v)}" for k, v in profile.items() if k != "package"]
            for pattern, settings in profile.get("package", {}).items():
                manifest.append(f'[profile.dev.package."{pattern}"]')
                manifest += [f"{k} = {toml_value(v)}" for k, v in settings.items()]
        manifest += ["", "[workspace]"]
        write_if_changed(crate / "Cargo.toml", "\n".join(manifest) + "\n")
        if lock.exists():
            shutil.copy(lock, crate / "Cargo.lock")
        for folder, tests in ((crate / "src" / "bin", False), (crate / "tests", True)):
            files = {f"line-{line}.rs": program for line, program, is_test in examples
                     if is_test == tests}
            for stale in folder.iterdir():
                if stale.name not in files:
                    stale.unlink()
            for name, program in files.items():
                write_if_changed(folder / name, program)
        print(f"{crate}\t{readme}\t{toml_line}\t{','.join(str(l) for l, _, _ in examples)}")
    remove_stale(out, made)


def write_if_changed(path, text):
    """Unchanged files keep their time, so that cargo does not check them again."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def remove_stale(out, made):
    for crate in out.iterdir() if out.exists() else []:
        if crate not in made:
            shutil.rmtree(crate)


if __name__ == "__main__":
    main()
