#!/usr/bin/env python3
"""Fails when a path or a `file.rs::symbol` named in the docs no longer exists.

Reads README.md and docs/*.md (not the generated experiment reports in docs/experiments/,
nor a `docs/*-history.md`, which records what once was), takes every
`backticked` span that names a file of the repository (`agent-core/src/agent.rs`,
`guest/linux/cgroup.rs`, `scripts/test.sh`) or a symbol in one
(`store.rs::may_see_job`, `policy/mod.rs::Policy::handle`), and checks it against the
files git tracks: a path must be a tracked file or directory, or the unique tail of one
(`guest/linux/cgroup.rs`); a symbol's last part must be defined in that file (fn, struct,
enum, trait, type, const, static, mod, macro, an enum variant / field at the start of a
line, or the name a test-defining macro is given first: `both!(name, body)`). Prints each
stale reference with its file and line, exits 1 if there is one. Links to a section,
`[text](#anchor)` or `[text](OTHER.md#anchor)`, must name a heading of that page (the
anchor as GitHub makes it from the heading).

Usage: scripts/check-doc-refs.py [DOC.md ...]
"""
import functools
import os
import re
import subprocess
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTS = ("rs", "ts", "tsx", "sh", "py", "toml", "json", "service", "desktop", "scn", "md", "txt", "sql", "svg", "yml", "yaml")
PATH_RE = re.compile(r"^(?:\./)?[\w.-]+(?:/[\w.-]+)*\.(?:%s)$" % "|".join(EXTS))
DIR_RE = re.compile(r"^(?:\./)?[\w.-]+(?:/[\w.-]+)+/$")
SYMBOL_RE = re.compile(r"^((?:[\w.-]+/)*[\w.-]+\.rs)::([\w:]+)$")
RUST_RE = re.compile(r"^(agent_core|lull_core|coordinator|lull_protocol|lull_sim|lull_e2e)((?:::\w+)+)$")
CRATES = {
    "agent_core": "agent-core/src",
    "lull_core": "core/src",
    "coordinator": "coordinator/src",
    "lull_protocol": "protocol/src",
    "lull_sim": "sim/src",
    "lull_e2e": "tests/src",
}
# Things in backticks that look like paths but name files outside the repository, or
# what a build writes (never tracked).
OUTSIDE = ("/", "~", "$", "../", "target/", "artifacts/")


def tracked():
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    files = [f for f in out.splitlines() if f]
    dirs = set()
    for f in files:
        parts = f.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]) + "/")
    return files, dirs


def resolve(path, files):
    """The tracked files the doc's path may mean: itself, or files it is the tail of."""
    path = path[2:] if path.startswith("./") else path
    if path in files:
        return [path]
    return [f for f in files if f.endswith("/" + path)]


def defines(text, name):
    pats = [
        r"\b(?:fn|struct|enum|trait|type|const|static|mod|union)\s+%s\b" % re.escape(name),
        r"macro_rules!\s+%s\b" % re.escape(name),
        r"^\s*(?:pub(?:\([\w:]+\))?\s+)?%s\s*[({:,]" % re.escape(name),  # variant or field
        r"^\s*%s\s*[({,]" % re.escape(name),
        r"^\s*%s\s*$" % re.escape(name),
        # A test a macro defines under the name given first: `both!(name, body);`.
        r"^\s*\w+!\(\s*%s\s*," % re.escape(name),
    ]
    return any(re.search(p, text, re.M) for p in pats)


