//! Every crate's modules point one way, and the engine's layers hold.
//!
//! This is the check `cargo modules dependencies --lib -p <crate>` gives
//! (module "uses" edges, types and functions folded into the module that
//! defines them; `scripts/module-graph.sh` runs it), done here from the
//! source so that the test suite needs no extra tool. The graph is built
//! from the `use` declarations and the `crate::`, `super::` and `self::`
//! paths of each module (tests excluded), each path resolved to the module
//! that defines the item it names, following `pub use` re-exports as the
//! compiler does. An edge A -> B means A names something B defines.
//!
//! Simplified: items are found by their declaration keyword, so a macro
//! that defines items hides them (their uses then count for the module
//! that invokes the macro); a glob import counts as an edge to the module
//! it globs. Both only ever add edges, so the check errs towards reporting
//! a cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module: its path from the crate root (`""` for the root) and source.
struct Module {
    path: String,
    src: String,
}

/// The library modules of the crate in `dir` (`dir/src`), by path.
fn modules(dir: &Path) -> Vec<Module> {
    fn walk(dir: &Path, prefix: &str, out: &mut Vec<Module>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for p in entries {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            if p.is_dir() {
                let sub = if prefix.is_empty() { name.clone() } else { format!("{prefix}::{name}") };
                walk(&p, &sub, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                // `tests.rs` files are `#[cfg(test)] mod tests;` (their
                // declaration is stripped with the other test items).
                if stem == "tests" {
                    continue;
                }
                let path = match stem {
                    "lib" if prefix.is_empty() => String::new(),
                    "main" if prefix.is_empty() => continue,
                    "mod" => prefix.to_string(),
                    _ if prefix.is_empty() => stem.to_string(),
                    _ => format!("{prefix}::{stem}"),
                };
                out.push(Module { path, src: strip(&std::fs::read_to_string(&p).unwrap()) });
            }
        }
    }
    let mut out = Vec::new();
    walk(&dir.join("src"), "", &mut out);
    out
}

/// The source without comments, string and char literals, and
/// `#[cfg(test)]` items.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r' && (b[i..].starts_with(b"r\"") || b[i..].starts_with(b"r#")) && !ident_before(b, i) {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                out.push('r');
                i += 1;
                continue;
            }
            let end: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            i += 2 + hashes;
            while i < b.len() && !b[i..].starts_with(&end) {
                i += 1;
            }
            i += end.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && char_literal_len(&b[i..]).is_some() {
            i += char_literal_len(&b[i..]).unwrap();
            out.push_str("' '");
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    drop_cfg_test(&out)
}

fn ident_before(b: &[u8], i: usize) -> bool {
    i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The length of a char literal at the start of `b` (`'a'`, `'\n'`,
/// `'\u{..}'`), or None for a lifetime.
fn char_literal_len(b: &[u8]) -> Option<usize> {
    if b.get(1) == Some(&b'\\') {
        let end = b.get(3..)?.iter().position(|&c| c == b'\'')?;
        return Some(end + 4);
    }
    let s = std::str::from_utf8(&b[1..b.len().min(6)]).unwrap_or("");
    let c = s.chars().next()?;
    (b.get(1 + c.len_utf8()) == Some(&b'\'')).then_some(2 + c.len_utf8())
}

/// Remove each `#[cfg(test)]` and `#[cfg(loom)]` item (an attribute, then
/// an item up to its matching brace or semicolon): tests and loom models.
fn drop_cfg_test(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    let next = |r: &str| {
        [r.find("#[cfg(test)]"), r.find("#[cfg(loom)]"), r.find("#[cfg(all(test, loom))]")].into_iter().flatten().min()
    };
    while let Some(at) = next(rest) {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        let (mut depth, mut end) = (0i32, after.len());
        for (j, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = j + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = j + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The names a module defines (items other modules can name).
fn defined(src: &str) -> BTreeSet<String> {
    let words: Vec<&str> = src.split(|c: char| !is_ident(c) && c != '!').filter(|w| !w.is_empty()).collect();
    let mut out = BTreeSet::new();
    for w in words.windows(2) {
        if matches!(
            w[0],
            "fn" | "struct" | "enum" | "trait" | "type" | "const" | "static" | "union" | "mod" | "macro_rules!"
        ) {
            out.insert(w[1].to_string());
        }
    }
    out
}

/// Every `use` declaration as flattened paths `(segments, alias, is_pub)`;
/// a glob ends in `*`.
fn uses(src: &str) -> Vec<(Vec<String>, Option<String>, bool)> {
    let mut out = Vec::new();
    let mut rest = src;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        let is_pub = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let tail = &rest[at + 3..];
        let Some(end) = tail.find(';') else { break };
        flatten(tail[..end].trim(), &mut Vec::new(), is_pub, &mut out);
        rest = &tail[end + 1..];
    }
    out
}

/// The byte offset of the next `word` standing as a word of its own.
fn find_word(s: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let ok_before = at == 0 || !is_ident(s[..at].chars().next_back().unwrap());
        let ok_after = s[at + word.len()..].chars().next().is_none_or(|c| !is_ident(c));
        if ok_before && ok_after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// Expand a use tree into paths.
fn flatten(tree: &str, prefix: &mut Vec<String>, is_pub: bool, out: &mut Vec<(Vec<String>, Option<String>, bool)>) {
    let tree = tree.trim().trim_start_matches("::");
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head: Vec<String> =
            tree[..open].split("::").map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        let Some(close) = tree.rfind('}') else { return };
        let inner = &tree[open + 1..close];
        let n = prefix.len();
        prefix.extend(head);
        let mut depth = 0;
        let mut start = 0;
        for (j, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    flatten(&inner[start..j], prefix, is_pub, out);
                    start = j + 1;
                }
                _ => {}
            }
        }
        flatten(&inner[start..], prefix, is_pub, out);
        prefix.truncate(n);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
        None => (tree, None),
    };
    let mut segs = prefix.clone();
    segs.extend(path.split("::").map(|s| s.trim().to_string()));
    if segs.last().is_some_and(|s| s == "self") {
        segs.pop();
    }
    out.push((segs, alias, is_pub));
}

/// Every `crate::`/`super::`/`self::` path outside `use` declarations,
/// and every path that starts with the name of one of `children` (a bare
/// path to a child module).
fn inline_paths(src: &str, children: &[String]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let starts: Vec<String> = ["crate::", "super::", "self::"]
        .into_iter()
        .map(String::from)
        .chain(children.iter().map(|c| format!("{c}::")))
        .collect();
    for start in &starts {
        let start = start.as_str();
        let mut from = 0;
        while let Some(i) = src[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            if at > 0 && {
                let c = src[..at].chars().next_back().unwrap();
                is_ident(c) || c == ':'
            } {
                continue;
            }
            // `pub(in crate::a)` restricts visibility; it names no item.
            if src[..at].trim_end().ends_with("(in") {
                continue;
            }
            let end = src[at..].find(|c: char| !is_ident(c) && c != ':').map_or(src.len(), |e| at + e);
            let segs: Vec<String> = src[at..end].split("::").filter(|s| !s.is_empty()).map(String::from).collect();
            out.push(segs);
        }
    }
    out
}

/// A path as written (`a::b::C`) in segments.
fn split_path(p: &str) -> Vec<String> {
    p.split("::").map(String::from).collect()
}

/// Each inherent `impl` block: the type it is for (as written, generics
/// dropped) and the byte range of its body.
fn impl_blocks(src: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = find_word(&src[from..], "impl") {
        let at = from + i;
        let Some(open) = src[at..].find('{').map(|o| at + o) else { break };
        let header = &src[at + 4..open];
        // Strip generic arguments, then take the type after `for`, if any.
        let mut plain = String::new();
        let mut depth = 0;
        for c in header.chars() {
            match c {
                '<' => depth += 1,
                '>' if depth > 0 => depth -= 1,
                _ if depth == 0 => plain.push(c),
                _ => {}
            }
        }
        let plain = plain.split(" where ").next().unwrap_or("");
        // A trait's impl counts for the module it is written in.
        let ty = if plain.contains(" for ") { String::new() } else { plain.trim().to_string() };
        let (mut depth, mut close) = (0i32, src.len());
        for (j, c) in src[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + j;
                        break;
                    }
                }
                _ => {}
            }
        }
        if !ty.is_empty() && ty.chars().all(|c| is_ident(c) || c == ':') {
            out.push((ty, open + 1..close));
        }
        from = close.max(at + 4);
    }
    out
}