def rust_path(crate, rest, fileset):
    """None when `crate::a::b::item` names a module file that defines `item`, else why not."""
    segs = rest.strip(":").split("::")
    base = CRATES[crate]
    # The longest module prefix that is a file: a/b.rs or a/b/mod.rs (lib.rs at the root).
    for k in range(len(segs), -1, -1):
        mod = "/".join(segs[:k])
        cands = [base + "/lib.rs"] if k == 0 else [base + "/" + mod + ".rs", base + "/" + mod + "/mod.rs"]
        hit = next((c for c in cands if c in fileset), None)
        if hit is None:
            continue
        if k == len(segs):
            return None
        text = open(os.path.join(ROOT, hit), encoding="utf-8", errors="replace").read()
        # `Type::method`: the last part must be defined; re-exports (`pub use`) count.
        last = segs[-1]
        if defines(text, last) or re.search(r"\bpub use [^;]*\b%s\b" % re.escape(last), text):
            return None
        return "%s not defined in %s" % (last, hit)
    return "no module file for %s" % rest


def slug(heading):
    """GitHub's anchor for a heading: lower case, backticks and punctuation dropped
    (letters, digits, `_` and `-` kept), spaces as hyphens."""
    kept = [c for c in heading.strip().lower() if c in " -_" or unicodedata.category(c)[0] in "LNM"]
    return "".join(kept).replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path):
    """Every heading's anchor in a Markdown file (a repeated heading gets `-1`, `-2`…)."""
    seen, out, fence = {}, set(), False
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if m:
                a = slug(m.group(1))
                n = seen.get(a, 0)
                out.add(a if n == 0 else "%s-%d" % (a, n))
                seen[a] = n + 1
    return out


def main(argv):
    files, dirs = tracked()
    fileset = set(files)
    # A history (`*-history.md`) records what once was, removed code included: not checked.
    docs = argv or ["README.md"] + sorted(
        os.path.join("docs", d)
        for d in os.listdir(os.path.join(ROOT, "docs"))
        if d.endswith(".md") and not d.endswith("-history.md")
    )
    stale = []
    for doc in docs:
        with open(os.path.join(ROOT, doc), encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                for target, anchor in re.findall(r"\]\(([^()\s#]*)#([^()\s]+)\)", line):
                    if target.startswith(("http:", "https:")):
                        continue
                    page = os.path.normpath(os.path.join(os.path.dirname(doc), target)) if target else doc
                    if page not in fileset:
                        stale.append((doc, n, target + "#" + anchor, "no such file"))
                    elif anchor not in anchors(page):
                        stale.append((doc, n, target + "#" + anchor, "no such section in " + page))
                for span in re.findall(r"`([^`\n]+)`", line):
                    span = span.strip()
                    if span.startswith(OUTSIDE) or " " in span:
                        continue
                    r = RUST_RE.match(span)
                    if r:
                        why = rust_path(r.group(1), r.group(2), fileset)
                        if why:
                            stale.append((doc, n, span, why))
                        continue
                    m = SYMBOL_RE.match(span)
                    if m:
                        path, symbol = m.groups()
                        hits = resolve(path, fileset)
                        if not hits:
                            stale.append((doc, n, span, "no such file"))
                            continue
                        last = symbol.split("::")[-1]
                        texts = [open(os.path.join(ROOT, h), encoding="utf-8", errors="replace").read() for h in hits]
                        if not any(defines(t, last) for t in texts):
                            stale.append((doc, n, span, "%s not defined in %s" % (last, ", ".join(hits))))
                        continue
                    if DIR_RE.match(span):
                        d = span[2:] if span.startswith("./") else span
                        if d not in dirs and not any(x.endswith("/" + d) for x in dirs):
                            stale.append((doc, n, span, "no such directory"))
                        continue
                    # A bare name (no folder) is checked only for source files: `config.rs`;
                    # `coordinator.json` or `calibration.svg` name files Lull writes.
                    bare_ok = "/" in span or span.rsplit(".", 1)[-1] in ("rs", "ts", "tsx", "sh", "py", "scn")
                    if PATH_RE.match(span) and bare_ok:
                        if not resolve(span, fileset):
                            stale.append((doc, n, span, "no such file"))
    for doc, n, span, why in stale:
        print("%s:%d: `%s`: %s" % (doc, n, span, why))
    if stale:
        print("%d stale reference(s) in the docs" % len(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