/// The signatures of the functions in an `impl` body: each `fn` up to its
/// body's opening brace, joined.
fn signatures(body: &str) -> String {
    let mut out = String::new();
    let mut from = 0;
    while let Some(i) = find_word(&body[from..], "fn") {
        let at = from + i;
        let end = body[at..].find(['{', ';']).map_or(body.len(), |e| at + e);
        out.push_str(&body[at..end]);
        out.push('\n');
        from = end.max(at + 2);
    }
    out
}

/// One crate's modules, what each defines and re-exports, and the edges.
struct Graph {
    defs: BTreeMap<String, BTreeSet<String>>,
    /// Per module: name -> absolute path it re-exports (`pub use`).
    reexports: BTreeMap<String, BTreeMap<String, Vec<String>>>,
    /// Per module: absolute module paths it glob re-exports.
    globs: BTreeMap<String, Vec<Vec<String>>>,
    /// Per module: names it re-exports from other crates.
    external: BTreeMap<String, BTreeSet<String>>,
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn join(segs: &[String]) -> String {
    segs.join("::")
}

fn split(path: &str) -> Vec<String> {
    if path.is_empty() { Vec::new() } else { path.split("::").map(String::from).collect() }
}

impl Graph {
    fn is_module(&self, segs: &[String]) -> bool {
        self.defs.contains_key(&join(segs))
    }

    /// Make `segs` (as written in module `m`) absolute from the crate root,
    /// or None for an external crate's path.
    fn absolute(&self, m: &str, segs: &[String]) -> Option<Vec<String>> {
        let mut cur = split(m);
        let mut it = segs.iter().peekable();
        match it.peek().map(|s| s.as_str()) {
            Some("crate") => {
                cur.clear();
                it.next();
            }
            Some("self") => {
                it.next();
            }
            Some("super") => {
                while it.peek().map(|s| s.as_str()) == Some("super") {
                    it.next();
                    cur.pop();
                }
            }
            Some(first) => {
                // A bare path names a child module of `m` (2018 edition).
                let mut child = cur.clone();
                child.push(first.to_string());
                if !self.is_module(&child) {
                    return None;
                }
            }
            None => return None,
        }
        cur.extend(it.cloned());
        Some(cur)
    }

    /// The module that defines what the absolute path `segs` names.
    fn resolve(&self, segs: &[String], depth: u32) -> Option<String> {
        if depth > 16 {
            return None;
        }
        // The longest prefix that is a module.
        let mut k = segs.len();
        while k > 0 && !self.is_module(&segs[..k]) {
            k -= 1;
        }
        let module = join(&segs[..k]);
        let Some(item) = segs.get(k) else { return Some(module) };
        if self.defs[&module].contains(item) {
            return Some(module);
        }
        if self.external.get(&module).is_some_and(|e| e.contains(item)) {
            return None;
        }
        if let Some(target) = self.reexports.get(&module).and_then(|r| r.get(item)) {
            let mut t = target.clone();
            t.extend(segs[k + 1..].iter().cloned());
            return self.resolve(&t, depth + 1);
        }
        for g in self.globs.get(&module).into_iter().flatten() {
            if self.provides(&join(g), item, depth + 1) {
                let mut t = g.clone();
                t.extend(segs[k..].iter().cloned());
                return self.resolve(&t, depth + 1);
            }
        }
        // An item no module declares (a `#[macro_export]` macro is named at
        // the crate root, wherever it is written): no edge.
        (!module.is_empty()).then_some(module)
    }

    /// Whether module `m` defines or re-exports `item`.
    fn provides(&self, m: &str, item: &str, depth: u32) -> bool {
        depth <= 16
            && (self.defs.get(m).is_some_and(|d| d.contains(item))
                || self.reexports.get(m).is_some_and(|r| r.contains_key(item))
                || self.globs.get(m).into_iter().flatten().any(|g| self.provides(&join(g), item, depth + 1)))
    }

    fn build(dir: &Path) -> Graph {
        let mods = modules(dir);
        let mut g = Graph {
            defs: mods.iter().map(|m| (m.path.clone(), defined(&m.src))).collect(),
            reexports: BTreeMap::new(),
            globs: BTreeMap::new(),
            external: BTreeMap::new(),
            edges: BTreeMap::new(),
        };
        for m in &mods {
            for (segs, alias, is_pub) in uses(&m.src) {
                if !is_pub {
                    continue;
                }
                let Some(abs) = g.absolute(&m.path, &segs) else {
                    // Another crate's item: no edge inside this crate.
                    if let Some(name) = alias.or_else(|| segs.last().cloned()) {
                        g.external.entry(m.path.clone()).or_default().insert(name);
                    }
                    continue;
                };
                if abs.last().is_some_and(|s| s == "*") {
                    g.globs.entry(m.path.clone()).or_default().push(abs[..abs.len() - 1].to_vec());
                } else if let Some(name) = alias.or_else(|| abs.last().cloned()) {
                    g.reexports.entry(m.path.clone()).or_default().insert(name, abs);
                }
            }
        }
        for m in &mods {
            let prefix = if m.path.is_empty() { String::new() } else { format!("{}::", m.path) };
            let children: Vec<String> = g
                .defs
                .keys()
                .filter_map(|k| k.strip_prefix(&prefix).filter(|c| !c.is_empty() && !c.contains("::")))
                .map(String::from)
                .collect();
            // What a bare name means here: an import, or an item of this module.
            let mut imports: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (segs, alias, _) in uses(&m.src) {
                if let Some(abs) = g.absolute(&m.path, &segs)
                    && abs.last().is_some_and(|l| l != "*")
                    && let Some(name) = alias.or_else(|| abs.last().cloned())
                {
                    imports.insert(name, abs);
                }
            }
            // The methods of a type count for the module that defines the
            // type (as cargo-modules counts them): the types an inherent
            // `impl` block of a type defined elsewhere names are that
            // module's edges.
            let mut own = m.src.clone();
            for (ty, range) in impl_blocks(&m.src) {
                let at = match imports.get(&ty) {
                    Some(abs) => g.resolve(abs, 0),
                    None => g.absolute(&m.path, &split_path(&ty)).and_then(|abs| g.resolve(&abs, 0)),
                };
                let Some(owner) = at.filter(|o| *o != m.path) else { continue };
                let body = &m.src[range.clone()];
                let mut tos = BTreeSet::new();
                // The types the methods' signatures name (not what their
                // bodies call).
                let is_type = |w: &&str| {
                    w.starts_with(|c: char| c.is_ascii_uppercase()) && w.contains(|c: char| c.is_ascii_lowercase())
                };
                let sigs = signatures(body);
                for word in sigs.split(|c: char| !is_ident(c)).filter(is_type) {
                    if g.defs[&m.path].contains(word) {
                        tos.insert(m.path.clone());
                    } else if let Some(abs) = imports.get(word)
                        && let Some(to) = g.resolve(abs, 0)
                    {
                        tos.insert(to);
                    }
                }
                for segs in inline_paths(&sigs, &children) {
                    if let Some(to) = g.absolute(&m.path, &segs).and_then(|abs| g.resolve(&abs, 0)) {
                        tos.insert(to);
                    }
                }
                tos.remove(&owner);
                g.edges.entry(owner).or_default().extend(tos);
                own.replace_range(range, &" ".repeat(body.len()));
            }
            let mut paths: Vec<Vec<String>> = uses(&own).into_iter().map(|(s, _, _)| s).collect();
            paths.extend(inline_paths(&own, &children));
            for segs in paths {
                let Some(mut abs) = g.absolute(&m.path, &segs) else { continue };
                if abs.last().is_some_and(|s| s == "*") {
                    abs.pop();
                }
                if let Some(to) = g.resolve(&abs, 0)
                    && to != m.path
                {
                    g.edges.entry(m.path.clone()).or_default().insert(to);
                }
            }
        }
        g
    }

    /// The strongly connected groups of more than one module (Tarjan).
    fn cycles(&self) -> Vec<Vec<String>> {
        struct T<'a> {
            g: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on: BTreeSet<&'a str>,
            out: Vec<Vec<String>>,
        }
        fn visit<'a>(t: &mut T<'a>, v: &'a str) {
            let i = t.index.len();
            t.index.insert(v, i);
            t.low.insert(v, i);
            t.stack.push(v);
            t.on.insert(v);
            for w in t.g.edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !t.index.contains_key(w) {
                    visit(t, w);
                    let lw = t.low[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if t.on.contains(w) {
                    let iw = t.index[w];
                    let lv = t.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if t.low[v] == t.index[v] {
                let mut group = Vec::new();
                while let Some(w) = t.stack.pop() {
                    t.on.remove(w);
                    group.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if group.len() > 1 {
                    group.sort();
                    t.out.push(group);
                }
            }
        }
        let mut t = T {
            g: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on: BTreeSet::new(),
            out: Vec::new(),
        };
        for v in self.defs.keys() {
            if !t.index.contains_key(v.as_str()) {
                visit(&mut t, v);
            }
        }
        t.out
    }
}

fn crate_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

fn assert_acyclic(name: &str) {
    let g = Graph::build(&crate_dir(name));
    let cycles = g.cycles();
    let show = |c: &Vec<String>| {
        let members: BTreeSet<&String> = c.iter().collect();
        let mut s = format!("  {}\n", c.join(" <-> "));
        for a in c {
            for b in g.edges[a].iter().filter(|b| members.contains(b)) {
                s += &format!("    {a} -> {b}\n");
            }
        }
        s
    };
    assert!(cycles.is_empty(), "{name}: module cycles\n{}", cycles.iter().map(show).collect::<String>());
}

#[test]
fn engine_modules_are_acyclic() {
    assert_acyclic("engine");
}
#[test]
fn buddy_modules_are_acyclic() {
    assert_acyclic("buddy");
}
#[test]
fn pcp_modules_are_acyclic() {
    assert_acyclic("pcp");
}
#[test]
fn vmalloc_modules_are_acyclic() {
    assert_acyclic("vmalloc");
}
#[test]
fn vmemmap_modules_are_acyclic() {
    assert_acyclic("vmemmap");
}
#[test]
fn hugetlb_modules_are_acyclic() {
    assert_acyclic("hugetlb");
}
#[test]
fn harness_modules_are_acyclic() {
    assert_acyclic("harness");
}

/// The mm modules every layer includes, as every kernel file includes
/// gfp_types.h and vm_event_item.h (engine/src/lib.rs: "mm headers").
const MM_HEADERS: &[&str] = &["mm", "mm::mmzone", "mm::gfp", "mm::vmstat", "mm::memblock"];

/// The layer of an engine module, bottom (0) to top, as engine/src/lib.rs
/// draws them: primitives, mm headers, trace, arch, kernel, mm, machine.
/// A module may name modules of its own layer or below, never above.
fn layer(module: &str) -> usize {
    let under = |p: &str| module == p || module.starts_with(&format!("{p}::"));
    if MM_HEADERS.contains(&module) {
        1
    } else if under("machine") {
        6
    } else if under("mm") {
        5
    } else if under("kernel") {
        4
    } else if under("arch") {
        3
    } else if under("trace") {
        2
    } else {
        0
    }
}

#[test]
fn engine_layers_point_down() {
    let g = Graph::build(&crate_dir("engine"));
    let mut up = Vec::new();
    for (from, tos) in &g.edges {
        for to in tos {
            // The crate root only declares modules and names the root types.
            if !from.is_empty() && layer(from) < layer(to) {
                up.push(format!("{from} (layer {}) -> {to} (layer {})", layer(from), layer(to)));
            }
        }
    }
    assert!(up.is_empty(), "engine: edges that point up a layer:\n{}", up.join("\n"));
}

#[test]
fn the_check_sees_a_cycle_and_an_upward_edge() {
    // The check itself: a made-up crate with a cycle through a re-export.
    let dir = std::env::temp_dir().join(format!("mmlab-module-graph-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("src/a")).unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub mod a;\npub mod b;\npub use a::x::Thing;\n").unwrap();
    std::fs::write(dir.join("src/a/mod.rs"), "pub mod x;\n").unwrap();
    std::fs::write(
        dir.join("src/a/x.rs"),
        "use crate::b::helper; // a comment naming crate::nothing\npub struct Thing;\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/b.rs"), "pub fn helper(_: crate::Thing) {}\n").unwrap();
    let g = Graph::build(&dir);
    assert_eq!(g.cycles(), vec![vec!["a::x".to_string(), "b".to_string()]]);
    std::fs::write(dir.join("src/b.rs"), "pub fn helper() {}\n#[cfg(test)]\nmod t { use crate::Thing; }\n").unwrap();
    assert!(Graph::build(&dir).cycles().is_empty(), "a test module's uses do not count");
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(layer("machine::boot"), 6);
    assert_eq!(layer("mm::vmstat"), 1);
    assert_eq!(layer("mm::memmap"), 5);
    assert_eq!(layer("arch::arm64::cpu"), 3);
    assert_eq!(layer("sync"), 0);
}
